"""The four metric cards (docs/metrics.md) as plain values: what each card says, from the
collector's metrics report (``queries.metrics``) and the one of the window before it.

Pure, so the wording is tested without Streamlit; the Overview page only places the cards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Card:
    """One ``st.metric``: the value, the trend against the previous window, n and interval."""

    label: str
    value: str
    delta: str | None
    caption: str
    help: str
    delta_color: Literal["normal", "inverse"] = "normal"
    """``inverse`` when a rise is bad (false stops, latency, cost)."""


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _delta(now: float | None, before: float | None, fmt: str) -> str | None:
    if now is None or before is None:
        return None
    return format(now - before, fmt)


def _rate_caption(r: Mapping[str, Any], of: str, sources: str | None = None,
                  empty: str = "n = 0") -> str:
    """``3 of 4 labelled loops · 95% CI 10%–90%``: the count, its n and what n counts."""
    if not r["n"]:
        return empty
    lo, hi = r["interval"]
    labels = f" · labels: {sources}" if sources else ""
    incomplete = f" ({_runs(r['incomplete'])} incomplete)" if r.get("incomplete") else ""
    return f"{r['count']} of {r['n']} {of}{incomplete} · 95% CI {lo:.0%}–{hi:.0%}{labels}"


def _runs(n: int) -> str:
    return f"{n:,} run" + ("" if n == 1 else "s")


def loss_notice(report: Mapping[str, Any]) -> str | None:
    """What the Overview says about spans lost before the store, or ``None`` when nothing
    was lost: the spans the agents' SDKs dropped (by reason and service) and the runs in the
    window that are incomplete (the rates above count them, and say how many)."""
    lost = report["spans_lost"]
    incomplete = report["incomplete_episodes"]
    if not lost["dropped"] and not incomplete:
        return None
    parts = []
    if lost["dropped"]:
        reasons = ", ".join(f"{reason.replace('_', ' ')} {n:,}"
                            for reason, n in lost["by_reason"].items() if n)
        services = ", ".join(f"{r['service']} {r['dropped']:,}" for r in lost["by_service"]
                             if r["dropped"])
        parts.append(f"**{lost['dropped']:,} spans lost before the store**: dropped by the "
                     f"agents' SDKs ({reasons}; by service: {services})")
    if incomplete:
        parts.append(f"**{_runs(incomplete)} incomplete** in this window (calls missing from "
                     "the agent's numbering, or named by its SDK as having lost spans): "
                     "rates over them say so")
    return ". ".join(parts) + "."


def metric_cards(report: Mapping[str, Any],
                 before: Mapping[str, Any] | None = None) -> list[Card]:
    """The cards for ``report``; ``before`` (the previous window) gives the trends."""
    prior = before or {}
    det = report["loop_detection_rate"]
    fk = report["false_kill_rate"]
    lat = report["unknown_reconcile_latency"]
    cost = report["cost_per_successful_task"]

    def was(*path: str) -> Any:
        node: Any = prior
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node

    return [
        Card("Loop-detection rate", _pct(det["value"]),
             _delta(det["value"], was("loop_detection_rate", "value"), "+.1%"),
             _rate_caption(det, "labelled loops", det.get("label_source"),
                           empty="n = 0 · no labelled loops yet"),
             "Flagged runs of labelled loops (not of every flagged run). A labelled loop is a "
             "run labelled true loop on the Labels page, else one whose agent labelled it a "
             "loop (a scenario label, `loopscope.episode(label=...)`, as the demo's scripted "
             "runs do; docs/glossary.md)."),
        Card("False-stop rate", _pct(fk["value"]),
             _delta(fk["value"], was("false_kill_rate", "value"), "+.1%"),
             _rate_caption(fk, "judged stops")
             + f" · {fk.get('budget_stops', 0)} budget stop(s) beside it",
             "Runs a detector stopped (a block or a stop, or a would-stop in observe and warn "
             "mode) that were not looping / the stopped runs a label or the rule could judge. "
             "A human label outranks the agent's own scenario label, which outranks the rule: "
             "unlabelled, a stop is false when the run made progress after it and succeeded. "
             "Budget stops are a user's cap, not a detector's verdict: counted beside the "
             "rate, never in it.", "inverse"),
        Card("UNKNOWN reconcile latency",
             "n/a" if lat["p50_s"] is None else f"{lat['p50_s']:.1f} s p50",
             _delta(lat["p50_s"], was("unknown_reconcile_latency", "p50_s"), "+.1f"),
             f"p95 {_num(lat['p95_s'])} · max {_num(lat['max_s'])} · "
             f"{lat['resolved']} resolved, {lat['unresolved']} still unresolved",
             "Time from a write's UNKNOWN result (a timeout) to its reconcile.", "inverse"),
        Card("Cost per successful task",
             "n/a" if cost["value"] is None else f"${cost['value']:,.4f}",
             _delta(cost["value"], was("cost_per_successful_task", "value"), "+,.4f"),
             f"${cost['total_usd']:,.4f} over {cost['successful_episodes']} successes · "
             f"${cost['cost_after_first_flag_usd']:,.4f} after the first flag",
             "All cost in the window / successful runs.", "inverse"),
    ]


def _num(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.1f} s"
