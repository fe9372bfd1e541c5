"""The scenario library: every episode is valid Episode JSONL and its label is true."""

from __future__ import annotations

import copy
import itertools
import json
import random
from collections import Counter

import pytest

from loopscope.offline.scenarios import (
    FAULTS,
    SHAPES,
    Scenario,
    generate,
    inject_fault,
    write_jsonl,
)

TASK_TYPES = {"lookup", "polling", "coding", "research", "transaction", "other"}
KINDS = {
    "exact_repeat",
    "repeat_same_error",
    "oscillation",
    "param_jitter",
    "output_stagnation",
    "monologue",
    "cursor_stuck",
    "poll_legit",
    "poll_timeout",
    "write_retry_legit",
    "write_duplicate",
    "none",
}
TOOL_KEYS = {
    "type",
    "tool",
    "tool_call_id",
    "kind",
    "args",
    "output",
    "status",
    "t",
    "tokens_in",
    "tokens_out",
}
EXTRA_KEYS = {"intent", "reconciles", "found", "deadline_s"}
VAGUE = "error: something went wrong"

EPISODES = generate(seed=0, per_shape=3)


def by_shape(name: str) -> list[dict]:
    return [e for e in EPISODES if e["meta"]["scenario"] == name and "fault" not in e["meta"]]


def tools(episode: dict) -> list[tuple[int, dict]]:
    return [(i, s) for i, s in enumerate(episode["steps"]) if s["type"] == "tool"]


def sig(step: dict) -> tuple[str, str]:
    return step["tool"], json.dumps(step["args"], sort_keys=True, ensure_ascii=False)


def trigram_jaccard(a: str, b: str) -> float:
    ga = {a[i : i + 3] for i in range(len(a) - 2)}
    gb = {b[i : i + 3] for i in range(len(b) - 2)}
    return len(ga & gb) / len(ga | gb)


def validate(episode: dict) -> None:
    assert set(episode) == {
        "episode_id",
        "source",
        "task",
        "task_type",
        "outcome",
        "label",
        "steps",
        "meta",
    }
    assert episode["source"] == "authored: loopscope.offline.scenarios"
    assert episode["task_type"] in TASK_TYPES
    assert episode["outcome"] in {"success", "failure"}
    label, steps = episode["label"], episode["steps"]
    assert set(label) == {"loop", "kind", "first_loop_step", "why"}
    assert label["kind"] in KINDS
    assert isinstance(label["why"], str) and label["why"] and "\n" not in label["why"]
    assert steps[0] == {"type": "message", "role": "user", "content": episode["task"]}
    last_t, ids = -1.0, set()
    for i, step in enumerate(steps):
        if step["type"] == "message":
            assert set(step) == {"type", "role", "content"}
            assert step["role"] in {"user", "assistant"} and isinstance(step["content"], str)
            continue
        assert step["type"] == "tool"
        assert set(step) >= TOOL_KEYS and set(step) - TOOL_KEYS <= EXTRA_KEYS
        assert step["kind"] in {"read", "write", "poll", None}
        assert step["status"] in {"ok", "error", "timeout"}
        assert isinstance(step["args"], dict) and isinstance(step["output"], str)
        assert isinstance(step["tokens_in"], int) and step["tokens_in"] > 0
        assert isinstance(step["tokens_out"], int) and step["tokens_out"] > 0
        assert step["t"] >= last_t + 0.5, f"step {i}: t must grow by >= 0.5 s"
        last_t = step["t"]
        assert step["tool_call_id"] not in ids
        ids.add(step["tool_call_id"])
        if "reconciles" in step:
            target = next(s for s in steps[:i] if s.get("tool_call_id") == step["reconciles"])
            assert target["status"] == "timeout" and isinstance(step["found"], bool)
    first = label["first_loop_step"]
    if label["loop"] is True:
        assert type(first) is int and 0 <= first < len(steps)
        target = steps[first]
        assert target["type"] == "tool" or target.get("role") == "assistant"
    else:
        assert label["loop"] is False and first is None
        assert label["kind"] in {"none", "poll_legit", "write_retry_legit"}
    meta = episode["meta"]
    assert meta["model"] == "scripted-fake" and meta["scenario"] in SHAPES
    cost = sum(s["tokens_in"] * 2.5e-6 + s["tokens_out"] * 1e-5 for _, s in tools(episode))
    assert meta["cost_usd"] == pytest.approx(cost, abs=1e-6)


