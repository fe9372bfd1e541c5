"""`loopscope metrics`: the worked examples of docs/metrics.md, on stores built by hand."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from loopscope.offline.cli import main
from loopscope_collector.metrics.compute import PRICES, compute_metrics
from loopscope_collector.reads import READS, read
from loopscope_collector.storage import Database, open_database
from loopscope_collector.storage.writes import recount_calls

S = 1_000_000_000  # one second in ns
T0 = 1_700_000_000 * S


class Store:
    """A store filled row by row; each episode's calls are one second apart."""

    def __init__(self, path: Path) -> None:
        self.db = open_database(path)
        self.con = self.db.con

    def episode(
        self, eid: str, *, calls: int = 4, service: str = "svc", agent: str | None = "agent",
        model: str | None = "model-x", outcome: str | None = "failure",
        cost: float | None = None, start: int = T0, tools: list[str] | None = None,
        progress: list[str] | None = None, call_cost: float | None = None,
        tokens: tuple[int, int] = (0, 0), scenario: tuple[bool, int | None] | None = None,
    ) -> None:
        """``scenario``: the agent's own label (loop, first loop step); call i is step i."""
        self.con.execute(
            "insert into episodes (episode_id, service, agent, model, outcome, start_ns, end_ns,"
            " tool_calls, cost_usd, input_tokens, output_tokens, trace_id, scenario_loop,"
            " scenario_first_loop_step)"
            " values ($e, $s, $a, $m, $o, $t, $t + $n::bigint * 1000000000, $n, $c, $ti, $to, $e,"
            " $sl, $sf)",
            {"e": eid, "s": service, "a": agent, "m": model, "o": outcome, "t": start,
             "n": calls, "c": cost, "ti": tokens[0], "to": tokens[1],
             "sl": scenario[0] if scenario else None, "sf": scenario[1] if scenario else None},
        )
        for i in range(calls):
            self.con.execute(
                "insert into tool_calls (trace_id, span_id, episode_id, service, agent, model,"
                " tool, start_ns, end_ns, convention, collector_progress, cost_usd, step)"
                " values ($e, $sp, $e, $s, $a, $m, $tool, $t, $t + 1, 'loopscope', $p, $c, $i)",
                {"e": eid, "sp": f"{eid}-{i}", "s": service, "a": agent, "m": model,
                 "tool": (tools or ["search"])[i % len(tools or ["search"])],
                 "t": start + i * S, "p": (progress or ["new_output"] * calls)[i],
                 "c": call_cost, "i": i},
            )
        recount_calls(self.con, [eid])  # the run's call facts, as the collector keeps them

    def update_calls(self, sql: str) -> None:
        """Change stored calls by hand (``update tool_calls ...``), and count the runs' call
        facts again, as the collector keeps them."""
        self.con.execute(sql)
        recount_calls(self.con, None)

    def detect(self, eid: str, call: int, *, severity: str = "warn",
               kind: str = "exact_repeat", detector: str = "repeated_tool_call") -> None:
        self.con.execute(
            "insert into detections (episode_id, trace_id, span_id, ordinal, detector, kind,"
            " severity, action, message) values ($e, $e, $sp, $o, $d, $k, $sev, $act, 'm')",
            {"e": eid, "sp": f"{eid}-{call}", "o": call, "d": detector, "k": kind,
             "sev": severity, "act": "stop" if severity == "kill" else "warn"},
        )

    def guard(self, eid: str, call: int, *, decision: str, action: str = "allow",
              start: int = T0, reason: str = "r") -> None:
        self.con.execute(
            "insert into guard_decisions (trace_id, span_id, episode_id, service, tool, mode,"
            " action, decision, reason, flags, time_ns)"
            " values ($e, $sp, $e, 'svc', 'search', 'observe', $a, $d, $r, ['no_progress'], $t)",
            {"e": eid, "sp": f"{eid}-{call}", "a": action, "d": decision, "t": start + call * S,
             "r": reason},
        )

    def label(self, eid: str, label: str, span: str = "") -> None:
        self.con.execute("insert into labels (episode_id, span_id, label) values ($e, $s, $l)",
                         {"e": eid, "s": span, "l": label})

    def unknown(self, key: str, latency_s: float | None, *, service: str = "svc",
                tool: str = "pay", at: int = T0) -> None:
        self.con.execute(
            "insert into unknown_writes (idempotency_key, episode_id, service, tool, trace_id,"
            " span_id, unknown_at_ns, resolved_at_ns) values ($k, 'w', $s, $tool, 'w', $k,"
            " $at, $r)",
            {"k": key, "s": service, "tool": tool, "at": at,
             "r": None if latency_s is None else at + int(latency_s * S)},
        )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "x.duckdb")
    yield s
    s.db.close()


