"""The Import page's analysis: Episode JSONL and OTLP JSON, analysed in place."""

from __future__ import annotations

import json
from pathlib import Path

from loopscope.offline.scenarios import generate
from loopscope_collector.receive.decode import decode_request
from loopscope_collector.runs.otlp_files import EpisodeGrouper
from loopscope_dashboard import uploads


def _jsonl(episodes: list[dict]) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in episodes).encode()


def test_episode_jsonl_is_replayed_with_progress_and_bad_lines_reported() -> None:
    episodes = generate(seed=0, per_shape=1, faults=False)
    seen: list[tuple[int, int]] = []
    analysis = uploads.analyse("runs.jsonl", _jsonl(episodes) + b"{not json}\n",
                               progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (len(episodes), len(episodes)) and len(seen) == len(episodes)
    assert analysis.summary["episodes"] == len(episodes)
    assert [p.line for p in analysis.problems] == [len(episodes) + 1]
    flags = uploads.flags_frame(analysis)
    assert "scn-read_spin-0-s0" in set(flags["episode_id"])
    runs = uploads.episodes_frame(analysis)
    healthy = runs.set_index("episode_id").loc["scn-healthy_lookup-0-s0"]
    assert healthy["flags"] == 0


def test_episode_runs_become_otlp_json_the_collector_decodes() -> None:
    analysis = uploads.analyse("shop.jsonl",
                               _jsonl(generate(seed=0, per_shape=1, shapes=["read_spin"],
                                               faults=False)))
    [body] = uploads.otlp_bodies(analysis)
    spans = decode_request(body, content_type="application/json", content_encoding=None,
                           max_bytes=len(body) + 1)
    assert {s.service_name for s in spans} == {"shop"}
    grouper = EpisodeGrouper()
    grouper.add(spans)
    [run] = grouper.runs()
    assert run.episode_id == "scn-read_spin-0-s0"


def test_an_otlp_file_is_analysed_and_sent_as_it_is(tmp_path: Path) -> None:
    analysis = uploads.analyse("a.jsonl", _jsonl(generate(seed=0, per_shape=1,
                                                          shapes=["oscillation"],
                                                          faults=False)))
    otlp = b"\n".join(uploads.otlp_bodies(analysis)) + b"\n"
    again = uploads.analyse("traces.json", otlp)
    assert again.fmt == "otlp"
    assert [r.episode.episode_id for r in again.reports] == ["scn-oscillation-0-s0"]
    assert again.reports[0].flags
    assert uploads.otlp_bodies(again) == [otlp.strip()]