@pytest.mark.parametrize("episode", EPISODES, ids=lambda e: e["episode_id"])
def test_every_episode_is_valid_and_labelled_like_its_shape(episode):
    validate(episode)
    shape = SHAPES[episode["meta"]["scenario"]]
    assert episode["label"]["loop"] is shape.loop
    assert episode["label"]["kind"] == shape.kind
    if shape.loop:
        assert episode["outcome"] == "failure"
    elif shape.name != "budget_runaway":
        assert episode["outcome"] == "success"
        roles = [s.get("role") for s in episode["steps"]]
        assert ("assistant", "assistant") not in set(itertools.pairwise(roles))


def test_shapes_catalogue():
    assert list(SHAPES)[:3] == ["healthy_lookup", "read_spin", "window_repeat"]
    assert len(SHAPES) == 24
    for name, scenario in SHAPES.items():
        assert isinstance(scenario, Scenario) and scenario.name == name
        assert scenario.task_type in TASK_TYPES and scenario.description
    assert {e["meta"]["scenario"] for e in EPISODES} == set(SHAPES)
    assert {s.kind for s in SHAPES.values()} == KINDS


def test_generate_is_deterministic_and_seeded():
    assert generate(seed=7) == generate(seed=7)
    a, b = generate(seed=7), generate(seed=8)
    assert [e["episode_id"].replace("-s7", "") for e in a] == [
        e["episode_id"].replace("-s8", "") for e in b
    ]
    assert sum(x["steps"] != y["steps"] for x, y in zip(a, b, strict=True)) > len(a) * 0.9
    assert len({e["episode_id"] for e in a}) == len(a)


def test_generate_counts_subsets_and_ids():
    assert len(generate(per_shape=2)) == 24 * 2 + 3 * len(FAULTS)
    only = generate(seed=3, shapes=["read_spin", "poll_legit"], per_shape=1)
    assert [e["episode_id"] for e in only] == [
        "scn-read_spin-0-s3",
        "scn-poll_legit-0-s3",
        "scn-poll_legit-0-s3-timeout",
        "scn-poll_legit-0-s3-duplicate_return",
        "scn-poll_legit-0-s3-vague_error",
    ]
    assert only[0] == next(e for e in generate(seed=3) if e["episode_id"] == "scn-read_spin-0-s3")
    assert len(generate(faults=False, per_shape=1)) == 24


def test_unknown_shape_names_it_and_lists_valid_ones():
    with pytest.raises(ValueError, match=r"'read_spinn'.*read_spin"):
        generate(shapes=["read_spin", "read_spinn"])


# --- faults -------------------------------------------------------------------------------------


def test_generated_faults_keep_labels_true():
    faulted = [e for e in EPISODES if "fault" in e["meta"]]
    assert Counter(e["meta"]["fault"] for e in faulted) == {f: 3 for f in FAULTS}
    for episode in faulted:
        validate(episode)
        assert episode["label"]["loop"] is False
        assert episode["episode_id"].endswith("-" + episode["meta"]["fault"])


@pytest.mark.parametrize("name", ["healthy_lookup", "poll_legit", "cursor_legit", "read_spin"])
def test_timeout_fault_inserts_one_retry_and_shifts_labels(name):
    original = by_shape(name)[1]
    before = copy.deepcopy(original)
    faulted = inject_fault(original, "timeout", random.Random(5))
    assert original == before
    validate(faulted)
    i = faulted["meta"]["fault_step"]
    failed, retry = faulted["steps"][i], faulted["steps"][i + 1]
    assert failed["status"] == "timeout" and failed["output"] == "Timeout: no response within 30s"
    assert sig(retry) == sig(failed) and retry["status"] == "ok"
    assert retry["output"] == original["steps"][i]["output"]
    assert retry["t"] - failed["t"] >= 30
    assert len(faulted["steps"]) == len(original["steps"]) + 1
    first = original["label"]["first_loop_step"]
    if first is not None:
        assert i < first and faulted["label"]["first_loop_step"] == first + 1
        assert sig(faulted["steps"][first + 1]) == sig(original["steps"][first])