def metrics(store: Store, **filters: Any) -> dict[str, Any]:
    return compute_metrics(store.db, **filters)


def test_loop_detection_rate_over_human_labels(store: Store) -> None:
    """4 labelled loops, 3 flagged (any severity, or a guard's warn) → 3/4 = 0.75; no_loop
    and unlabelled episodes are not in the denominator."""
    for eid in ("L1", "L2", "L3", "L4", "N1", "U1"):
        store.episode(eid)
    for eid in ("L1", "L2", "L3", "L4"):
        store.label(eid, "true_loop")
    store.label("N1", "no_loop")
    store.detect("L1", 2)
    store.detect("L2", 3, severity="kill")
    store.guard("L3", 1, decision="warn", action="warn")
    store.detect("U1", 2)  # flagged, but unlabelled: no ground truth
    # incomplete runs: L1's calls numbered 1, 2, 4, 5 by its agent (call 3 lost on the way),
    # L4 named by its SDK's export report as having lost a span; both are in the rate's n
    store.update_calls("update tool_calls set call_ordinal = step + 1 + (step >= 2)::int "
                      "where episode_id = 'L1'")
    store.con.execute("insert into incomplete_runs values ('r', 'r', 'L4', 'svc', 'i', 1)")
    m = metrics(store)
    assert m["incomplete_episodes"] == 2
    human = {"value": 0.75, "count": 3, "n": 4, "interval": [0.3006, 0.9544]}
    assert m["loop_detection_rate"] == {
        **human, "label_source": "human", "incomplete": 2,
        "by_label_source": {"human": human, "scenario": {
            "value": None, "count": 0, "n": 0, "interval": None}},
    }
    assert m["loops_detected"] == 4
    assert m["loops_detected_by_kind"] == {"exact_repeat": 3, "guard:no_progress": 1}
    assert m["labels"]["true_loop"] == 4 and m["labels"]["no_loop"] == 1
    assert m["labels"]["unlabelled"] == 1


def test_scenario_labels_count_flags_from_the_first_loop_step(store: Store) -> None:
    """The agent's own labels (``loopscope.episode(label=...)``) are the scenario source, as
    in ``loopscope eval``: a scenario loop is detected by a flag at or after its first loop
    step; a kill before that step, or on a scenario non-loop, is a false kill. A human label
    outranks the scenario label (H1). Worked example of docs/metrics.md."""
    store.episode("S1", calls=6, scenario=(True, 2))
    store.detect("S1", 3)                               # in the loop: detected
    store.episode("S2", calls=6, scenario=(True, 4))
    store.detect("S2", 1, severity="kill")              # before the loop: missed, false kill
    store.episode("S3", calls=6, scenario=(True, None))
    store.detect("S3", 0)                               # no first step given: any flag
    store.episode("S4", calls=6, scenario=(True, 2))    # never flagged: missed
    store.episode("S5", calls=6, scenario=(True, 1))
    store.guard("S5", 2, decision="stop", action="stop")  # in the loop: detected, right kill
    store.episode("N1", calls=6, scenario=(False, None))
    store.guard("N1", 3, decision="stop")               # observe's would-be kill: false kill
    store.episode("H1", calls=6, scenario=(False, None))
    store.label("H1", "true_loop")                      # the human says loop
    store.detect("H1", 0)
    m = metrics(store)
    det = m["loop_detection_rate"]
    assert (det["count"], det["n"]) == (4, 6) and det["value"] == pytest.approx(4 / 6)
    assert det["label_source"] == "human+scenario"
    assert det["by_label_source"]["scenario"]["count"] == 3  # S1, S3, S5 of S1-S5
    assert det["by_label_source"]["scenario"]["n"] == 5
    assert det["by_label_source"]["human"]["count"] == det["by_label_source"]["human"]["n"] == 1
    fk = m["false_kill_rate"]
    assert (fk["count"], fk["n"]) == (2, 3)                  # S2 and N1 of S2, S5, N1
    assert fk["by_label_source"]["scenario"]["count"] == 2
    assert fk["by_label_source"]["scenario"]["n"] == 3
    assert fk["by_label_source"]["rule"]["n"] == 0
    assert m["labels"]["by_source"] == {"human": 1, "scenario": 6}
    assert (m["labels"]["true_loop"], m["labels"]["no_loop"]) == (6, 1)


