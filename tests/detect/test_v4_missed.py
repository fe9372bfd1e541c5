"""Detection v4, the loops the labelled sets showed it missing: each situation beside the
look-alike it must spare (issue 28)."""

from __future__ import annotations

import json
from typing import Any

from episode_steps import describe, run, tool


def _kills(report: Any) -> list[tuple[int, str]]:
    return [(f.step, f.detector) for f in report.flags if f.severity == "kill"]


# -- a look-up that shows the record's reference and its amount found it --------------------------

CHARGE = {"customer": "cus_7Tq2", "amount": 18500, "currency": "eur",
          "payment_method": "pm_9XhQ2", "description": "ORD-55102", "confirm": True}


def _charge_then_look_up(listing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        tool("create_charge", CHARGE, "Error: request timed out after 30000 ms", status="timeout",
             kind="write", t=0.0),
        tool("list_charges", {"customer": "cus_7Tq2", "limit": 5}, json.dumps({"data": listing}),
             kind="read", t=40.0),
        tool("create_charge", CHARGE, json.dumps({"id": "ch_2", "status": "succeeded"}),
             kind="write", t=45.0),
    ]


def test_a_pending_charge_with_the_same_reference_and_amount_makes_a_retry_a_duplicate() -> None:
    """The amount is a number of five digits, too short to name a record alone; beside the
    reference it tells that the timed-out charge happened ("processing" is not "absent")."""
    found = _charge_then_look_up([
        {"id": "ch_1", "amount": 18500, "status": "processing", "description": "ORD-55102"},
        {"id": "ch_0", "amount": 4200, "status": "succeeded", "description": "ORD-54977"}])
    assert _kills(run(found)) == [(2, "write_duplicate")], describe(run(found))


def test_the_same_amount_on_another_reference_finds_nothing() -> None:
    other = _charge_then_look_up([
        {"id": "ch_0", "amount": 18500, "status": "succeeded", "description": "ORD-54977"}])
    assert _kills(run(other)) == [], describe(run(other))