def test_duplicate_return_fault():
    original = by_shape("cursor_legit")[0]
    faulted = inject_fault(original, "duplicate_return", random.Random(1))
    validate(faulted)
    outputs = Counter(s["output"] for _, s in tools(faulted))
    assert outputs.most_common(1)[0][1] == 2
    assert len({sig(s) for _, s in tools(faulted)}) == len(tools(faulted))
    with pytest.raises(ValueError, match="loop-free"):
        inject_fault(by_shape("read_spin")[0], "duplicate_return", random.Random(1))


def test_vague_error_fault_rewrites_every_copy_of_one_error():
    original = by_shape("repeat_same_error")[0]
    faulted = inject_fault(original, "vague_error", random.Random(2))
    validate(faulted)
    assert faulted["label"] == original["label"]
    errors = [s["output"] for _, s in tools(faulted) if s["status"] == "error"]
    assert len(errors) >= 3 and set(errors) == {VAGUE}
    healthy = inject_fault(by_shape("healthy_lookup")[0], "vague_error", random.Random(2))
    i = healthy["meta"]["fault_step"]
    assert healthy["steps"][i]["output"] == VAGUE and healthy["steps"][i + 1]["status"] == "ok"


def test_inject_fault_rejects_what_it_cannot_do():
    with pytest.raises(ValueError, match="unknown fault"):
        inject_fault(by_shape("healthy_lookup")[0], "meteor", random.Random(0))
    with pytest.raises(ValueError, match="no ok read"):
        inject_fault(by_shape("poll_timeout")[0], "timeout", random.Random(0))


def test_write_jsonl_round_trips(tmp_path):
    episodes = generate(seed=1, per_shape=1, shapes=["healthy_lookup", "monologue"])
    episodes[0]["task"] = episodes[0]["steps"][0]["content"] = "查一下订单"
    path = tmp_path / "scenarios.jsonl"
    assert write_jsonl(path, episodes) == len(episodes)
    text = path.read_text(encoding="utf-8")
    assert "查一下订单" in text
    assert [json.loads(line) for line in text.splitlines()] == episodes


# --- what each shape promises -------------------------------------------------------------------


def after_first(episode: dict) -> tuple[dict, list[dict]]:
    """The first tool step with the loop step's signature, and the tool steps from the loop on."""
    first = episode["label"]["first_loop_step"]
    loop_step = episode["steps"][first]
    start = next(s for _, s in tools(episode) if sig(s) == sig(loop_step))
    return start, [s for i, s in tools(episode) if i >= first]


@pytest.mark.parametrize("name", ["read_spin", "seed001_repeated_read"])
def test_exact_spin_repeats_call_and_output(name):
    for episode in by_shape(name):
        start, rest = after_first(episode)
        assert len(rest) >= 2 and start is not episode["steps"][episode["label"]["first_loop_step"]]
        assert all(sig(s) == sig(start) and s["output"] == start["output"] for s in rest)
    assert all(
        s["args"]["path"] == "lib/agent-builtins.ts"
        for e in by_shape("seed001_repeated_read")
        for _, s in tools(e)[1:]
    )


def test_window_repeat_is_three_in_six_with_other_calls_between():
    for episode in by_shape("window_repeat"):
        calls = [s for _, s in tools(episode)]
        start, _ = after_first(episode)
        hits = [i for i, s in enumerate(calls) if sig(s) == sig(start)]
        assert hits[2] - hits[0] <= 5 and all(b - a == 2 for a, b in itertools.pairwise(hits))
        assert len({calls[i]["output"] for i in hits}) == 1


def test_seed000_reorders_keys_of_one_canonical_call():
    for episode in by_shape("seed000_reordered"):
        calls = [s for _, s in tools(episode)]
        assert len(calls) >= 3 and len({sig(s) for s in calls}) == 1
        assert len({tuple(s["args"]) for s in calls}) == 2
        assert tuple(episode["steps"][episode["label"]["first_loop_step"]]["args"]) == (
            "limit",
            "q",
        )


