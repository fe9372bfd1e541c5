"""The authored loop corpus: valid Episode JSONL, complete labels, balanced classes, no drift."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from loopscope.detect.episode_records import EpisodeRecord, parse_episode_line

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import writer  # noqa: E402  (the corpus writer, beside this file)

CORPUS = HERE / "corpus.jsonl"
KINDS = {
    "exact_repeat", "repeat_same_error", "oscillation", "param_jitter", "output_stagnation",
    "monologue", "cursor_stuck", "poll_legit", "poll_timeout", "write_retry_legit",
    "write_duplicate", "none",
}
CLASSES = set(writer.CLASSES)
V3_CLASSES = set(list(writer.CLASSES)[list(writer.CLASSES).index("normalised_output"):])
"""The classes added for detection v3 (issue 16)."""
DESIGN_SEEDS = {
    "search_orders", "get_operation_status", "oscillation", "file_offsets",
    "create_order_timeout", "buy_another_one",
}


def _lines() -> list[str]:
    return CORPUS.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return [json.loads(line) for line in _lines()]


@pytest.fixture(scope="module")
def episodes() -> list[EpisodeRecord]:
    return [parse_episode_line(line) for line in _lines()]


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("corpus_build", HERE / "build_corpus.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_jsonl_equals_the_builder_output() -> None:
    """corpus.jsonl is exactly what build_corpus.py writes; rebuild it after any edit."""
    assert CORPUS.read_text(encoding="utf-8") == _build_module().render()


def test_every_line_parses_as_an_episode(episodes: list[EpisodeRecord]) -> None:
    assert len(episodes) >= 110
    ids = [ep.episode_id for ep in episodes]
    assert len(ids) == len(set(ids))
    assert all(i.startswith("corpus-") for i in ids)


def test_lines_are_sorted_keys_without_ascii_escapes(records: list[dict]) -> None:
    for line, record in zip(_lines(), records, strict=True):
        assert line == json.dumps(record, sort_keys=True, ensure_ascii=False)


def test_every_label_is_complete(records: list[dict]) -> None:
    for r in records:
        label, steps, eid = r["label"], r["steps"], r["episode_id"]
        assert isinstance(label["loop"], bool), eid
        assert label["kind"] in KINDS, eid
        why = label["why"]
        assert isinstance(why, str) and why.strip() and "\n" not in why, eid
        assert r["source"] == "authored: tests/corpus", eid
        assert r["outcome"] in {"success", "failure", "unknown"}, eid
        assert steps[0]["type"] == "message" and steps[0]["role"] == "user", eid
        first = label["first_loop_step"]
        if label["loop"]:
            assert label["kind"] not in {"none", "poll_legit", "write_retry_legit"}, eid
            assert isinstance(first, int) and not isinstance(first, bool), eid
            assert 0 <= first < len(steps), eid
            assert steps[first]["type"] in {"tool", "message"}, eid
            if steps[first]["type"] == "message":
                assert steps[first]["role"] == "assistant", eid
        else:
            assert first is None, eid


def test_tool_steps_are_complete(records: list[dict]) -> None:
    for r in records:
        eid, last_t, call_ids = r["episode_id"], -1.0, set()
        for step in r["steps"]:
            assert step["t"] > last_t, eid
            last_t = step["t"]
            if step["type"] != "tool":
                continue
            assert step["tool_call_id"] not in call_ids, eid
            call_ids.add(step["tool_call_id"])
            assert step["kind"] in {None, "read", "write", "poll"}, eid
            assert step["status"] in {"ok", "error", "timeout"}, eid
            assert isinstance(step["args"], dict) and isinstance(step["output"], str), eid
            assert step["tokens_in"] > 0 and step["tokens_out"] > 0, eid


def test_loops_and_look_alikes_are_balanced(episodes: list[EpisodeRecord]) -> None:
    counts = Counter(ep.loop_label for ep in episodes)
    assert counts[True] + counts[False] == len(episodes)
    assert counts[True] >= 0.45 * len(episodes)
    assert counts[False] >= 0.45 * len(episodes)


def test_every_class_has_loops_and_look_alikes(records: list[dict]) -> None:
    by_class = Counter((r["meta"]["corpus_class"], r["label"]["loop"]) for r in records)
    assert {cls for cls, _ in by_class} == CLASSES
    for cls in CLASSES:
        assert by_class[cls, True] >= 3, cls
        assert by_class[cls, False] >= 3, cls


def test_every_design_seed_has_a_loop_and_a_look_alike(records: list[dict]) -> None:
    seeds = Counter((r["meta"].get("design_seed"), r["label"]["loop"]) for r in records
                    if r["meta"]["corpus_class"] == "design_seed")
    for seed in DESIGN_SEEDS:
        assert seeds[seed, True] >= 1 and seeds[seed, False] >= 1, seed


def test_readme_table_matches_the_corpus(records: list[dict]) -> None:
    """The class table in README.md shows the corpus's real counts."""
    counts = Counter((r["meta"]["corpus_class"], r["label"]["loop"]) for r in records)
    rows = {}
    for line in (HERE / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = (int(cells[2]), int(cells[3]))
    assert rows == {cls: (counts[cls, True], counts[cls, False]) for cls in CLASSES}


def _parallel(record: dict) -> bool:
    """Whether some two tool calls started within 50 ms of each other (one model turn)."""
    steps = record["steps"]
    return any(
        b["type"] == "tool" and a["type"] == "tool" and b["t"] - a["t"] < 0.05
        for a, b in itertools.pairwise(steps)
    )


def test_detection_v3_classes_cover_what_the_issue_asks(records: list[dict]) -> None:
    """Issue 16's evidence: at least 60 new labelled episodes, 10 of 60+ steps, 10 with
    parallel tool calls and 15 with no declared kind, each class with loops and look-alikes
    and a one-line why."""
    new = [r for r in records if r["meta"]["corpus_class"] in V3_CLASSES]
    assert len(new) >= 60
    assert sum(len(r["steps"]) >= 60 for r in new) >= 10
    assert sum(_parallel(r) for r in new) >= 10
    undeclared = [r for r in new
                  if all(s["kind"] is None for s in r["steps"] if s["type"] == "tool")]
    assert len(undeclared) >= 15
