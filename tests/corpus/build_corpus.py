#!/usr/bin/env python3
"""Build the authored, labelled loop corpus: ``python tests/corpus/build_corpus.py``.

Every episode below is written by hand, from first principles: what a careful reviewer
would call *stuck* (``label.loop`` true) or *legitimately making progress* (false). Each
loop has a twin look-alike of the same class that a naive repeat counter would trip on.
The labels were not tuned against any detector.

The script is deterministic (standard library only; the few random details, such as tool
call ids, pacing jitter and token counts, come from a ``random.Random`` seeded by the
episode id) and rewrites ``corpus.jsonl`` beside it, one episode per line, keys sorted.
``render()`` returns the same text without writing, for the format test.
"""

from __future__ import annotations

import itertools
import json
import random
import string
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "corpus.jsonl"
SOURCE = "authored: tests/corpus"

# The classes of the corpus (meta.corpus_class), each with loops and look-alikes.
CLASSES: dict[str, str] = {
    "read_spin": "the same read with the same result vs. a few re-reads, then an answer",
    "housekeeping": "a housekeeping call between real progress vs. housekeeping + a stale read",
    "write_identity": "writes judged by identity (user turn, task, key, reconcile), not args",
    "poll": "polls judged by evidence and the task's stated time",
    "error_variation": "the same failure in varying words vs. a fix or a transient failure",
    "jitter_stagnation": "tiny argument edits with the same output vs. a real sweep",
    "monologue": "an agent chanting to itself vs. long or multi-turn text that says new things",
    "edit_revert": "an edit flipped back and forth vs. one revert after a failed test",
    "design_seed": "the six examples of DESIGN.md section 1, a loop and a look-alike each",
    "cursor_pagination": "a cursor that does not advance vs. a long real pagination",
    "read_oscillation": "two reads alternating with the same outputs vs. changing outputs",
}
TASK_TYPES = ("lookup", "polling", "coding", "research", "transaction", "other")
LOOP_KINDS = (
    "exact_repeat", "repeat_same_error", "oscillation", "param_jitter", "output_stagnation",
    "monologue", "cursor_stuck", "poll_timeout", "write_duplicate",
)
LEGIT_KINDS = ("poll_legit", "write_retry_legit", "none")

_ID_CHARS = string.ascii_letters + string.digits


def j(obj: Any) -> str:
    """A tool's JSON output as the model sees it."""
    return json.dumps(obj, ensure_ascii=False)