def test_repeat_same_error_and_vague_errors():
    for episode in by_shape("repeat_same_error"):
        errors = [(i, s) for i, s in tools(episode) if s["status"] == "error"]
        assert len(errors) >= 3 and len({(sig(s), s["output"]) for _, s in errors}) == 1
        assert episode["label"]["first_loop_step"] == errors[1][0]
    assert (
        "total price is 375, but paid 299" in by_shape("repeat_same_error")[0]["steps"][3]["output"]
    )
    for episode in by_shape("vague_error_retry"):
        errors = [(i, s) for i, s in tools(episode) if s["status"] == "error"]
        assert len(errors) >= 3 and {s["output"] for _, s in errors} == {VAGUE}
        assert len({sig(s) for _, s in errors}) == len(errors)
        assert episode["label"]["first_loop_step"] == errors[1][0]


def test_fuzzy_repeat_and_its_lookalike():
    for episode in by_shape("fuzzy_repeat"):
        calls = [s for _, s in tools(episode)]
        texts = [sig(s)[1] for s in calls]
        assert len(calls) >= 3 and len(set(texts)) == len(texts) and min(map(len, texts)) >= 50
        assert min(trigram_jaccard(a, b) for a, b in itertools.combinations(texts, 2)) >= 0.8
        assert len({s["output"] for s in calls}) == 1
    for episode in by_shape("fuzzy_lookalike"):
        calls = [s for _, s in tools(episode)]
        texts = [sig(s)[1] for s in calls]
        assert min(map(len, texts)) >= 50 and len({s["tool"] for s in calls}) == 1
        assert max(trigram_jaccard(a, b) for a, b in itertools.combinations(texts, 2)) < 0.8
        assert len({s["output"] for s in calls}) == len(calls)


def test_oscillation_cycles_with_identical_outputs():
    periods = set()
    for episode in by_shape("oscillation"):
        calls = [(sig(s), s["output"]) for _, s in tools(episode)]
        period = next(p for p in (2, 3) if calls[p] == calls[0])
        periods.add(period)
        assert len({c for c in calls[:period]}) == period and len(calls) >= 3 * period
        assert all(calls[i] == calls[i % period] for i in range(len(calls)))
        assert episode["label"]["first_loop_step"] == tools(episode)[period][0]
    assert periods == {2, 3}


def test_param_jitter_and_stagnation_change_args_not_output():
    for episode in by_shape("param_jitter"):
        calls = [s for _, s in tools(episode)]
        assert len({s["tool"] for s in calls}) == 1 and len({s["output"] for s in calls}) == 1
        assert len({sig(s) for s in calls}) >= 2
        assert all(sig(a) != sig(b) for a, b in itertools.pairwise(calls))
    for episode in by_shape("output_stagnation"):
        calls = [s for _, s in tools(episode)]
        stable = set()
        for s in calls:
            data = json.loads(s["output"])
            stable.add(
                json.dumps({k: v for k, v in data.items() if k not in {"request_id", "served_at"}})
            )
        assert len(stable) == 1 and len({sig(s) for s in calls}) == len(calls) >= 4
    assert len({s["output"] for _, s in tools(by_shape("output_stagnation")[1])}) > 1


def polls(episode: dict) -> list[tuple[int, dict]]:
    return [
        (i, s)
        for i, s in tools(episode)
        if s["tool"].startswith(("get_operation", "get_build_status"))
    ]


def test_poll_legit_finishes_within_the_deadline():
    kinds = set()
    for episode in by_shape("poll_legit"):
        steps = [s for _, s in polls(episode)]
        kinds.add(steps[0]["kind"])
        assert len(steps) >= 4 and len({sig(s) for s in steps}) == 1
        assert "DONE" in steps[-1]["output"] and "DONE" not in steps[-2]["output"]
        assert steps[-1]["t"] - steps[0]["t"] < steps[0].get("deadline_s", 300)
    assert kinds == {"poll", None}
    assert {s["output"] for _, s in polls(by_shape("poll_legit")[2])} == {"RUNNING", "DONE"}
    changing = [s["output"] for _, s in polls(by_shape("poll_legit")[1])]
    assert len(set(changing)) == len(changing)


