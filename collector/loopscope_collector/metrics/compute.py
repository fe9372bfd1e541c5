"""The collector's four metrics (docs/metrics.md), exactly as docs/metrics.md defines them.

The counting is SQL: two named reads in ``reads/sql/reads.sql`` (``metrics_breakdown`` and
``metrics_unknown_latency``), so the live collector (``GET /v1/reads/NAME``) and a read-only
DuckDB file answer from the same text. This module only turns their rows into the report:
rates with n and a Wilson 95% interval (``loopscope.offline.evaluation.rate``), costs per successful
task, latencies. ``assemble`` takes the rows from either path; ``compute_metrics`` runs the
reads on an open store, in one read transaction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Final

from loopscope.conventions import DROP_REASONS
from loopscope.offline.evaluation import rate

from ..reads import snapshot
from ..reads.filters import Filters

if TYPE_CHECKING:
    from ..storage import Store

BREAKDOWN_READ: Final = "metrics_breakdown"
LATENCY_READ: Final = "metrics_unknown_latency"
LOSS_READ: Final = "span_loss"

DIMENSIONS: Final = ("service", "agent", "model", "tool", "kind")
"""Breakdown dimensions; ``kind`` is the flag kind (episodes flagged with it)."""


def _builtin_prices() -> dict[str, dict[str, float]]:
    text = files("loopscope_collector.reads").joinpath("sql", "reads.sql").read_text("utf-8")
    found = re.search(r"/\*prices\*/'(.*?)'/\*end prices\*/", text, re.DOTALL)
    if found is None:  # pragma: no cover - the reads file is part of the package
        raise RuntimeError("reads.sql has no built-in price table")
    prices: dict[str, dict[str, float]] = json.loads(found.group(1))
    return prices


PRICES: Final[dict[str, dict[str, float]]] = _builtin_prices()
"""USD per million tokens by model-name prefix (longest prefix wins), used when an episode has
no explicit cost: ``{"gpt-4o": {"input": 2.5, "output": 10.0}, ...}``. The one copy lives in
the ``metrics_breakdown`` read; this is it, parsed, for documentation and callers."""

Reader = Callable[[str, dict[str, Any]], list[dict[str, Any]]]


def compute_metrics(
    db: Store,
    *,
    service: str | None = None,
    agent: str | None = None,
    model: str | None = None,
    tool: str | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
    outcome: str | None = None,
    prices: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """The metrics of the store, optionally filtered (see docs/metrics.md).

    ``since_ns`` / ``until_ns`` bound a half-open window [since, until) in Unix nanoseconds;
    ``prices`` overrides the built-in price table (``PRICES``).
    """
    params = Filters(service=service, agent=agent, model=model, tool=tool, outcome=outcome,
                     since_ns=since_ns, until_ns=until_ns).params()
    with snapshot(db) as read:  # both reads over one state (one lake snapshot)
        return collect(read, params, prices=prices)


def collect(
    read: Reader, params: dict[str, Any], *,
    prices: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """Run the metric reads through ``read(name, params)`` and assemble the report.

    ``read`` is ``reads.read`` over a store (a file or a lake), or an HTTP client of ``GET /v1/reads/NAME``.
    """
    breakdown_params = dict(params)
    if prices is not None:
        breakdown_params["prices"] = json.dumps(prices)
    breakdown = read(BREAKDOWN_READ, breakdown_params)
    latency = read(LATENCY_READ, dict(params))
    loss = read(LOSS_READ, {"service": params.get("service")})
    return assemble(breakdown, latency, filters=params, loss=loss)


_ZERO: Final = {
    "episodes": 0, "tool_calls": 0, "loops_detected": 0, "true_loops": 0,
    "true_loops_flagged": 0, "true_loops_human": 0, "true_loops_human_flagged": 0,
    "true_loops_scenario": 0, "true_loops_scenario_flagged": 0, "labelled_human": 0,
    "labelled_scenario": 0, "true_loops_incomplete": 0, "incomplete_episodes": 0,
    "judged_kills_incomplete": 0, "no_loop_episodes": 0, "unlabelled_episodes": 0, "kills": 0,
    "judged_kills": 0,
    "false_kills": 0, "budget_stops": 0, "kills_human": 0, "false_kills_human": 0, "kills_scenario": 0,
    "false_kills_scenario": 0, "kills_rule": 0,
    "false_kills_rule": 0, "kills_rule_unknown_outcome": 0, "successful_episodes": 0,
    "failed_episodes": 0, "cost_usd": 0.0, "cost_after_first_flag_usd": 0.0,
    "cost_from_episode": 0, "cost_from_tool_calls": 0, "cost_from_tokens": 0, "cost_unknown": 0,
}
_NO_LATENCY: Final[Mapping[str, Any]] = {"unknown_writes": 0, "resolved": 0, "unresolved": 0,
                      "p50_s": None, "p95_s": None, "max_s": None}


def _usd(value: Any) -> float:
    return round(float(value or 0.0), 6)


def _seconds(value: Any) -> float | None:
    return None if value is None else round(float(value), 6)


def _latency(row: Mapping[str, Any] | None) -> dict[str, Any]:
    row = row or _NO_LATENCY
    return {
        "p50_s": _seconds(row["p50_s"]), "p95_s": _seconds(row["p95_s"]),
        "max_s": _seconds(row["max_s"]), "resolved": int(row["resolved"]),
        "unresolved": int(row["unresolved"]), "unknown_writes": int(row["unknown_writes"]),
    }


def _cost(row: Mapping[str, Any]) -> dict[str, Any]:
    successes = int(row["successful_episodes"])
    total = _usd(row["cost_usd"])
    priced = int(row["cost_from_episode"]) + int(row["cost_from_tool_calls"]) + int(
        row["cost_from_tokens"])
    return {  # no cost recorded at all is unknown, not $0
        "value": round(total / successes, 6) if successes and priced else None,
        "total_usd": total,
        "successful_episodes": successes,
        "cost_after_first_flag_usd": _usd(row["cost_after_first_flag_usd"]),
        "cost_sources": {
            "episode": int(row["cost_from_episode"]),
            "tool_calls": int(row["cost_from_tool_calls"]),
            "tokens": int(row["cost_from_tokens"]),
            "none": int(row["cost_unknown"]),
        },
    }


def _rates(row: Mapping[str, Any]) -> dict[str, Any]:
    detection = rate(int(row["true_loops_flagged"]), int(row["true_loops"]))
    detection["by_label_source"] = {
        "human": rate(int(row["true_loops_human_flagged"]), int(row["true_loops_human"])),
        "scenario": rate(int(row["true_loops_scenario_flagged"]),
                         int(row["true_loops_scenario"])),
    }
    detection["incomplete"] = int(row["true_loops_incomplete"])
    detection["label_source"] = "+".join(
        name for name, r in detection["by_label_source"].items() if r["n"]) or None
    # n: the kills the rule could judge (detect.false_kill); the rest are reported beside it
    false_kill = rate(int(row["false_kills"]), int(row["judged_kills"]))
    false_kill["by_label_source"] = {
        "human": rate(int(row["false_kills_human"]), int(row["kills_human"])),
        "scenario": rate(int(row["false_kills_scenario"]), int(row["kills_scenario"])),
        "rule": rate(int(row["false_kills_rule"]), int(row["kills_rule"])),
    }
    false_kill["incomplete"] = int(row["judged_kills_incomplete"])
    false_kill["rule_kills_with_unknown_outcome"] = int(row["kills_rule_unknown_outcome"])
    # beside the rate, never in it: a budget is the user's cap, not a detector's verdict
    false_kill["budget_stops"] = int(row["budget_stops"])
    return {"loop_detection_rate": detection, "false_kill_rate": false_kill}


def _breakdown_row(row: Mapping[str, Any], latency: Mapping[str, Any] | None) -> dict[str, Any]:
    rates = _rates(row)
    cost = _cost(row)
    return {
        "key": row["key"],
        "tool_calls": int(row["tool_calls"]),
        "episodes": int(row["episodes"]),
        "incomplete_episodes": int(row["incomplete_episodes"]),
        "loops_detected": int(row["loops_detected"]),
        "kills": int(row["kills"]),
        "false_kills": int(row["false_kills"]),
        "budget_stops": int(row["budget_stops"]),
        "loop_detection_rate": rates["loop_detection_rate"],
        "false_kill_rate": rates["false_kill_rate"],
        "successful_episodes": cost["successful_episodes"],
        "cost_usd": cost["total_usd"],
        "cost_per_successful_task": cost["value"],
        "cost_after_first_flag_usd": cost["cost_after_first_flag_usd"],
        "unknown_reconcile_latency": _latency(latency),
    }


def assemble(
    breakdown: Sequence[Mapping[str, Any]],
    latency: Sequence[Mapping[str, Any]],
    *,
    filters: Mapping[str, Any] | None = None,
    loss: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The report from the rows of ``metrics_breakdown``, ``metrics_unknown_latency`` and
    ``span_loss``."""
    total = next((r for r in breakdown if r["dimension"] == "all"), _ZERO)
    latencies = {(r["dimension"], r["key"]): r for r in latency}
    rates = _rates(total)
    cost = _cost(total)
    by_kind = {str(r["key"]): int(r["loops_detected"])
               for r in breakdown if r["dimension"] == "kind"}
    report: dict[str, Any] = {
        "filters": {k: v for k, v in (filters or {}).items() if v is not None},
        "tool_calls": int(total["tool_calls"]),
        "episodes": int(total["episodes"]),
        "incomplete_episodes": int(total["incomplete_episodes"]),
        "spans_lost": _loss(loss),
        "loops_detected": int(total["loops_detected"]),
        "loops_detected_by_kind": by_kind,
        "kills": int(total["kills"]),
        "false_kills": int(total["false_kills"]),
        "budget_stops": int(total["budget_stops"]),
        "labels": {
            "true_loop": int(total["true_loops"]),
            "no_loop": int(total["no_loop_episodes"]),
            "unlabelled": int(total["unlabelled_episodes"]),
            "by_source": {"human": int(total["labelled_human"]),
                          "scenario": int(total["labelled_scenario"])},
        },
        "loop_detection_rate": rates["loop_detection_rate"],
        "false_kill_rate": rates["false_kill_rate"],
        "unknown_reconcile_latency": _latency(latencies.get(("all", None))),
        "cost_per_successful_task": cost,
        "cost_after_first_flag_usd": cost["cost_after_first_flag_usd"],
        "breakdown": {
            dim: [_breakdown_row(r, latencies.get((dim, r["key"])))
                  for r in breakdown if r["dimension"] == dim]
            for dim in DIMENSIONS
        },
        "definitions": "docs/metrics.md",
    }
    return report