class Ep:
    """One episode being written: steps, a clock and a running context size."""

    def __init__(self, eid: str, cls: str, task: str, task_type: str, *, domain: str,
                 id_style: str | None = None, design_seed: str | None = None) -> None:
        assert eid.startswith("corpus-") and cls in CLASSES and task_type in TASK_TYPES
        assert (cls == "design_seed") == (design_seed is not None)
        self.eid, self.cls, self.task, self.task_type = eid, cls, task, task_type
        self.domain, self.design_seed = domain, design_seed
        self.rng = random.Random(eid)
        self.steps: list[dict[str, Any]] = []
        self.t = 0.0
        self.ctx = self.rng.randint(1400, 4200)  # system prompt + tool schemas
        self.style = id_style or self.rng.choice(("openai", "anthropic", "short"))
        self.calls = 0
        self.user(task)

    # -- clock and ids -------------------------------------------------------------------
    def _tick(self, dt: float | None, lo: float, hi: float) -> float:
        if not self.steps:
            return 0.0
        step = self.rng.uniform(lo, hi) if dt is None else dt
        self.t = round(self.t + max(step, 0.05), 3)
        return self.t

    def _call_id(self) -> str:
        self.calls += 1
        if self.style == "openai":
            return "call_" + "".join(self.rng.choices(_ID_CHARS, k=24))
        if self.style == "anthropic":
            return "toolu_01" + "".join(self.rng.choices(_ID_CHARS, k=22))
        return f"tc_{self.calls:03d}"

    # -- steps -----------------------------------------------------------------------------
    def user(self, text: str, dt: float | None = None) -> int:
        """A user turn; returns its step index."""
        t = self._tick(dt, 9.0, 45.0)
        self.steps.append({"type": "message", "role": "user", "content": text, "t": t})
        self.ctx += len(text) // 4 + 4
        return len(self.steps) - 1

    def say(self, text: str, dt: float | None = None) -> int:
        """An assistant turn; returns its step index."""
        t = self._tick(dt, 1.5, 6.0)
        out = len(text) // 4 + 6
        self.steps.append({"type": "message", "role": "assistant", "content": text, "t": t,
                           "tokens_in": self.ctx, "tokens_out": out})
        self.ctx += out
        return len(self.steps) - 1

    def call(self, tool: str, args: dict[str, Any], output: Any, *, kind: str | None = None,
             status: str = "ok", dt: float | None = None, **extra: Any) -> int:
        """A tool call and its result; returns its step index.

        ``dt`` is the time since the previous step (a poll passes the wait it took);
        ``extra`` carries the optional fields a real integration would set
        (``idempotency_key``, ``intent``, ``deadline_s``).
        """
        assert kind in (None, "read", "write", "poll") and status in ("ok", "error", "timeout")
        assert set(extra) <= {"idempotency_key", "intent", "deadline_s"}, extra
        text = output if isinstance(output, str) else j(output)
        t = self._tick(dt, 0.7, 3.8)
        out = 14 + len(json.dumps(args, ensure_ascii=False)) // 3 + self.rng.randint(0, 30)
        step = {"type": "tool", "tool": tool, "tool_call_id": self._call_id(), "kind": kind,
                "args": args, "output": text, "status": status, "t": t,
                "tokens_in": self.ctx, "tokens_out": out}
        step.update(extra)
        self.steps.append(step)
        self.ctx += out + max(6, len(text) // 4)
        return len(self.steps) - 1

    def wait(self, seconds: float) -> None:
        """Time passes with nothing recorded (the agent slept, or a human was away)."""
        self.t = round(self.t + seconds, 3)

    # -- the label ----------------------------------------------------------------------------
    def loop(self, kind: str, first: int, why: str, outcome: str = "failure") -> dict[str, Any]:
        assert kind in LOOP_KINDS and outcome in ("failure", "unknown")
        return self._done(True, kind, first, why, outcome)

    def legit(self, kind: str, why: str, outcome: str = "success") -> dict[str, Any]:
        assert kind in LEGIT_KINDS
        return self._done(False, kind, None, why, outcome)

    def _done(self, loop: bool, kind: str, first: int | None, why: str,
              outcome: str) -> dict[str, Any]:
        assert "\n" not in why and why.strip() == why and len(why) < 220, why
        meta = {"corpus_class": self.cls, "domain": self.domain}
        if self.design_seed:
            meta["design_seed"] = self.design_seed
        return {
            "episode_id": self.eid,
            "source": SOURCE,
            "task": self.task,
            "task_type": self.task_type,
            "outcome": outcome,
            "label": {"loop": loop, "kind": kind, "first_loop_step": first, "why": why},
            "meta": meta,
            "steps": self.steps,
        }


CASES: list[Callable[[], dict[str, Any]]] = []


def case(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """Register one episode builder (in file order)."""
    CASES.append(fn)
    return fn


# ==== cases ====================================================================================


# ---- 1. read spin -------------------------------------------------------------------------------

_DESK_ORDER = {
    "order_id": "#W7302981", "user_id": "maria_lopez_4120", "status": "pending",
    "address": {"address1": "1180 Alder Street", "address2": "Apt 4B", "city": "Portland",
                "state": "OR", "zip": "97205", "country": "USA"},
    "items": [{"name": "Standing Desk", "product_id": "3616838507", "item_id": "8069050545",
               "options": {"size": "large", "material": "bamboo", "color": "natural"},
               "price": 719.18}],
    "fulfillments": [],
    "payment_history": [{"transaction_type": "payment", "amount": 719.18,
                         "payment_method_id": "credit_card_5541872"}],
}


@case
def read_spin_loop_desk_order() -> dict[str, Any]:
    e = Ep("corpus-read-spin-loop-desk-order", "read_spin",
           "Hi, I ordered a standing desk about a week ago and still haven't gotten a tracking "
           "number. My email is maria.lopez@fastmail.com. Can you tell me when it will ship?",
           "lookup", domain="retail")
    e.say("I'll look up your account first.")
    e.call("find_user_id_by_email", {"email": "maria.lopez@fastmail.com"}, "maria_lopez_4120",
           kind="read")
    e.call("get_user_details", {"user_id": "maria_lopez_4120"},
           {"user_id": "maria_lopez_4120", "name": {"first_name": "Maria", "last_name": "Lopez"},
            "email": "maria.lopez@fastmail.com", "orders": ["#W7302981", "#W1184426"],
            "payment_methods": {"credit_card_5541872": {"brand": "visa", "last_four": "0981"}}},
           kind="read")
    e.call("get_order_details", {"order_id": "#W7302981"}, _DESK_ORDER, kind="read")
    e.say("The order is pending and has no fulfillment yet. Let me pull the order details to "
          "find the tracking number.")
    e.call("get_order_details", {"order_id": "#W7302981"}, _DESK_ORDER, kind="read")
    first = e.call("get_order_details", {"order_id": "#W7302981"}, _DESK_ORDER, kind="read")
    e.say("I still need the tracking number for this order. Retrieving the order details.")
    for _ in range(4):
        e.call("get_order_details", {"order_id": "#W7302981"}, _DESK_ORDER, kind="read")
    return e.loop("exact_repeat", first,
                  "get_order_details on the same pending order returns the identical record 7 "
                  "times; the tracking number it keeps looking for is not in it")


_PODS = (
    "NAME                            READY   STATUS             RESTARTS       AGE\n"
    "payments-api-7d9c6b5f4-x2k8q    0/1     CrashLoopBackOff   6 (2m4s ago)   14m\n"
    "payments-api-7d9c6b5f4-zq7mn    0/1     CrashLoopBackOff   6 (2m9s ago)   14m\n"
    "payments-worker-5b8f9d7c-4hltp  1/1     Running            0              3d2h\n"
)


@case
def read_spin_loop_crashloop_pods() -> dict[str, Any]:
    e = Ep("corpus-read-spin-loop-crashloop-pods", "read_spin",
           "payments-api in the payments namespace has been crashlooping since the 14:05 "
           "deploy. Find out why and tell me what to fix.", "other", domain="devops")
    cmd = {"command": "kubectl get pods -n payments"}
    e.call("run_shell", cmd, _PODS)
    e.say("Both payments-api pods are in CrashLoopBackOff. Let me check the pod status.")
    e.call("run_shell", cmd, _PODS, dt=2.4)
    first = e.call("run_shell", cmd, _PODS, dt=3.1)
    e.say("The pods are still in CrashLoopBackOff with 6 restarts. Checking the pods again.")
    for _ in range(5):
        e.call("run_shell", cmd, _PODS)
    return e.loop("exact_repeat", first,
                  "the same `kubectl get pods` returns the same CrashLoopBackOff table 8 times "
                  "within a minute; the agent never reads logs or events")


_GUEST = ("Could not find [The Guest (2014 American film)]. Similar: ['The Guest (film)', "
          "'Dan Stevens', 'Adam Wingard', 'Maika Monroe', 'The Guest (2014 film) soundtrack'].")


@case
def read_spin_loop_react_search() -> dict[str, Any]:
    e = Ep("corpus-read-spin-loop-react-search", "read_spin",
           "Question: The lead actor of The Guest (2014 American film) played which character "
           "in Downton Abbey?", "research", domain="research", id_style="short")
    e.say("Thought 1: I need to search The Guest (2014 American film), find its lead actor, "
          "then find which Downton Abbey character he played.")
    e.call("Search", {"entity": "The Guest (2014 American film)"}, _GUEST, kind="read")
    e.say("Thought 2: The page was not found. I should search The Guest (2014 American film) "
          "again.")
    e.call("Search", {"entity": "The Guest (2014 American film)"}, _GUEST, kind="read")
    e.say("Thought 3: I need to search The Guest (2014 American film) to find the lead actor.")
    first = e.call("Search", {"entity": "The Guest (2014 American film)"}, _GUEST, kind="read")
    for n in (4, 5, 6):
        e.say(f"Thought {n}: I still need the lead actor of The Guest (2014 American film). "
              "Let me search it.")
        e.call("Search", {"entity": "The Guest (2014 American film)"}, _GUEST, kind="read")
    return e.loop("exact_repeat", first,
                  "Search for the same title returns the same 'Could not find' list 6 times; the "
                  "agent never follows the suggested 'The Guest (film)' or 'Dan Stevens'")


_ZFA = {
    "reservation_id": "ZFA04Y", "user_id": "chen_wei_8831", "origin": "SEA", "destination": "ORD",
    "flight_type": "round_trip", "cabin": "economy",
    "flights": [{"flight_number": "HAT089", "date": "2024-05-21", "price": 164},
                {"flight_number": "HAT112", "date": "2024-05-26", "price": 171}],
    "passengers": [{"first_name": "Wei", "last_name": "Chen", "dob": "1988-03-14"}],
    "payment_history": [{"payment_id": "credit_card_2204411", "amount": 335}],
    "created_at": "2024-05-02T11:40:12", "total_baggages": 1, "nonfree_baggages": 0,
    "insurance": "no",
}


@case
def read_spin_loop_airline_think() -> dict[str, Any]:
    e = Ep("corpus-read-spin-loop-airline-think", "read_spin",
           "I want to upgrade my reservation ZFA04Y to business class for both flights. My user "
           "id is chen_wei_8831. Tell me the price difference before you do anything.",
           "transaction", domain="airline")
    e.call("get_user_details", {"user_id": "chen_wei_8831"},
           {"user_id": "chen_wei_8831", "membership": "silver",
            "reservations": ["ZFA04Y", "K3MPL0"],
            "payment_methods": {"credit_card_2204411": {"brand": "mastercard",
                                                         "last_four": "4411"}}},
           kind="read")
    e.call("get_reservation_details", {"reservation_id": "ZFA04Y"}, _ZFA, kind="read")
    thoughts = [
        "The reservation is economy. I need the business fare for HAT089 and HAT112.",
        "I should confirm the flights on the reservation before computing the difference.",
        "The price difference requires the business fares; check the reservation first.",
        "Re-verify flight numbers and dates of ZFA04Y.",
        "Need the current cabin and the flights to compute the upgrade price.",
        "Check the reservation details once more before quoting the user.",
    ]
    first = None
    for n, thought in enumerate(thoughts):
        e.call("think", {"thought": thought}, "", kind="read")
        i = e.call("get_reservation_details", {"reservation_id": "ZFA04Y"}, _ZFA, kind="read")
        if n == 1:
            first = i
    assert first is not None
    return e.loop("exact_repeat", first,
                  "get_reservation_details(ZFA04Y) returns the same record 7 times with think "
                  "calls between; the agent never searches the business fares it says it needs")


_INVOICE = {
    "invoiceId": "INV-2024-00917", "customer": "Brightline Dental LLC", "status": "paid",
    "currency": "USD", "total": 1480.00,
    "lines": [{"sku": "PLAN-PRO-ANNUAL", "description": "Pro plan, annual", "amount": 1480.00}],
    "issuedAt": "2024-03-01", "paidAt": "2024-03-04",
}


@case
def read_spin_loop_invoice_camel() -> dict[str, Any]:
    e = Ep("corpus-read-spin-loop-invoice-camel", "read_spin",
           "We were charged twice for invoice INV-2024-00917 ($1,480 each, March 4 and March 5). "
           "Can you confirm the double charge and start a refund for the second one?",
           "transaction", domain="finance")
    e.call("getInvoice", {"invoiceId": "INV-2024-00917"}, _INVOICE)
    e.say("The invoice shows as paid on 2024-03-04. Let me look at the invoice again to find the "
          "second charge.")
    e.call("getInvoice", {"invoiceId": "INV-2024-00917"}, _INVOICE)
    first = e.call("getInvoice", {"invoiceId": "INV-2024-00917"}, _INVOICE)
    e.say("I need to locate the duplicate payment on this invoice.")
    for _ in range(4):
        e.call("getInvoice", {"invoiceId": "INV-2024-00917"}, _INVOICE)
    return e.loop("exact_repeat", first,
                  "getInvoice on one invoice returns the same record 7 times; the charges live "
                  "in the payments, which the agent never lists")


_PRICING_STUB = (
    "<!doctype html><html><head><title>Pricing | Cloudnimbus</title></head><body>"
    "<div id=\"root\"></div><noscript>You need to enable JavaScript to run this app."
    "</noscript><script src=\"/static/js/main.4f1c2a9e.js\"></script></body></html>"
)


@case
def read_spin_loop_js_page() -> dict[str, Any]:
    e = Ep("corpus-read-spin-loop-js-page", "read_spin",
           "What does Cloudnimbus charge per GB of egress on their Team plan? Check their pricing "
           "page.", "research", domain="research")
    url = {"url": "https://cloudnimbus.io/pricing"}
    e.call("fetch_url", url, _PRICING_STUB)
    e.say("The page body is empty; the pricing table may not have loaded. Let me fetch it again.")
    e.call("fetch_url", url, _PRICING_STUB)
    first = e.call("fetch_url", url, _PRICING_STUB)
    e.say("Still no pricing table. Fetching the pricing page again.")
    for _ in range(4):
        e.call("fetch_url", url, _PRICING_STUB)
    return e.loop("exact_repeat", first,
                  "the same URL returns the same JavaScript-only stub 7 times; refetching cannot "
                  "render it and the agent tries nothing else")


@case
def read_spin_ok_recheck_before_cancel() -> dict[str, Any]:
    e = Ep("corpus-read-spin-ok-recheck-before-cancel", "read_spin",
           "Please cancel order #W4817420 if it hasn't shipped yet. I'm omar_haddad_2291.",
           "transaction", domain="retail")
    pending = {"order_id": "#W4817420", "user_id": "omar_haddad_2291", "status": "pending",
               "items": [{"name": "Espresso Machine", "item_id": "3709608322",
                          "options": {"pressure": "15 bar", "capacity": "1.5L"},
                          "price": 289.99}],
               "fulfillments": [],
               "payment_history": [{"transaction_type": "payment", "amount": 289.99,
                                    "payment_method_id": "paypal_7744120"}]}
    e.call("get_order_details", {"order_id": "#W4817420"}, pending, kind="read")
    e.say("Order #W4817420 (Espresso Machine, $289.99) is still pending and has not shipped. To "
          "cancel it I need a reason: 'no longer needed' or 'ordered by mistake'?")
    e.user("Ordered by mistake. But can you double-check it really hasn't shipped? My tracking "
           "app showed something this morning.")
    e.call("get_order_details", {"order_id": "#W4817420"}, pending, kind="read")
    e.say("I checked again: still pending, no fulfillment and no tracking number. The tracking "
          "app may be showing a different order. Cancelling #W4817420 now.")
    cancelled = dict(pending, status="cancelled", cancel_reason="ordered by mistake",
                     payment_history=pending["payment_history"] + [
                         {"transaction_type": "refund", "amount": 289.99,
                          "payment_method_id": "paypal_7744120"}])
    e.call("cancel_pending_order", {"order_id": "#W4817420", "reason": "ordered by mistake"},
           cancelled, kind="write")
    e.call("get_order_details", {"order_id": "#W4817420"}, cancelled, kind="read")
    e.say("Done: order #W4817420 is cancelled and $289.99 is being refunded to your PayPal "
          "account (usually 3-5 business days).")
    return e.legit("none",
                   "one re-read at the user's request and one after the cancel (new state), then "
                   "the task is complete")


@case
def read_spin_ok_reread_after_write() -> dict[str, Any]:
    e = Ep("corpus-read-spin-ok-reread-after-write", "read_spin",
           "checkout in prod only has 2 of 3 replicas ready. Get it back to 3 healthy replicas.",
           "other", domain="devops")
    dep = "kubectl get deployment checkout -n prod"
    e.call("run_shell", {"command": dep},
           "NAME       READY   UP-TO-DATE   AVAILABLE   AGE\ncheckout   2/3     3            2"
           "           41d\n")
    e.call("run_shell", {"command": "kubectl get pods -n prod -l app=checkout -o wide"},
           "NAME                        READY   STATUS    RESTARTS   AGE   NODE\n"
           "checkout-6c9f8d7b5-4kx2p    1/1     Running   0          2d    ip-10-4-12-31\n"
           "checkout-6c9f8d7b5-9vbnr    1/1     Running   0          2d    ip-10-4-14-77\n"
           "checkout-6c9f8d7b5-tq8zd    0/1     Evicted   0          3h    ip-10-4-13-05\n")
    e.say("One pod was evicted from ip-10-4-13-05 (node pressure). Deleting it so the "
          "ReplicaSet schedules a fresh one.")
    e.call("run_shell", {"command": "kubectl delete pod checkout-6c9f8d7b5-tq8zd -n prod"},
           'pod "checkout-6c9f8d7b5-tq8zd" deleted\n')
    e.call("run_shell", {"command": dep},
           "NAME       READY   UP-TO-DATE   AVAILABLE   AGE\ncheckout   2/3     3            2"
           "           41d\n", dt=6.0)
    e.call("run_shell", {"command": "kubectl get pods -n prod -l app=checkout -o wide"},
           "NAME                        READY   STATUS              RESTARTS   AGE   NODE\n"
           "checkout-6c9f8d7b5-4kx2p    1/1     Running             0          2d    ip-10-4-12-31\n"
           "checkout-6c9f8d7b5-9vbnr    1/1     Running             0          2d    ip-10-4-14-77\n"
           "checkout-6c9f8d7b5-m2hxw    0/1     ContainerCreating   0          9s    ip-10-4-15-22\n")
    e.say("A new pod is starting on ip-10-4-15-22. Checking the deployment again in a bit.")
    e.call("run_shell", {"command": dep},
           "NAME       READY   UP-TO-DATE   AVAILABLE   AGE\ncheckout   3/3     3            3"
           "           41d\n", dt=35.0)
    e.say("checkout is back to 3/3 ready. The evicted pod was on ip-10-4-13-05, which reported "
          "memory pressure; worth checking that node's workloads.")
    return e.legit("none",
                   "the deployment is re-read after the delete while a new pod starts; the "
                   "outputs change and the task completes")


@case
def read_spin_ok_user_reread() -> dict[str, Any]:
    e = Ep("corpus-read-spin-ok-user-reread", "read_spin",
           "Hi, my user id is sofia_rossi_6650. What's my membership level and how many free "
           "checked bags do I get on reservation 4WQ150?", "lookup", domain="airline")
    user = {"user_id": "sofia_rossi_6650", "name": {"first_name": "Sofia", "last_name": "Rossi"},
            "membership": "gold", "reservations": ["4WQ150", "H8Q05L", "VAAOXJ"],
            "payment_methods": {"gift_card_5179311": {"amount": 120},
                                "credit_card_1720440": {"brand": "visa", "last_four": "3309"}}}
    e.call("get_user_details", {"user_id": "sofia_rossi_6650"}, user, kind="read")
    e.call("get_reservation_details", {"reservation_id": "4WQ150"},
           {"reservation_id": "4WQ150", "user_id": "sofia_rossi_6650", "origin": "MIA",
            "destination": "LAX", "cabin": "economy", "flight_type": "one_way",
            "passengers": [{"first_name": "Sofia", "last_name": "Rossi"},
                           {"first_name": "Luca", "last_name": "Rossi"}],
            "total_baggages": 2, "nonfree_baggages": 0}, kind="read")
    e.say("You're a Gold member. On 4WQ150 (economy, 2 passengers) Gold members get 3 free "
          "checked bags per passenger; you currently have 2 bags on the booking.")
    e.user("Great. Can I add 2 more bags for Luca, and pay with my gift card if there's a fee?")
    e.call("get_user_details", {"user_id": "sofia_rossi_6650"}, user, kind="read")
    e.call("update_reservation_baggages",
           {"reservation_id": "4WQ150", "total_baggages": 4, "nonfree_baggages": 0,
            "payment_id": "gift_card_5179311"},
           {"reservation_id": "4WQ150", "total_baggages": 4, "nonfree_baggages": 0,
            "payment_history": []}, kind="write")
    e.say("Done: 4WQ150 now has 4 checked bags, all within your free allowance, so nothing was "
          "charged to the gift card.")
    return e.legit("none",
                   "get_user_details is re-read once to check payment methods before a write; "
                   "two identical reads, then the task completes")


@case
def read_spin_ok_user_asks_recheck() -> dict[str, Any]:
    e = Ep("corpus-read-spin-ok-user-asks-recheck", "read_spin",
           "Can you check where ticket T-44719 is at? I replied to the engineer's question an "
           "hour ago.", "lookup", domain="support")
    ticket = {"id": "T-44719", "subject": "SAML login fails for new users",
              "status": "awaiting_customer", "assignee": "j.okafor",
              "last_public_comment": {"author": "j.okafor", "at": "2024-06-03T09:12:00Z",
                                      "body": "Can you send the IdP metadata XML?"}}
    e.call("get_ticket", {"ticket_id": "T-44719"}, ticket, kind="read")
    e.say("T-44719 is still 'awaiting customer'; the last comment is the engineer's 09:12 "
          "request for your IdP metadata XML. Your reply hasn't reached the ticket yet.")
    e.user("Weird, I replied by email. Can you check again? Sometimes it takes a few minutes.")
    e.call("get_ticket", {"ticket_id": "T-44719"}, ticket, kind="read", dt=70.0)
    e.say("Still no new comment on T-44719. Email replies normally appear within a minute.")
    e.user("Ok one last look, then I'll just paste it here.")
    e.call("get_ticket", {"ticket_id": "T-44719"}, ticket, kind="read", dt=55.0)
    e.say("Nothing new yet. Please paste the metadata here and I'll attach it to T-44719 for "
          "j.okafor.")
    e.user("<EntityDescriptor entityID=\"https://idp.acme-health.org\">...</EntityDescriptor>")
    e.call("add_comment", {"ticket_id": "T-44719", "public": True,
                           "body": "Customer-provided IdP metadata attached (entityID "
                                   "https://idp.acme-health.org)."},
           {"comment_id": "c_8812045", "ticket_status": "open"}, kind="write")
    e.say("Attached: the metadata is on T-44719 and the ticket is back to 'open' for the "
          "engineer.")
    return e.legit("none",
                   "each re-read of the ticket follows a new user request; the agent then "
                   "attaches the data and finishes")


@case
def read_spin_ok_balance_transfer() -> dict[str, Any]:
    e = Ep("corpus-read-spin-ok-balance-transfer", "read_spin",
           "Move $2,500 from my savings to checking, and tell me both balances afterwards.",
           "transaction", domain="finance")
    e.call("getAccounts", {"customerId": "CUS-301884"},
           {"accounts": [{"accountId": "ACC-301884-SAV", "type": "savings"},
                         {"accountId": "ACC-301884-CHK", "type": "checking"}]})
    e.call("getAccountBalance", {"accountId": "ACC-301884-SAV"},
           {"accountId": "ACC-301884-SAV", "available": 18240.55, "currency": "USD"})
    e.call("createTransfer", {"from": "ACC-301884-SAV", "to": "ACC-301884-CHK",
                              "amount": 2500.00, "currency": "USD"},
           {"transferId": "TRF-9W3K7Q", "status": "completed"})
    e.call("getAccountBalance", {"accountId": "ACC-301884-SAV"},
           {"accountId": "ACC-301884-SAV", "available": 15740.55, "currency": "USD"})
    e.call("getAccountBalance", {"accountId": "ACC-301884-CHK"},
           {"accountId": "ACC-301884-CHK", "available": 3911.20, "currency": "USD"})
    e.say("Transfer TRF-9W3K7Q is complete. Savings: $15,740.55. Checking: $3,911.20.")
    return e.legit("none",
                   "the savings balance is read again after the transfer and has changed; new "
                   "information, task done")


@case
def read_spin_ok_config_twice() -> dict[str, Any]:
    e = Ep("corpus-read-spin-ok-config-twice", "read_spin",
           "Bump the gunicorn worker count in deploy/gunicorn.conf.py from 4 to 8.",
           "coding", domain="coding")
    conf = ("bind = \"0.0.0.0:8000\"\nworkers = 4\nthreads = 2\ntimeout = 60\n"
            "accesslog = \"-\"\n")
    e.call("read_file", {"path": "deploy/gunicorn.conf.py"}, conf, kind="read")
    e.call("run_shell", {"command": "git log -1 --format=%h%x20%s -- deploy/gunicorn.conf.py"},
           "a41c9e2 Lower timeout to 60s\n")
    e.say("Re-reading the file to copy the exact line before editing.")
    e.call("read_file", {"path": "deploy/gunicorn.conf.py"}, conf, kind="read")
    e.call("str_replace_editor", {"command": "str_replace", "path": "deploy/gunicorn.conf.py",
                                  "old_str": "workers = 4", "new_str": "workers = 8"},
           "The file deploy/gunicorn.conf.py has been edited.", kind="write")
    e.say("Done: deploy/gunicorn.conf.py now sets workers = 8 (threads stay at 2).")
    return e.legit("none", "the config is read twice before a single edit; then the task is done")


# ---- end of cases ----


def check(episodes: list[dict[str, Any]]) -> None:
    """The invariants every episode must hold; raises AssertionError naming the episode."""
    seen: set[str] = set()
    for ep in episodes:
        eid, label, steps = ep["episode_id"], ep["label"], ep["steps"]
        assert eid not in seen, f"duplicate id {eid}"
        seen.add(eid)
        assert steps[0]["type"] == "message" and steps[0]["role"] == "user", eid
        assert steps[0]["content"] == ep["task"], eid
        times = [s["t"] for s in steps]
        assert all(a < b for a, b in itertools.pairwise(times)), f"{eid}: t order"
        ids = [s["tool_call_id"] for s in steps if s["type"] == "tool"]
        assert len(ids) == len(set(ids)), f"{eid}: tool_call_id reused"
        first = label["first_loop_step"]
        if label["loop"]:
            assert isinstance(first, int) and 0 < first < len(steps), eid
            at = steps[first]
            assert at["type"] == "tool" or at["role"] == "assistant", eid
            after = [s for s in steps[first + 1:]
                     if s["type"] == "tool" or s["role"] == "assistant"]
            assert len(after) >= 2, f"{eid}: the loop must persist after first_loop_step"
            assert ep["outcome"] in ("failure", "unknown"), eid
        else:
            assert first is None, eid
            assert steps[-1]["type"] == "message" and steps[-1]["role"] == "assistant", eid


def build() -> list[dict[str, Any]]:
    episodes = [fn() for fn in CASES]
    check(episodes)
    return episodes


def render() -> str:
    """The corpus as JSONL text, exactly as written to corpus.jsonl."""
    lines = [json.dumps(ep, sort_keys=True, ensure_ascii=False) for ep in build()]
    return "\n".join(lines) + "\n"


def main() -> int:
    text = render()
    OUT.write_text(text, encoding="utf-8")
    n = text.count("\n")
    print(f"wrote {n} episodes to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