def test_false_kill_rate_by_the_unlabelled_rule(store: Store) -> None:
    """Four killed, unlabelled episodes; only K1 made progress after its kill and succeeded."""
    after = ["new_output", "none", "none", "new_output"]  # call 3 makes progress
    store.episode("K1", outcome="success", progress=after)
    store.detect("K1", 1, severity="kill")
    store.episode("K2", outcome="failure", progress=after)  # progress, but failed
    store.detect("K2", 1, severity="kill")
    store.episode("K3", outcome="success", progress=["new_output", "none", "waiting", "none"])
    store.detect("K3", 1, severity="kill")  # succeeded, but no progress after the kill
    store.episode("K4", outcome="failure")
    store.guard("K4", 2, decision="stop")  # observe mode: the would-be kill counts
    store.detect("K4", 3, severity="kill")  # a second kill in the same episode: still one
    store.episode("W1", outcome="success", progress=after)
    store.detect("W1", 1, severity="warn")  # a warning is not a kill
    m = metrics(store)
    fk = m["false_kill_rate"]
    assert (fk["value"], fk["count"], fk["n"], fk["interval"]) == (0.25, 1, 4, [0.0456, 0.6994])
    assert fk["by_label_source"]["rule"]["n"] == 4
    assert fk["by_label_source"]["human"]["n"] == 0
    assert m["kills"] == 4 and m["false_kills"] == 1


def test_budget_stops_are_beside_the_false_kill_rate(store: Store) -> None:
    """A budget stop of a run that made progress and succeeded is the user's cap: counted in
    budget_stops, not as a kill, a false kill or a loop flag."""
    store.episode("B1", outcome="success")
    store.guard("B1", 3, decision="stop", action="stop", reason="budget")
    store.episode("B2", outcome="success")
    store.detect("B2", 2, severity="kill", kind="budget", detector="budget")
    store.episode("K1", outcome="failure", progress=["new_output", "none", "none", "none"])
    store.detect("K1", 1, severity="kill")
    m = metrics(store)
    assert (m["kills"], m["false_kills"], m["budget_stops"]) == (1, 0, 2)
    assert m["false_kill_rate"]["n"] == 1 and m["false_kill_rate"]["budget_stops"] == 2
    assert m["loops_detected"] == 1
    assert "budget" not in m["loops_detected_by_kind"]


def test_first_kill_decides_progress_after_it(store: Store) -> None:
    """Progress between a first and a second kill still counts: it came after the first."""
    store.episode("K", outcome="success", progress=["none", "none", "new_output", "none"])
    store.detect("K", 1, severity="kill")
    store.detect("K", 3, severity="kill")
    assert metrics(store)["false_kill_rate"]["count"] == 1


def test_human_labels_outrank_the_rule(store: Store) -> None:
    """no_loop makes a kill false, true_loop makes it right, false_kill on a kill span makes
    it false whatever the episode label or outcome says."""
    after = ["new_output", "none", "none", "new_output"]
    store.episode("H1", outcome="failure")  # the rule would call it right
    store.detect("H1", 1, severity="kill")
    store.label("H1", "no_loop")
    store.episode("H2", outcome="success", progress=after)  # the rule would call it false
    store.detect("H2", 1, severity="kill")
    store.label("H2", "true_loop")
    store.episode("H3", outcome="failure")
    store.detect("H3", 2, severity="kill")
    store.label("H3", "false_kill", "H3-2")
    store.episode("H4", outcome="failure")
    store.detect("H4", 2, severity="kill")
    store.label("H4", "false_kill", "H4-0")  # on a call that was not a kill: ignored
    fk = metrics(store)["false_kill_rate"]
    assert (fk["count"], fk["n"]) == (2, 4)
    assert fk["by_label_source"]["human"]["count"] == 2
    assert fk["by_label_source"]["human"]["n"] == 3
    assert fk["by_label_source"]["rule"]["n"] == 1


