"""Policy validation, Episode parsing and replay: errors that name the field, modes, reports."""

from __future__ import annotations

import re

import pytest
from episode_steps import msg, record, run, tool

from loopscope.detect import (
    DEFAULT_DETECTORS,
    Budgets,
    EpisodeMonitor,
    Policy,
    ToolCall,
    ToolResult,
)
from loopscope.detect.episode_records import EpisodeFormatError, parse_episode, parse_episode_line
from loopscope.detect.fingerprint import output_hash
from loopscope.detect.policy import DEFAULT_NO_PROGRESS_K
from loopscope.detect.replay import replay

# -- Policy.from_mapping ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "names"),
    [
        ({"windw": 6}, "windw"),
        ({"window": "6"}, "window"),
        ({"window": True}, "window"),
        ({"repeat_threshold": 0}, "repeat_threshold"),
        ({"poll_deadline_s": -1.0}, "poll_deadline_s"),
        ({"actions": {"exact_repeat": "explode"}}, "actions['exact_repeat']"),
        ({"tool_kinds": {"create_order": "mutate"}}, "tool_kinds['create_order']"),
        ({"no_progress_k": {"lookup": "6"}}, "no_progress_k['lookup']"),
        ({"no_progress_k": {"lookup": 0}}, "no_progress_k['lookup']"),
        ({"budgets": {"tool_calls": 0}}, "budgets.tool_calls"),
        ({"budgets": {"tool_calz": 3}}, "tool_calz"),
        ({"budgets": {"cost_usd": True}}, "budgets.cost_usd"),
        ({"required_tools": [{"keywords": ["x"]}]}, "required_tools"),
        ({"required_tools": [{"tool": "x", "colour": "red"}]}, "required_tools"),
    ],
)
def test_from_mapping_rejects_bad_input_naming_the_field(data, names):
    """A bad setting accepted silently (or reported without its name) fails here."""
    with pytest.raises(ValueError, match=r"^guard\.json: ") as excinfo:
        Policy.from_mapping(data, source="guard.json")
    assert names in str(excinfo.value)


@pytest.mark.parametrize(
    ("data", "names"),
    [
        pytest.param(
            {"poll_tools": "check_background_tasks"},
            "poll_tools",
            id="poll_tools-str",
        ),
        pytest.param(
            {"poll_tools": 5},
            "poll_tools",
            id="poll_tools-int",
        ),
        pytest.param(
            {"volatile_args": {"search": "request_id"}},
            "volatile_args",
            id="volatile-str",
        ),
        pytest.param(
            {"budgets": 5},
            "budgets",
            id="budgets-int",
        ),
        pytest.param(
            {"window": 6.5},
            "window",
            id="window-float",
        ),
        pytest.param(
            {"fuzzy_similarity": 1.5},
            "fuzzy_similarity",
            id="similarity-range",
        ),
        pytest.param(
            {"required_tools": [{"tool": "portfolio", "keywords": "持仓"}]},
            "keywords",
            id="keywords-str",
        ),
    ],
)
def test_from_mapping_rejects_wrongly_typed_collections(data, names):
    """Wrong container types must fail loudly at load time, not misbehave at run time."""
    with pytest.raises(ValueError) as excinfo:
        Policy.from_mapping(data)
    assert names in str(excinfo.value)


def test_from_mapping_builds_nested_records():
    """JSON-shaped input (lists, dicts) must become the frozen records the core expects."""
    policy = Policy.from_mapping(
        {
            "budgets": {"tool_calls": 50, "cost_usd": 1.5},
            "poll_tools": ["check_background_tasks", "get_status"],
            "volatile_args": {"search": ["request_id"]},
            "required_tools": [
                {"tool": "portfolio", "keywords": ["持仓情况"], "args": {"mode": "view"}}
            ],
            "actions": {"exact_repeat": "warn"},
        }
    )
    assert policy.budgets == Budgets(tool_calls=50, cost_usd=1.5)
    assert policy.poll_tools == frozenset({"check_background_tasks", "get_status"})
    assert policy.volatile_for("search") == frozenset({"request_id"})
    assert policy.required_tools[0].keywords == ("持仓情况",)
    assert policy.action_for("exact_repeat", "block") == "warn"


def test_action_override_turns_a_block_into_a_warning():
    """An ``actions`` override that the monitor ignores (still blocks) fails here."""
    steps = [tool("search", {"q": "x"}, "same result text")] * 4
    report = run(
        steps, Policy.from_mapping({"actions": {"exact_repeat": "warn"}})
    )
    assert report.flags and {f.severity for f in report.flags} == {"warn"}


