"""A store with labelled runs, for calibration from a store (``loopscope calibrate --db`` and
the Policy page's "Calibrate from labels"): the scenario library (28 labelled loops, 20
look-alikes) stored by ``loopscope analyze --db``, some runs without their scenario label,
then human labels written as the collector stores those of the dashboard's Labels page."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from loopscope.offline import cli
from loopscope.offline.scenarios import SHAPES, generate
from loopscope_collector.storage import open_database
from loopscope_collector.storage.writes import write_labels
from loopscope_collector.storage.writes.labels import Label

HUMAN: dict[str, str] = {
    "scn-read_spin-0-s3": "true_loop",        # unlabelled in the store: a human says loop
    "scn-healthy_lookup-0-s3": "no_loop",     # ... and no loop
    "scn-budget_runaway-0-s3": "false_kill",  # ... and that a kill on it was wrong (it failed)
    "scn-write_duplicate-1-s3": "no_loop",    # a human overrides the scenario's label
}
"""Human labels, as the Labels page gives them."""
UNLABELLED: frozenset[str] = frozenset(HUMAN) - {"scn-write_duplicate-1-s3"}
"""Runs stored without their scenario label."""


def scenario_runs() -> list[dict[str, Any]]:
    """The scenario library: 28 labelled loops and 20 look-alikes, as Episode records."""
    return generate(seed=3, per_shape=2, faults=False, shapes=list(SHAPES))


def write_jsonl(path: Path, runs: list[dict[str, Any]]) -> Path:
    """``runs`` as Episode JSONL at ``path``."""
    path.write_text("".join(json.dumps(run) + "\n" for run in runs), encoding="utf-8")
    return path


def store_runs(path: Path, runs: list[dict[str, Any]]) -> Path:
    """``runs`` stored at ``path`` by ``loopscope analyze --db`` (its report dropped)."""
    jsonl = write_jsonl(path.with_suffix(".jsonl"), runs)
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["analyze", str(jsonl), "--db", str(path), "--json"])
    assert code == 0, f"loopscope analyze --db {path} exited {code}"
    return path


def build_labelled_store(path: Path) -> Path:
    """The scenario library at ``path``, ``UNLABELLED`` without their scenario label, and
    the ``HUMAN`` labels written."""
    runs = scenario_runs()
    for run in runs:
        if run["episode_id"] in UNLABELLED:
            run.pop("label", None)
    store_runs(path, runs)
    db = open_database(path)
    try:
        cur = db.cursor()
        write_labels(cur, [Label(episode_id=e, span_id="", label=v, note=None)
                           for e, v in HUMAN.items()])
        cur.close()
    finally:
        db.close()
    return path


def as_labelled_jsonl(path: Path) -> Path:
    """The same runs as Episode JSONL, each human label on its record as calibration reads
    it (a human says loop or not, never where the loop began; a false kill: no loop)."""
    runs = scenario_runs()
    for run in runs:
        if run["episode_id"] in HUMAN:
            run["label"] = {"loop": HUMAN[run["episode_id"]] == "true_loop"}
    return write_jsonl(path, runs)