def test_poll_timeout_polls_past_the_deadline():
    for episode in by_shape("poll_timeout"):
        steps = polls(episode)
        first = episode["label"]["first_loop_step"]
        t0, deadline = steps[0][1]["t"], steps[0][1].get("deadline_s", 300)
        late = [i for i, s in steps if s["t"] - t0 > deadline]
        assert late[0] == first and len(late) >= 4
        assert episode["steps"][first]["kind"] == "poll"
        assert len({s["output"] for _, s in steps}) == 1


def test_poll_exempt_repeats_then_changes():
    for episode in by_shape("poll_exempt"):
        outputs = [s["output"] for _, s in tools(episode) if s["tool"] == "check_background_tasks"]
        assert {s["kind"] for _, s in tools(episode) if s["tool"] == "check_background_tasks"} == {
            None
        }
        assert len(outputs) >= 4 and len(set(outputs[:-1])) == 1 and outputs[-1] != outputs[0]


def test_cursors():
    for episode in by_shape("cursor_stuck"):
        first = episode["label"]["first_loop_step"]
        pages = [(i, s) for i, s in tools(episode) if s["tool"].startswith("list_")]
        stuck = [
            i for i, s in pages if s["args"].get("cursor") == json.loads(s["output"])["next_cursor"]
        ]
        assert stuck[1] == first and len(stuck) >= 4
    for episode in by_shape("cursor_legit"):
        pages = [s for _, s in tools(episode) if s["tool"].startswith("list_")]
        assert 4 <= len(pages) <= 6 and "cursor" not in pages[0]["args"]
        for a, b in itertools.pairwise(pages):
            assert b["args"]["cursor"] == json.loads(a["output"])["next_cursor"] is not None
        assert json.loads(pages[-1]["output"])["next_cursor"] is None


def writes(episode: dict) -> list[tuple[int, dict]]:
    return [(i, s) for i, s in tools(episode) if s["kind"] == "write"]


def test_write_shapes():
    for episode in by_shape("write_timeout_reconciled"):
        (_, first), (_, retry) = writes(episode)
        check = next(s for _, s in tools(episode) if "reconciles" in s)
        assert first["status"] == "timeout" and check["reconciles"] == first["tool_call_id"]
        assert check["found"] is False and sig(retry) == sig(first) and retry["status"] == "ok"
    for episode in by_shape("write_timeout_found"):
        assert len(writes(episode)) == 1
        assert next(s for _, s in tools(episode) if "reconciles" in s)["found"] is True
    for episode in by_shape("write_duplicate"):
        (_, first), (i1, retry), *_ = writes(episode)
        assert first["status"] == "timeout" and sig(retry) == sig(first)
        assert i1 == episode["label"]["first_loop_step"]
        assert not any("reconciles" in s for _, s in tools(episode))
    for episode in by_shape("intended_duplicate"):
        (_, a), (_, b) = writes(episode)
        assert sig(a) == sig(b) and b["intent"] == "duplicate" and "intent" not in a
        assert a["output"] != b["output"]


def test_monologue_is_assistant_turns_without_tools():
    for episode in by_shape("monologue"):
        first = episode["label"]["first_loop_step"]
        tail = episode["steps"][first - 1 :]
        assert len(tail) >= 3 and all(s.get("role") == "assistant" for s in tail)
        assert episode["steps"][first - 2]["type"] == "tool"


def test_healthy_runs_and_the_budget_runaway_never_repeat():
    for name, low, high in (
        ("healthy_lookup", 4, 9),
        ("seed001_long_healthy", 8, 12),
        ("budget_runaway", 40, 60),
        ("fuzzy_lookalike", 3, 5),
    ):
        for episode in by_shape(name):
            calls = [s for _, s in tools(episode)]
            assert low <= len(calls) <= high
            assert len({sig(s) for s in calls}) == len({s["output"] for s in calls}) == len(calls)
    assert any(len(tools(e)) > 5 for e in by_shape("healthy_lookup"))
    assert all(e["steps"][-1]["type"] == "tool" for e in by_shape("budget_runaway"))