def test_unknown_reconcile_latency(store: Store) -> None:
    """1 s, 3 s, 10 s and one unresolved: p50 3, p95 9.3 (linear interpolation), max 10."""
    store.unknown("a", 1)
    store.unknown("b", 3)
    store.unknown("c", 10)
    store.unknown("d", None)
    lat = metrics(store)["unknown_reconcile_latency"]
    assert lat == {"p50_s": 3.0, "p95_s": 9.3, "max_s": 10.0, "resolved": 3,
                   "unresolved": 1, "unknown_writes": 4}


def test_cost_per_successful_task_and_after_first_flag(store: Store) -> None:
    """$1 + $0.5 (successes) + $1.5 (a failure) = $3 over 2 successes → $1.5. The failure was
    flagged at its third call of four: $1.5 × 2/4 = $0.75 after the first flag."""
    store.episode("E1", outcome="success", cost=1.0)
    store.episode("E2", outcome="success", cost=0.5)
    store.episode("E3", outcome="failure", cost=1.5)
    store.detect("E3", 2)
    store.detect("E3", 3, severity="kill")
    cost = metrics(store)["cost_per_successful_task"]
    assert cost["value"] == 1.5
    assert cost["total_usd"] == 3.0 and cost["successful_episodes"] == 2
    assert cost["cost_after_first_flag_usd"] == 0.75
    assert cost["cost_sources"] == {"episode": 3, "tool_calls": 0, "tokens": 0, "none": 0}


def test_cost_from_calls_and_from_tokens(store: Store) -> None:
    """No episode cost: the calls' costs, else tokens × the price table (longest prefix)."""
    store.episode("C1", outcome="success", calls=3, call_cost=0.1)
    store.detect("C1", 2)  # only the third call's $0.1 is after the flag
    store.episode("C2", outcome="success", model="gpt-4o-2024-08-06",
                  tokens=(100_000, 10_000))  # 0.1 M × $2.5 + 0.01 M × $10 = $0.35
    store.episode("C3", outcome="failure", model="gpt-4o-mini", tokens=(1_000_000, 0))
    store.episode("C4", outcome="failure", model="no-such-model", tokens=(1_000_000, 0))
    cost = metrics(store)["cost_per_successful_task"]
    assert PRICES["gpt-4o-mini"]["input"] == 0.15
    assert cost["total_usd"] == pytest.approx(0.3 + 0.35 + 0.15)
    assert cost["value"] == pytest.approx((0.3 + 0.35 + 0.15) / 2)
    assert cost["cost_after_first_flag_usd"] == pytest.approx(0.1)
    assert cost["cost_sources"] == {"episode": 0, "tool_calls": 1, "tokens": 2, "none": 1}


def test_custom_price_table(store: Store) -> None:
    store.episode("P", outcome="success", model="mine", tokens=(2_000_000, 0))
    m = compute_metrics(store.db, prices={"mine": {"input": 1.0, "output": 2.0}})
    assert m["cost_per_successful_task"]["value"] == 2.0


def test_filters_by_service_tool_agent_and_time(store: Store) -> None:
    store.episode("A1", service="a", agent="x", tools=["search", "pay"], start=T0)
    store.episode("A2", service="a", agent="y", tools=["search"], start=T0 + 3600 * S)
    store.episode("B1", service="b", agent="x", tools=["fetch"], start=T0 + 7200 * S)
    store.detect("A1", 1, severity="kill")
    store.unknown("u1", 2, service="a", tool="pay", at=T0)
    store.unknown("u2", 4, service="b", tool="fetch", at=T0 + 7200 * S)
    everything = metrics(store)
    assert (everything["episodes"], everything["tool_calls"]) == (3, 12)
    a = metrics(store, service="a")
    assert (a["episodes"], a["tool_calls"], a["kills"]) == (2, 8, 1)
    assert a["unknown_reconcile_latency"]["max_s"] == 2.0
    pay = metrics(store, tool="pay")  # episodes that called pay; calls: pay's own
    assert (pay["episodes"], pay["tool_calls"], pay["kills"]) == (1, 2, 1)
    assert metrics(store, agent="x")["episodes"] == 2
    window = metrics(store, since_ns=T0 + 1800 * S, until_ns=T0 + 7200 * S)
    assert (window["episodes"], window["tool_calls"]) == (1, 4)
    assert window["unknown_reconcile_latency"]["unknown_writes"] == 0
    late = metrics(store, since_ns=T0 + 7200 * S)
    assert late["episodes"] == 1 and late["unknown_reconcile_latency"]["max_s"] == 4.0
    empty = metrics(store, service="nobody")
    assert empty["episodes"] == 0 and empty["loop_detection_rate"]["value"] is None
    assert empty["cost_per_successful_task"]["value"] is None