@pytest.mark.parametrize(("task_type", "k"), [*DEFAULT_NO_PROGRESS_K.items(), (None, 8), ("x", 8)])
def test_k_for_each_task_type(task_type, k):
    """Lookups cut sooner, coding and polling later; unknown types fall back to ``other``."""
    assert Policy().k_for(task_type) == k
    assert EpisodeMonitor(task_type=task_type).k == k


def test_no_progress_k_override_keeps_the_other_defaults():
    """Overriding one task type must not drop the others' K (KeyError or wrong fallback)."""
    policy = Policy.from_mapping({"no_progress_k": {"lookup": 3}})
    assert (policy.k_for("lookup"), policy.k_for("coding"), policy.k_for(None)) == (3, 12, 8)


def test_replace_validates():
    """``Policy.replace`` that skips validation lets a nonsense threshold in; fails here."""
    assert Policy().replace(window=10).window == 10
    with pytest.raises(ValueError, match="window"):
        Policy().replace(window=0)


# -- parse_episode ---------------------------------------------------------------------------

GOOD_TOOL = tool("search", {"q": "x"}, "out")


@pytest.mark.parametrize(
    ("data", "names"),
    [
        ([1, 2], "JSON object"),
        ({"steps": []}, "episode_id"),
        ({"episode_id": "", "steps": []}, "episode_id"),
        ({"episode_id": "e1"}, "e1: steps"),
        ({"episode_id": "e1", "steps": [GOOD_TOOL, "oops"]}, "steps[1]"),
        ({"episode_id": "e1", "steps": [{**GOOD_TOOL, "status": "failed"}]}, "steps[0].status"),
        ({"episode_id": "e1", "steps": [{**GOOD_TOOL, "kind": "delete"}]}, "steps[0].kind"),
        ({"episode_id": "e1", "steps": [{**GOOD_TOOL, "tool": ""}]}, "steps[0].tool"),
        ({"episode_id": "e1", "steps": [GOOD_TOOL, {"type": "thought"}]}, "steps[1].type"),
        ({"episode_id": "e1", "steps": [msg("robot", "hi")]}, "steps[0].role"),
        ({"episode_id": "e1", "steps": [], "label": "loop"}, "label"),
    ],
)
def test_parse_episode_names_the_bad_field(data, names):
    """A format error that does not say where (or an invalid record accepted) fails here."""
    with pytest.raises(EpisodeFormatError) as excinfo:
        parse_episode(data)
    assert names in str(excinfo.value)


def test_parse_episode_line_rejects_bad_json():
    """Invalid JSON must raise EpisodeFormatError (a ValueError), not JSONDecodeError."""
    with pytest.raises(EpisodeFormatError, match="not valid JSON"):
        parse_episode_line('{"episode_id": ')


def test_parse_episode_reads_the_optional_fields():
    """Label, outcome, task type and recorded cost must survive parsing."""
    ep = parse_episode(
        record(
            [GOOD_TOOL],
            task_type="lookup",
            outcome="success",
            loop=False,
            meta={"agent_cost_usd": 0.25},
        )
    )
    assert (ep.task_type, ep.outcome, ep.loop_label, ep.cost_usd) == (
        "lookup",
        "success",
        False,
        0.25,
    )
    assert parse_episode(record([{**GOOD_TOOL, "status": None}])).loop_label is None


# -- replay modes and reports ----------------------------------------------------------------

MIXED = [
    *[tool("search_orders", {"q": "late"}, "orders 1 and 2 are late")] * 5,
    *[tool("deploy", {"env": e}, "Error: something went wrong", status="error") for e in "abc"],
]


def _key(flags):
    return [(f.step, f.detector, f.kind, f.severity) for f in flags]


def test_warn_mode_never_kills():
    """Warn mode injects corrections only; a kill severity or a stop in it fails here."""
    report = run(MIXED, mode="warn")
    assert report.flags and {f.severity for f in report.flags} == {"warn"}
    assert report.stop is None and report.first_kill is None


def test_warn_mode_summary_reports_no_stop():
    """The summary of a warn-mode replay must agree with its ``stop`` (nothing stopped)."""
    assert run(MIXED, mode="warn").summary["stop_reason"] is None


def test_observe_records_what_enforce_would_do():
    """Shadow mode must record the same verdicts as enforce, or its false-kill rate lies."""
    enforce, observe = run(MIXED, mode="enforce"), run(MIXED, mode="observe")
    assert _key(observe.flags) == _key(enforce.flags)
    assert "kill" in {f.severity for f in observe.flags}
    assert observe.stop is not None and observe.stop.stop_reason == enforce.stop.stop_reason
    assert _key(run(MIXED, mode="warn").flags) == [
        (s, d, k, "warn") for s, d, k, _ in _key(enforce.flags)
    ]


