"""The same input gives the same verdicts in every process: nothing in the core may depend on
the order of a set or on string hashing (each process seeds ``hash`` differently), or the
guard, the collector and an offline replay of one run would disagree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import glob, hashlib, json, sys
from loopscope.detect.episode_records import parse_episode_line
from loopscope.detect.replay import replay
out = []
for path in sys.argv[1:]:
    for line in open(path, encoding="utf-8"):
        if line.strip():
            report = replay(parse_episode_line(line))
            out.append([report.episode.episode_id,
                        [(f.step, f.detector, f.action, f.rung) for f in report.flags],
                        [(i, b.kind, a.progress, a.streak) for i, (b, a) in sorted(report.calls.items())]])
print(hashlib.sha256(json.dumps(out).encode()).hexdigest())
"""


def _digest(seed: str, files: list[str]) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed,
           "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("instrumentation",))}
    done = subprocess.run([sys.executable, "-c", SCRIPT, *files], env=env, capture_output=True,
                          text=True, timeout=300, check=True)
    return done.stdout.strip()


def test_verdicts_do_not_depend_on_the_process_hash_seed() -> None:
    files = [str(ROOT / "tests" / "corpus" / "corpus.jsonl")]
    shared = ROOT.parent / "shared" / "data" / "tau2_grok_airline_telecom.jsonl"
    if shared.is_file():
        files.append(str(shared))
    assert _digest("1", files) == _digest("2", files) == _digest("3", files)