def test_breakdowns(store: Store) -> None:
    store.episode("A1", service="a", model="m1", tools=["search", "pay"])
    store.episode("A2", service="a", model="m2", tools=["search"])
    store.episode("B1", service="b", model="m1", tools=["fetch"])
    store.detect("A1", 1, severity="kill", kind="stagnation", detector="no_progress")
    store.unknown("u1", 2, service="a", tool="pay")
    b = metrics(store)["breakdown"]
    service = {r["key"]: r for r in b["service"]}
    assert service["a"]["episodes"] == 2 and service["a"]["kills"] == 1
    assert service["a"]["tool_calls"] == 8 and service["b"]["kills"] == 0
    assert service["a"]["unknown_reconcile_latency"]["p50_s"] == 2.0
    assert service["b"]["unknown_reconcile_latency"]["unknown_writes"] == 0
    tool = {r["key"]: r for r in b["tool"]}
    assert (tool["search"]["episodes"], tool["search"]["tool_calls"]) == (2, 6)
    assert (tool["pay"]["episodes"], tool["pay"]["tool_calls"]) == (1, 2)
    assert tool["pay"]["false_kill_rate"]["n"] == 1
    assert {r["key"]: r["episodes"] for r in b["model"]} == {"m1": 2, "m2": 1}
    assert {r["key"]: r["loops_detected"] for r in b["kind"]} == {"stagnation": 1}
    assert [r["key"] for r in b["agent"]] == ["agent"]


def test_reads_are_named_reads_with_the_documented_parameters() -> None:
    """The dashboard reads the same SQL through GET /v1/reads/NAME."""
    filters = {"service", "agent", "model", "tool", "since_ns", "until_ns", "outcome"}
    assert set(READS["metrics_breakdown"].params) == filters | {"prices"}
    assert set(READS["metrics_unknown_latency"].params) == filters


def test_read_only_file_gives_the_same_answer(tmp_path: Path) -> None:
    store = Store(tmp_path / "x.duckdb")
    store.episode("E1", outcome="success", cost=2.0)
    live = compute_metrics(store.db)
    store.db.close()
    ro: Database = open_database(tmp_path / "x.duckdb", read_only=True)
    try:
        assert compute_metrics(ro) == live
    finally:
        ro.close()


# -- the command ------------------------------------------------------------------------------