def _loss_counts(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"dropped": int(row["dropped"]),
            "by_reason": {reason: int(row[reason]) for reason in DROP_REASONS},
            "started": int(row["started"]), "exported": int(row["exported"]),
            "instances": int(row["instances"]), "incomplete_runs": int(row["incomplete_runs"])}


def _loss(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Spans lost before the store, as the agents' SDKs reported them (``span_loss``)."""
    total = next((r for r in rows if r["dimension"] == "all"), None)
    report = _loss_counts(total) if total is not None else {
        "dropped": 0, "by_reason": dict.fromkeys(DROP_REASONS, 0), "started": 0,
        "exported": 0, "instances": 0, "incomplete_runs": 0}
    report["by_service"] = [{"service": r["service"], **_loss_counts(r)}
                            for r in rows if r["dimension"] == "service"]
    return report


def _pct(r: Mapping[str, Any]) -> str:
    if r["value"] is None:
        return "n/a (n=0)"
    lo, hi = r["interval"]
    incomplete = f"; {r['incomplete']:,} runs incomplete" if r.get("incomplete") else ""
    return (f"{r['value']:.1%} ({r['count']}/{r['n']}{incomplete}, "
            f"95% CI {lo:.1%}–{hi:.1%})")


def _num(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:,.3f}{unit}"


def _lost(loss: Mapping[str, Any]) -> str:
    if not loss["dropped"]:
        return "0 (as the agents' SDKs report)" if loss["instances"] else "0"
    reasons = ", ".join(f"{reason.replace('_', ' ')} {n:,}"
                        for reason, n in loss["by_reason"].items() if n)
    services = ", ".join(f"{r['service']} {r['dropped']:,}" for r in loss["by_service"]
                         if r["dropped"])
    return (f"{loss['dropped']:,} dropped by the agents' SDKs ({reasons}; by service: "
            f"{services}); {loss['incomplete_runs']:,} runs named as incomplete")


def format_table(report: Mapping[str, Any]) -> str:
    """The report as readable text."""
    lat = report["unknown_reconcile_latency"]
    cost = report["cost_per_successful_task"]
    if cost["value"] is not None:
        cost_text = (f"${cost['value']:,.4f} (${cost['total_usd']:,.4f} / "
                     f"{cost['successful_episodes']} successes)")
    elif cost["successful_episodes"]:  # successes, but nothing priced (see _cost)
        cost_text = f"n/a (no cost recorded for the {report['episodes']:,} runs)"
    else:
        cost_text = "n/a (no successful run)"
    fk = report["false_kill_rate"]
    kinds = ", ".join(f"{k} {n}" for k, n in report["loops_detected_by_kind"].items()) or "none"
    filters = ", ".join(f"{k}={v}" for k, v in report["filters"].items()) or "none"
    lines = [
        f"filters: {filters}",
        f"tool calls                 {report['tool_calls']:,}",
        f"runs                       {report['episodes']:,}"
        + (f" ({report['incomplete_episodes']:,} incomplete: spans lost on the way)"
           if report["incomplete_episodes"] else ""),
        f"spans lost before the store {_lost(report['spans_lost'])}",
        f"loops detected             {report['loops_detected']:,} runs (by kind: {kinds})",
        f"loop-detection rate        {_pct(report['loop_detection_rate'])}"
        f"  [labels: {report['loop_detection_rate']['label_source'] or 'none'}]",
        f"false-stop rate            {_pct(fk)}",
        f"  human-labelled stops     {_pct(fk['by_label_source']['human'])}",
        f"  scenario-labelled stops  {_pct(fk['by_label_source']['scenario'])}",
        f"  unlabelled rule          {_pct(fk['by_label_source']['rule'])}"
        f"; {fk['rule_kills_with_unknown_outcome']} not judged (no outcome)",
        f"budget stops               {report['budget_stops']:,} runs (a user's cap: not "
        "in the false-stop rate)",
        f"UNKNOWN reconcile latency  p50 {_num(lat['p50_s'], ' s')}, p95 "
        f"{_num(lat['p95_s'], ' s')}, max {_num(lat['max_s'], ' s')}; "
        f"{lat['unresolved']} unresolved of {lat['unknown_writes']}",
        f"cost per successful task   {cost_text}",
        f"cost after first flag      ${cost['cost_after_first_flag_usd']:,.4f}",
    ]
    for dim in DIMENSIONS:
        rows = report["breakdown"][dim]
        if not rows:
            continue
        lines += ["", f"by {dim}:",
                  f"  {'key':<24} {'calls':>9} {'runs':>8} {'loops':>6} {'stops':>6} "
                  f"{'false stops':>11} {'budget stops':>12} {'detected':>8} {'$/success':>10} "
                  f"{'UNKNOWN p50':>11} {'unresolved':>10}"]
        for row in rows:
            det = row["loop_detection_rate"]["value"]
            lat_row = row["unknown_reconcile_latency"]
            per = row["cost_per_successful_task"]
            key = "(none)" if row["key"] is None else str(row["key"])
            det_s = "-" if det is None else f"{det:.0%}"
            per_s = "-" if per is None else f"{per:.4f}"
            p50_s = "-" if lat_row["p50_s"] is None else f"{lat_row['p50_s']:.1f}"
            lines.append(
                f"  {key[:24]:<24} {row['tool_calls']:>9,} {row['episodes']:>8,} "
                f"{row['loops_detected']:>6,} {row['kills']:>6,} {row['false_kills']:>11,} "
                f"{row['budget_stops']:>12,} {det_s:>8} {per_s:>10} {p50_s:>11} "
                f"{lat_row['unresolved']:>10}"
            )
    return "\n".join(lines)
