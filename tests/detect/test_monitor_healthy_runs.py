"""Healthy runs an independent review of detection v3 found it killing, each kept as a case.

Every one of these was blocked or stopped by an earlier state of v3 (v2 killed none of them):
each must now run to its end with no block or stop.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from episode_steps import describe, msg, run, tool

from loopscope.detect import EpisodeMonitor, Policy, ToolCall, ToolResult

PEOPLE = ["ana", "bo", "cy", "dee", "eli", "fay", "gus", "hal", "ivy", "jo", "kit", "lu"]
SEARCH = json.dumps({"results": [
    {"title": "PostgreSQL 17 EOL", "url": "https://endoflife.date/postgresql"},
    {"title": "Versioning policy", "url": "https://www.postgresql.org/support/versioning/"},
    {"title": "PG 17 released", "url": "https://www.postgresql.org/about/news/17"}]})
QUERIES = ["postgres 17 end of life date", "PostgreSQL 17 EOL",
           "when does postgresql 17 support end", "postgresql 17 support policy",
           "postgres 17 versioning policy", "postgres 17 final release date"]


def _sends() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps = [tool("send_message", {"to": f"{p}@example.com", "text": f"Hi {p}, the offsite moved."},
                  json.dumps({"ok": True, "message_id": f"msg_{1000 + i}"}), t=3.0 * i)
             for i, p in enumerate(PEOPLE)]
    return steps, {"task": "Tell each of the twelve team leads that the offsite moved."}


def _block_watch() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return [tool("get_latest_block", {"chain": "eth"},
                 json.dumps({"number": 19000000 + i, "txs": 100 + i}), t=15.0 * i)
            for i in range(5)], {}


def _calculator() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    pairs = [(2, 3), (2, 3), (4, 5), (4, 5), (6, 7), (6, 7)]
    return [tool("add", {"a": a, "b": b}, str(a + b), t=2.0 * i)
            for i, (a, b) in enumerate(pairs)], {"task": "Compute (2+3)+(2+3)+(4+5)+(4+5)"}


def _flaky_test() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    cmd = "cd /repo && pytest tests/test_sync.py -q > /tmp/sync.log 2>&1; tail -3 /tmp/sync.log"
    outs = ["1 failed, 11 passed in 3.2s", "12 passed in 3.1s", "12 passed in 3.3s",
            "1 failed, 11 passed in 3.4s"]
    return [tool("bash", {"command": cmd}, o, t=10.0 * i) for i, o in enumerate(outs)], {
        "task": "test_sync looks flaky. Run it a few times and tell me how often it fails."}


def _curl_lookup_then_retry() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    post = ("curl -sS -X POST https://api.halden.example/v2/orders "
            "-d '{\"reference\":\"R-20931\",\"qty\":3}'")
    look = 'curl -sS "https://api.halden.example/v2/orders?reference=R-20931"'
    return [tool("run_shell", {"command": post}, "curl: (56) Connection reset by peer",
                 status="error", t=0.0),
            tool("run_shell", {"command": look}, '{"orders": []}', t=5.0),
            tool("run_shell", {"command": post}, '{"id": "ord_1", "status": "created"}',
                 t=10.0)], {}


def _declined_then_other_card() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return [tool("charge_card", {"order": "o-5", "card": "card_visa_4242", "amount": 59.9},
                 "Error 402: card declined by the payment gateway", status="error", t=0.0),
            msg("user", "Use my Mastercard ending 4444 instead."),
            tool("charge_card", {"order": "o-5", "card": "card_mc_4444", "amount": 59.9},
                 "Charged 59.90 EUR, receipt r-91", t=30.0)], {}


def _countdown() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps = [tool("get_export_status", {"export_id": "ex-9"},
                  f"Export ex-9 is RUNNING. Estimated time remaining: {e} minutes.", t=60.0 * i)
             for i, e in enumerate(range(14, 0, -1))]
    steps.append(tool("get_export_status", {"export_id": "ex-9"}, "Export ex-9 is DONE.",
                      t=60.0 * 14))
    return steps, {"task": "Export the ledger and give me the download link."}


def _download() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return [tool("get_download_status", {"id": "dl-3"},
                 f"Downloading ubuntu.iso: {0.3 * i:.1f} GB of 5.8 GB", t=30.0 * i)
            for i in range(1, 20)], {}


def _canary() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps = [tool("get_pipeline", {"id": "p-88"},
                  f"pipeline p-88\nlint: status=failed\ndeploy-canary: running, {d} of 10 hosts",
                  kind="poll", t=30.0 * i) for i, d in enumerate((3, 5, 7, 9))]
    steps.append(tool("get_pipeline", {"id": "p-88"},
                      "pipeline p-88\nlint: status=failed\ndeploy-canary: succeeded, 10 of 10",
                      kind="poll", t=120.0))
    return steps, {}


def _store_sweep() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps = []
    for i, store in enumerate(["S01", "S02", "S03", "S04", "S05", "S06"]):
        steps += [tool("check_store_stock", {"store": store, "sku": "PS5-PRO"},
                       "Out of stock at this store.", t=6.0 * i),
                  tool("check_store_backorder", {"store": store, "sku": "PS5-PRO"},
                       "Backorder not available for this store.", t=6.0 * i + 3)]
    return steps, {}


def _any_update() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps = [msg("user", "Kick off the nightly backup and keep me posted."),
             tool("start_backup", {"target": "nightly"}, "Backup job bk-1 started", t=0.0),
             msg("assistant", "I started backup job bk-1 and will keep you posted on it.")]
    for _ in range(6):
        steps += [msg("user", "any update?"),
                  msg("assistant", "No update yet: backup job bk-1 is still running, and I "
                                   "will tell you as soon as it finishes.")]
    return steps, {}


def _another_one() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps = [msg("user", "Create a placeholder ticket in project web titled TBD.")]
    for n in range(4):
        steps += [tool("create_ticket", {"project": "web", "title": "TBD"},
                       json.dumps({"key": f"WEB-{100 + n}"}), t=10.0 * n),
                  msg("assistant", f"Created WEB-{100 + n}."), msg("user", "another one")]
    return steps, {}


def _found_then_asked_again() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    order = {"sku": "CART-88", "qty": 3, "customer": "ana@example.com", "reference": "PO-20931"}
    return [msg("user", "Order 3 carts (CART-88) for ana@example.com, reference PO-20931."),
            tool("create_order", order, "Request timed out", status="timeout", t=0.0),
            tool("find_orders", {"customer": "ana@example.com"},
                 json.dumps([{"id": "ord_77", "sku": "CART-88", "reference": "PO-20931"}]),
                 t=5.0),
            msg("assistant", "The order went through after all: ord_77."),
            msg("user", "Thanks. Please place a second identical order now."),
            tool("create_order", order, json.dumps({"id": "ord_78"}), t=60.0)], {}


def _deadline_in_the_first_message() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps = [msg("user", "Start the ledger export. It can take up to 40 minutes; check every "
                         "2 minutes until it is done."),
             tool("start_export", {"ledger": "main"}, "Export ex-9 started.", t=0.0)]
    steps += [tool("get_export", {"export_id": "ex-9"}, "Export ex-9: PENDING", kind="poll",
                   t=120.0 * i) for i in range(1, 9)]
    return steps, {}


CASES = {
    "twelve-distinct-sends": _sends,
    "a-read-named-get-latest-block": _block_watch,
    "a-calculator-add": _calculator,
    "a-flaky-test-run-logged-to-tmp": _flaky_test,
    "a-curl-post-looked-up-then-retried": _curl_lookup_then_retry,
    "a-declined-card-then-another": _declined_then_other_card,
    "an-export-counting-down": _countdown,
    "a-download-growing": _download,
    "a-canary-beside-a-failed-lint-job": _canary,
    "a-store-sweep-stock-and-backorder": _store_sweep,
    "a-person-asking-any-update": _any_update,
    "another-one-asked-again": _another_one,
    "a-found-write-asked-for-again-in-a-new-turn": _found_then_asked_again,
    "a-deadline-in-the-first-user-message": _deadline_in_the_first_message,
}


@pytest.mark.parametrize("name", CASES)
def test_the_healthy_run_is_never_blocked_or_stopped(name: str) -> None:
    steps, meta = CASES[name]()
    report = run(steps, **meta)
    assert report.first_kill is None and report.stop is None, describe(report)


def test_searches_issued_together_are_not_stopped_before_a_warning_was_read() -> None:
    m = EpisodeMonitor(task="When does PostgreSQL 17 reach end of life?")
    for i, q in enumerate(QUERIES):
        m.before_call(ToolCall("web_search", {"q": q}, call_id=f"c{i}", t=10.0))
    actions = [m.after_call(ToolResult(SEARCH, call_id=f"c{i}", t=10.5)).action
               for i in range(len(QUERIES))]
    assert "stop" not in actions and "warn" in actions, actions


def test_a_cap_of_warn_is_never_a_kill() -> None:
    steps = [tool("web_search", {"q": q}, SEARCH, t=5.0 * i) for i, q in enumerate(QUERIES)]
    policy = Policy(actions={"output_stagnation": "warn", "fuzzy_repeat": "warn"})
    report = run(steps, policy, task="When does PostgreSQL 17 reach end of life?")
    assert report.flags and report.first_kill is None, describe(report)


@pytest.mark.parametrize("output", [
    json.dumps({"n": 10**5000 // 10**4995}) + "[" * 1500 + "]" * 1500,
    "[" * 1500 + "]" * 1500,
])
def test_odd_outputs_and_arguments_never_raise(output: str) -> None:
    m = EpisodeMonitor()
    m.before_call(ToolCall("probe", {"n": 10**5000}))
    m.after_call(ToolResult(output))


def test_the_write_key_advances_with_a_colon_in_the_run_id() -> None:
    m = EpisodeMonitor(episode_id="session:42")
    keys = []
    for _ in range(2):
        keys.append(m.before_call(ToolCall("send_message", {"channel": "ops", "text": "x"},
                                           kind="write")).idempotency_key)
        m.after_call(ToolResult("sent"))
    assert keys[0] != keys[1], keys