def _filled(tmp_path: Path) -> Path:
    store = Store(tmp_path / "x.duckdb")
    store.episode("E1", outcome="success", cost=1.0, service="a", tools=["search"])
    store.episode("E2", outcome="failure", cost=2.0, service="b", tools=["pay"])
    store.detect("E2", 1, severity="kill")
    store.unknown("u", 3)
    store.db.close()
    return tmp_path / "x.duckdb"


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _filled(tmp_path)
    assert main(["metrics", "--db", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for key in ("tool_calls", "episodes", "loops_detected", "loop_detection_rate",
                "false_kill_rate", "unknown_reconcile_latency", "cost_per_successful_task"):
        assert key in report
    for key in ("loop_detection_rate", "false_kill_rate"):
        assert {"value", "n", "count", "interval"} <= set(report[key])
    assert report["tool_calls"] == 8 and report["episodes"] == 2
    assert report["cost_per_successful_task"]["value"] == 3.0
    assert main(["metrics", "--db", str(path), "--json", "--service", "a"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 1
    assert main(["metrics", "--db", str(path), "--json", "--tool", "pay", "--last", "1h"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 0  # stored in 2023
    assert main(["metrics", "--db", str(path), "--json", "--since", "2023-11-14T00:00:00Z",
                 "--until", "2023-11-15"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 2


def test_cli_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--db", str(_filled(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "false-stop rate" in out and "by service:" in out and "cost per successful" in out


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--db", str(tmp_path / "missing.duckdb")]) == 1
    assert "no such store file" in capsys.readouterr().err
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("create table t (x int)")
    con.close()
    assert main(["metrics", "--db", str(other)]) == 1
    assert "not a loopscope store" in capsys.readouterr().err
    assert main(["metrics", "--db", str(_filled(tmp_path)), "--last", "soon"]) == 2
    assert "not a duration" in capsys.readouterr().err


def test_cli_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["metrics", "--help"])
    assert "Example:" in capsys.readouterr().out


def test_outcome_filter_keeps_episodes_with_that_outcome(tmp_path: Path) -> None:
    """--outcome / $outcome: only successful episodes count towards the cost per success."""
    store = Store(tmp_path / "x.duckdb")
    store.episode("E1", outcome="success", cost=2.0)
    store.episode("E2", outcome="failure", cost=6.0)
    everything = compute_metrics(store.db)
    successes = compute_metrics(store.db, outcome="success")
    assert everything["episodes"] == 2 and successes["episodes"] == 1
    assert everything["cost_per_successful_task"]["value"] == 8.0
    assert successes["cost_per_successful_task"]["value"] == 2.0


def test_no_cost_recorded_is_unknown_not_zero(store: Store) -> None:
    """Runs of a priced model that report no cost and no tokens: the cost per successful task
    is unknown (null, "n/a"), not $0."""
    for eid in ("A", "B"):
        store.episode(eid, model="gpt-4o", outcome="success")
    m = metrics(store)
    cost = m["cost_per_successful_task"]
    assert cost["value"] is None and cost["successful_episodes"] == 2
    assert cost["cost_sources"]["none"] == 2 and cost["cost_sources"]["tokens"] == 0
    store.episode("C", model="gpt-4o", outcome="failure", tokens=(1_000_000, 0))
    priced = metrics(store)["cost_per_successful_task"]
    assert priced["value"] == pytest.approx(2.5 / 2) and priced["cost_sources"]["tokens"] == 1



def test_export_writes_every_table_as_parquet_and_csv(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``loopscope export``: one file per table, every row, lists as JSON text in CSV."""
    import pyarrow.parquet as pq

    path = _filled(tmp_path)
    for fmt in ("parquet", "csv"):
        out = tmp_path / fmt
        assert main(["export", "--db", str(path), "--format", fmt, "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        assert "tool_calls" in printed and str(out / f"episodes.{fmt}") in printed
    con = duckdb.connect(str(path), read_only=True)
    calls = con.execute("select count(*) from tool_calls").fetchone()[0]
    con.close()
    assert pq.read_table(tmp_path / "parquet" / "tool_calls.parquet").num_rows == calls
    lines = (tmp_path / "csv" / "tool_calls.csv").read_text().splitlines()
    assert len(lines) == calls + 1
    assert main(["export", "--db", str(tmp_path / "nope.duckdb")]) == 1
    assert "no such DuckDB file" in capsys.readouterr().err


@pytest.mark.parametrize("priced", ["episode", "calls", "root_tokens", "call_tokens"])
def test_the_loops_per_tool_cost_adds_up_to_cost_after_the_first_flag(
    store: Store, priced: str,
) -> None:
    """The Loops page's per-tool cost in loops adds up to the card's cost after the first
    flag whichever way a run is priced: its own cost, its calls' costs, or its tokens at its
    model's price (the root's tokens, or its calls' when the root has none); the looping
    signatures (only the calls that looped) are priced the same way, so never zero."""
    kwargs: dict[str, Any] = {
        "episode": {"cost": 0.8},
        "calls": {"call_cost": 0.25},
        "root_tokens": {"tokens": (400_000, 20_000)},
        "call_tokens": {},
    }[priced]
    store.episode("P1", calls=6, model="gpt-4o", tools=["search", "fetch"], **kwargs)
    store.episode("P2", calls=4, model="gpt-4o-mini", tools=["fetch"], **kwargs)
    if priced == "call_tokens":
        store.update_calls("update tool_calls set tokens_in = 50000, tokens_out = 2000")
    store.update_calls("update tool_calls set signature = tool")
    store.detect("P1", 2)
    store.detect("P2", 1)
    card = metrics(store)["cost_after_first_flag_usd"]
    assert card > 0
    tools = read(store.db, "loops_by_tool", {})
    assert sum(row["cost_in_loops_usd"] for row in tools) == pytest.approx(card)
    signatures = read(store.db, "looping_signatures", {})
    assert 0 < sum(row["cost_in_loops_usd"] for row in signatures) <= card + 1e-9


def test_shared_sql_is_written_once_and_every_read_that_names_it_gets_it() -> None:
    """The pricing rule every read that reports a cost uses comes from one fragment of
    reads.sql, and so does the false-kill rule."""
    from importlib.resources import files

    text = (files("loopscope_collector.reads") / "sql" / "reads.sql").read_text("utf-8")
    assert text.count("run_price as (") == 1  # written once
    assert text.count("json_each(coalesce($prices") == 1 and text.count("/*prices*/") == 1
    assert text.count("case when k.human_false_kill") == 1
    for name in ("loops_by_tool", "looping_signatures", "metrics_breakdown", "replay_episodes"):
        assert "run_cost as (" in READS[name].sql and "/*fragment" not in READS[name].sql


def test_the_metrics_and_the_policy_page_price_a_run_alike(store: Store) -> None:
    """One pricing rule: each run's cost in metrics_breakdown (per service: one run each) is
    the cost replay_episodes gives the Policy page, whichever way the run is priced."""
    store.episode("own", service="own", cost=0.8, tokens=(400_000, 0), model="gpt-4o")
    store.episode("calls", service="calls", call_cost=0.25, model="gpt-4o")
    store.episode("root", service="root", model="gpt-4o", tokens=(400_000, 20_000))
    store.episode("tokens", service="tokens", model="gpt-4o-mini")
    store.update_calls("update tool_calls set tokens_in = 50000, tokens_out = 2000 "
                      "where episode_id = 'tokens'")
    store.episode("unpriced", service="unpriced", model="no-such-model", tokens=(9, 9))
    store.episode("no-tokens", service="no-tokens", model="gpt-4o")
    by_service = {r["key"]: r["cost_usd"] for r in metrics(store)["breakdown"]["service"]}
    replayed = {r["episode_id"]: r["cost_usd"] for r in read(store.db, "replay_episodes", {})}
    assert replayed == {"own": 0.8, "calls": pytest.approx(1.0), "root": pytest.approx(1.2),
                        "tokens": pytest.approx(4 * (0.05 * 0.15 + 0.002 * 0.6)),
                        "unpriced": None, "no-tokens": None}
    assert by_service == {k: pytest.approx(v or 0.0) for k, v in replayed.items()}


def test_a_read_naming_a_fragment_that_does_not_exist_is_refused() -> None:
    from loopscope_collector.reads.named import _with_fragments

    with pytest.raises(ValueError, match="run_costs"):
        _with_fragments("-- name: x\nwith /*fragment run_costs*/ select 1")


def test_a_store_from_before_the_call_facts_reads_the_same_numbers(tmp_path: Path) -> None:
    """A store as version 15 left it (no call facts on its runs) opens migrated, its runs'
    call facts counted from their calls: the same metrics, every breakdown and filter."""
    store = Store(tmp_path / "x.duckdb")
    store.episode("A", outcome="success", tools=["search", "pay"], call_cost=0.25)
    store.episode("B", calls=6, model="gpt-4o", tools=["fetch"], tokens=(9000, 100))
    store.episode("C", service="other", cost=1.5, tools=["search"])
    store.update_calls("update tool_calls set call_ordinal = step + 1 + (step >= 2)::int, "
                       "tokens_in = 30 where episode_id = 'B'")
    store.detect("B", 2, severity="kill")
    store.label("A", "no_loop")
    now = [compute_metrics(store.db), compute_metrics(store.db, tool="search"),
           compute_metrics(store.db, tool="fetch", service="svc")]
    assert now[0]["breakdown"]["tool"] and now[0]["incomplete_episodes"] == 1
    store.con.execute("delete from schema_version where version = 16")
    for column in ("numbered_calls", "max_call_ordinal", "priced_calls", "calls_cost_usd",
                   "calls_tokens_in", "calls_tokens_out", "calls_by_tool"):
        store.con.execute(f"alter table episodes drop column {column}")
    store.con.execute("update episodes set tool_calls = 0")  # (never kept before 16)
    store.db.close()
    migrated = open_database(tmp_path / "x.duckdb")
    try:
        assert [compute_metrics(migrated), compute_metrics(migrated, tool="search"),
                compute_metrics(migrated, tool="fetch", service="svc")] == now
    finally:
        migrated.close()