def test_replay_rejects_an_unknown_mode():
    """A typo'd mode silently treated as enforce fails here."""
    with pytest.raises(ValueError, match="mode"):
        replay(parse_episode(record(MIXED)), mode="shadow")


def test_report_as_dict_shape():
    """The ``loopscope analyze --json`` shape other tools consume; a renamed key fails here."""
    report = run(MIXED, episode_id="e42", outcome="failure")
    data = report.as_dict()
    assert set(data) == {"episode_id", "outcome", "flags"}
    assert (data["episode_id"], data["outcome"]) == ("e42", "failure")
    assert data["flags"][0] == {
        "step": 2,
        "detector": "exact_repeat",
        "kind": "exact_repeat",
        "severity": "warn",
    }
    assert all(set(f) == {"step", "detector", "kind", "severity"} for f in data["flags"])
    assert report.first_flag.step == 2 and report.first_kill.step == 3


def test_summary_counts():
    """Totals the root span and reports carry; a miscount fails here."""
    summary = run(MIXED).summary
    assert (summary["steps"], summary["tool_calls"], summary["stop_reason"]) == (
        8,
        8,
        "repeated_tool_call",
    )
    assert summary["last_progress_step"] is not None and summary["unknown_writes"] == 0


def _costed(tokens: list[int]) -> list[dict]:
    return [
        tool("s", {"i": i}, f"output {i}", tokens_in=n, tokens_out=0) for i, n in enumerate(tokens)
    ]


@pytest.mark.parametrize(
    ("tokens", "step", "expected"),
    [
        ([100, 100, 200, 600], 0, 1.0),
        ([100, 100, 200, 600], 2, 0.8),
        ([100, 100, 200, 600], 3, 0.6),
        ([100, 100, 200, 600], 9, 0.0),
        ([0, 0, 0, 0], 1, 0.75),  # no tokens recorded: share of tool calls instead
        ([0, 0, 0, 0], 4, 0.0),
    ],
)
def test_cost_after(tokens, step, expected):
    """Cost spent after the first flag (the design card's waste metric); a wrong share fails."""
    report = run(_costed(tokens), meta={"cost_usd": 1.0})
    assert report.cost_after(step) == pytest.approx(expected)


def test_cost_after_without_recorded_cost_is_none():
    """An invented cost (0.0) for an episode whose source recorded none fails here."""
    assert run(_costed([10, 10])).cost_after(0) is None


def test_model_turn_budget_applies_during_replay():
    """Assistant turns in a recorded episode must count against the model-turn budget."""
    steps = [msg("user", "go"), *[msg("assistant", f"step {i}") for i in range(3)]]
    report = run(steps, Policy(budgets=Budgets(model_turns=2)), mode="enforce")
    assert report.stop is not None and report.stop.diagnostic["budget_type"] == "model_turns"


def test_monitor_pairs_results_by_call_id():
    """Parallel calls answered out of order must pair by id, not by position."""
    m = EpisodeMonitor()
    m.before_call(ToolCall("a", {"x": 1}, call_id="ca"))
    m.before_call(ToolCall("b", {"x": 2}, call_id="cb"))
    m.after_call(ToolResult("answer for b", call_id="cb"))
    m.after_call(ToolResult("answer for a", call_id="ca"))
    assert [(s.tool, s.output_hash) for s in m.history.steps] == [
        ("b", output_hash("answer for b")),
        ("a", output_hash("answer for a")),
    ]
    with pytest.raises(ValueError, match="without an open call"):
        m.after_call(ToolResult("stray", call_id="zz"))


def test_policy_detector_names_are_every_detector_and_breaker():
    """A detector added without its name in DETECTOR_NAMES (so a policy cannot tune it)."""
    from loopscope.detect.breaker import BREAKERS
    from loopscope.detect.registry import DETECTOR_NAMES

    assert set(DETECTOR_NAMES) == {d.name for d in DEFAULT_DETECTORS} | set(BREAKERS)


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"actions": {"exact_repeats": "warn"}}, "unknown detector 'exact_repeats'"),
        ({"ladders": {"window_repeat": ["warn"]}}, "part of exact_repeat"),
        ({"task_ladders": {"coding": {"nope": ["warn"]}}}, "task_ladders['coding']"),
        ({"ladders": {"exact_repeat": ["warn", "kill"]}}, "warn, block, stop"),
        ({"ladders": {"exact_repeat": []}}, "non-empty"),
    ],
)
def test_a_policy_naming_no_detector_or_rung_is_refused(settings, needle):
    """A typo in a policy file that silently tunes nothing fails here."""
    with pytest.raises(ValueError, match=re.escape(needle)):
        Policy.from_mapping(settings, source="p.json")
