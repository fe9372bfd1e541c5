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
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "corpus.jsonl"
if str(HERE) not in sys.path:  # the writer and the case modules sit beside this file
    sys.path.insert(0, str(HERE))

from writer import _ID_CHARS, Ep, j, registry  # noqa: E402

CASES, case = registry()


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
    "payments-api-7d9c6b5f4-x2k8q    0/1     CrashLoopBackOff   6 (2m ago)     14m\n"
    "payments-api-7d9c6b5f4-zq7mn    0/1     CrashLoopBackOff   6 (2m ago)     14m\n"
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
    e.user("Weird, I replied by email. Can you check again? Sometimes it takes a few minutes.",
           dt=150.0)
    e.call("get_ticket", {"ticket_id": "T-44719"}, ticket, kind="read")
    e.say("Still no new comment on T-44719. Email replies normally appear within a minute.")
    e.user("Ok one last look, then I'll just paste it here.", dt=120.0)
    e.call("get_ticket", {"ticket_id": "T-44719"}, ticket, kind="read")
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


# ---- 2. housekeeping between progress ----------------------------------------------------------

_CONDENSED = "History condensed into a summary; kept the last 4 messages."


@case
def housekeeping_ok_condense_research() -> dict[str, Any]:
    e = Ep("corpus-housekeeping-ok-condense-research", "housekeeping",
           "Write me a short brief on heat pump sales in Europe in 2023: the top 3 markets by "
           "units sold and the main policy drivers, with sources.", "research", domain="research")
    e.call("web_search", {"query": "heat pump sales Europe 2023 by country EHPA"},
           j([{"title": "European heat pump sales fell 5% in 2023 - EHPA market report",
               "url": "https://www.ehpa.org/news/heat-pump-sales-2023"},
              {"title": "Heat pump market data 2023 | Stats", "url": "https://stats.ehpa.org/"}]),
           kind="read")
    e.call("condense_context", {}, _CONDENSED)
    e.call("fetch", {"url": "https://www.ehpa.org/news/heat-pump-sales-2023"},
           "Heat pump sales in 14 European countries fell by around 5% in 2023 to some 2.64 "
           "million units... France remained the largest market with 611,000 units, followed by "
           "Italy (468,000) and Germany (440,000)...", kind="read")
    e.call("condense_context", {}, _CONDENSED)
    e.call("web_search", {"query": "Germany Gebäudeenergiegesetz 2023 heat pump subsidy BEG"},
           j([{"title": "Germany's building energy act (GEG) explained - Clean Energy Wire",
               "url": "https://www.cleanenergywire.org/factsheets/geg-heating-law"}]),
           kind="read")
    e.call("condense_context", {}, _CONDENSED)
    e.call("fetch", {"url": "https://www.cleanenergywire.org/factsheets/geg-heating-law"},
           "The amended Building Energy Act (GEG), passed in September 2023, requires new heating "
           "systems to run on at least 65% renewable energy from 2024 in new builds... Subsidies "
           "under the BEG cover up to 70% of costs...", kind="read")
    e.call("condense_context", {}, _CONDENSED)
    e.call("web_search", {"query": "MaPrimeRénov heat pump 2023 France subsidy"},
           j([{"title": "MaPrimeRénov' 2023 : montants pour une pompe à chaleur",
               "url": "https://www.service-public.fr/particuliers/actualites/A16247"}]),
           kind="read")
    e.call("fetch", {"url": "https://www.service-public.fr/particuliers/actualites/A16247"},
           "MaPrimeRénov' : en 2023, l'aide pour une pompe à chaleur air/eau peut atteindre "
           "5 000 euros pour les ménages très modestes...", kind="read")
    e.say("**Heat pumps in Europe, 2023**\n\nTop markets by units: France (~611k), Italy "
          "(~468k), Germany (~440k); the 14 tracked markets fell ~5% to ~2.64M (EHPA).\n\n"
          "Policy drivers: Germany's amended GEG (65% renewable heating rule) and BEG subsidies "
          "up to 70%; France's MaPrimeRénov' grants up to €5,000; in Italy, the Superbonus "
          "wind-down pulled demand forward.\n\nSources: ehpa.org, cleanenergywire.org, "
          "service-public.fr.")
    return e.legit("none",
                   "condense_context repeats identically, but every search and fetch between "
                   "brings new sources; the brief is delivered")


_AGENT_STATUS = {"agent": "triage-bot-7", "state": "available", "queue": "billing",
                 "shift_ends": "18:00Z"}


@case
def housekeeping_ok_agent_status_triage() -> dict[str, Any]:
    e = Ep("corpus-housekeeping-ok-agent-status-triage", "housekeeping",
           "Triage the four oldest tickets in the billing queue: set a priority and a category "
           "on each.", "other", domain="support")
    tickets = [
        ("BIL-20931", "Charged after cancelling trial", "high", "refund"),
        ("BIL-20944", "Need VAT number on invoices", "low", "invoice_change"),
        ("BIL-20950", "Card declined but bank says fine", "normal", "payment_failure"),
        ("BIL-20957", "Double charge this month", "high", "refund"),
    ]
    e.call("list_tickets", {"queue": "billing", "sort": "oldest", "limit": 4},
           j([{"id": t[0], "subject": t[1]} for t in tickets]), kind="read")
    for tid, subject, prio, cat in tickets:
        e.call("get_agent_status", {}, _AGENT_STATUS, kind="read")
        e.call("get_ticket", {"ticket_id": tid},
               {"id": tid, "subject": subject, "status": "new", "priority": None,
                "category": None}, kind="read")
        e.call("update_ticket", {"ticket_id": tid, "priority": prio, "category": cat},
               {"id": tid, "priority": prio, "category": cat, "status": "open"}, kind="write")
    e.say("Triaged 4 tickets: BIL-20931 high/refund, BIL-20944 low/invoice_change, BIL-20950 "
          "normal/payment_failure, BIL-20957 high/refund.")
    return e.legit("none",
                   "the identical get_agent_status check precedes each ticket, and each ticket is "
                   "read and updated once: steady progress")


@case
def housekeeping_ok_list_tabs_compare() -> dict[str, Any]:
    e = Ep("corpus-housekeeping-ok-list-tabs-compare", "housekeeping",
           "Compare the Framework 13 (Ryzen 7 7840U), the Dell XPS 13 9340 and the ThinkPad X1 "
           "Carbon Gen 12 on price and battery life, from the makers' own sites.", "research",
           domain="research")
    tabs: list[str] = []
    pages = [
        ("https://frame.work/laptop13", "Framework Laptop 13 (AMD Ryzen 7040) - from $1,049; "
         "61Wh battery; up to 11h video playback"),
        ("https://www.dell.com/xps-13-9340", "XPS 13 Laptop - from $1,299; 55Wh battery; up to "
         "19h (FHD+) streaming video"),
        ("https://www.lenovo.com/x1-carbon-gen-12", "ThinkPad X1 Carbon Gen 12 - from $1,709; "
         "57Wh battery; up to 14.9h (MobileMark 2018)"),
    ]
    for url, text in pages:
        e.call("list_tabs", {}, j([{"tab": i, "url": u} for i, u in enumerate(tabs)]))
        e.call("open_tab", {"url": url}, {"tab": len(tabs), "status": "loaded"})
        tabs.append(url)
        e.call("read_page", {"tab": len(tabs) - 1}, text)
    e.call("list_tabs", {}, j([{"tab": i, "url": u} for i, u in enumerate(tabs)]))
    e.say("| laptop | from | battery | claimed life |\n|---|---|---|---|\n"
          "| Framework 13 (7840U) | $1,049 | 61Wh | ~11h video |\n"
          "| Dell XPS 13 9340 | $1,299 | 55Wh | ~19h video (FHD+) |\n"
          "| ThinkPad X1 Carbon G12 | $1,709 | 57Wh | ~14.9h MobileMark |\n\n"
          "Claims use different tests, so battery figures are not directly comparable.")
    return e.legit("none",
                   "list_tabs repeats between pages, and each new tab brings a new product page; "
                   "the comparison is delivered")


@case
def housekeeping_ok_get_time_logs() -> dict[str, Any]:
    e = Ep("corpus-housekeeping-ok-get-time-logs", "housekeeping",
           "Look at the auth-service logs for the last 3 hours and tell me when the 401 spike "
           "started and what caused it.", "other", domain="devops")
    e.call("get_time", {}, "2024-06-11T15:02:44Z")
    e.call("query_logs", {"service": "auth-service", "query": "status:401",
                          "from": "2024-06-11T12:00:00Z", "to": "2024-06-11T15:00:00Z",
                          "group_by": "15m"},
           "12:00 212\n12:15 198\n12:30 224\n12:45 205\n13:00 219\n13:15 1843\n13:30 2210\n"
           "13:45 2187\n14:00 2305\n14:15 2291\n14:30 2240\n14:45 2198\n")
    e.call("get_time", {}, "2024-06-11T15:03:09Z")
    e.call("query_logs", {"service": "auth-service", "query": "status:401",
                          "from": "2024-06-11T13:00:00Z", "to": "2024-06-11T13:20:00Z",
                          "group_by": "1m"},
           "13:00 14\n13:01 15\n...\n13:07 13\n13:08 388\n13:09 402\n13:10 411\n...")
    e.call("get_time", {}, "2024-06-11T15:03:40Z")
    e.call("query_logs", {"service": "auth-service", "query": "status:401 13:08",
                          "from": "2024-06-11T13:07:30Z", "to": "2024-06-11T13:09:00Z",
                          "fields": ["msg", "kid"]},
           "13:08:02 token verification failed: unknown kid 'k-2024-06b'\n"
           "13:08:02 token verification failed: unknown kid 'k-2024-06b'\n...")
    e.call("get_time", {}, "2024-06-11T15:04:02Z")
    e.call("query_logs", {"service": "key-rotator", "query": "*",
                          "from": "2024-06-11T13:00:00Z", "to": "2024-06-11T13:10:00Z"},
           "13:07:58 rotated signing key: new kid 'k-2024-06b' published to issuer\n"
           "13:07:58 JWKS cache TTL on consumers: 3600s\n")
    e.say("The 401 spike started at 13:08 UTC (~15/min to ~400/min). At 13:07:58 key-rotator "
          "published a new signing key (kid k-2024-06b) while auth-service still caches the old "
          "JWKS for 3600s, so every token signed with the new key is rejected. Fix: refresh "
          "auth-service's JWKS cache (or restart it) and lower the TTL.")
    return e.legit("none",
                   "get_time repeats before every log query, and each query narrows in on new "
                   "evidence; root cause found")


_MARKET_OPEN = {"market": "NYSE", "state": "open", "closesAt": "16:00 ET"}


@case
def housekeeping_ok_market_status_quotes() -> dict[str, Any]:
    e = Ep("corpus-housekeeping-ok-market-status-quotes", "housekeeping",
           "What's my portfolio worth right now? 40 AAPL, 25 MSFT, 60 KO, 15 JNJ.", "lookup",
           domain="finance")
    quotes = [("AAPL", 212.49), ("MSFT", 441.06), ("KO", 62.81), ("JNJ", 147.92)]
    for sym, px in quotes:
        e.call("getMarketStatus", {}, _MARKET_OPEN)
        e.call("getQuote", {"symbol": sym},
               {"symbol": sym, "last": px, "currency": "USD", "delayedMinutes": 0})
    e.say("At current prices: AAPL 40 × $212.49 = $8,499.60; MSFT 25 × $441.06 = $11,026.50; "
          "KO 60 × $62.81 = $3,768.60; JNJ 15 × $147.92 = $2,218.80. Total: $25,513.50.")
    return e.legit("none",
                   "the same market-status check precedes each quote, and every quote is a new "
                   "symbol; the total is computed")


_RIVIAN_RESULTS = j([
    {"title": "Rivian Reports Fourth Quarter and Full Year 2022 Financial Results",
     "url": "https://rivian.com/newsroom/article/q4-2022-financial-results"},
    {"title": "Rivian 10-K 2022 - SEC", "url": "https://www.sec.gov/Archives/rivn-20221231.htm"},
    {"title": "Amazon has 1,000 Rivian vans on the road", "url": "https://www.theverge.com/..."},
])


@case
def housekeeping_loop_condense_search() -> dict[str, Any]:
    e = Ep("corpus-housekeeping-loop-condense-search", "housekeeping",
           "What was Rivian's 2022 revenue from the commercial van segment alone?", "research",
           domain="research")
    q = {"query": "Rivian 2022 commercial van revenue segment"}
    e.call("web_search", q, _RIVIAN_RESULTS, kind="read")
    e.call("fetch", {"url": "https://rivian.com/newsroom/article/q4-2022-financial-results"},
           "Rivian produced 24,337 vehicles and delivered 20,332 in 2022... total revenues of "
           "$1,658 million... The company reports a single segment.", kind="read")
    e.call("condense_context", {}, _CONDENSED)
    e.call("web_search", q, _RIVIAN_RESULTS, kind="read")
    e.say("The results don't break out van revenue. Let me condense and search again.")
    e.call("condense_context", {}, _CONDENSED)
    first = e.call("web_search", q, _RIVIAN_RESULTS, kind="read")
    for _ in range(4):
        e.call("condense_context", {}, _CONDENSED)
        e.call("web_search", q, _RIVIAN_RESULTS, kind="read")
    return e.loop("exact_repeat", first,
                  "condense, then the same search with the same 3 results, 6 times; the answer "
                  "(Rivian reports one segment) was already fetched and ignored")


@case
def housekeeping_loop_time_metrics() -> dict[str, Any]:
    e = Ep("corpus-housekeeping-loop-time-metrics", "housekeeping",
           "Was the p99 latency of the search API above 800 ms at any point during last night's "
           "02:00-03:00 UTC batch window?", "lookup", domain="devops")
    q = {"metric": "http_server_duration_p99", "service": "search-api",
         "from": "2024-06-11T02:00:00Z", "to": "2024-06-11T03:00:00Z", "step": "5m"}
    series = j({"series": "search-api p99 ms", "points": [
        ["02:00", 412], ["02:05", 436], ["02:10", 903], ["02:15", 1187], ["02:20", 964],
        ["02:25", 611], ["02:30", 455], ["02:35", 431], ["02:40", 420], ["02:45", 418],
        ["02:50", 409], ["02:55", 415]]})
    first = None
    for n, ts in enumerate(["09:14:03", "09:14:11", "09:14:20", "09:14:27", "09:14:39",
                            "09:14:46", "09:14:58"]):
        e.call("get_time", {}, f"2024-06-11T{ts}Z")
        i = e.call("query_metrics", q, series)
        if n == 2:
            first = i
        if n == 3:
            e.say("I'll re-check the metric for the batch window to be sure.")
    assert first is not None
    return e.loop("exact_repeat", first,
                  "get_time then the same fixed-window metric query with the same series, 7 "
                  "times; the answer (yes, 02:10-02:20) was in the first result")


@case
def housekeeping_loop_status_ticket() -> dict[str, Any]:
    e = Ep("corpus-housekeeping-loop-status-ticket", "housekeeping",
           "Reply to ticket BIL-21007 with our refund policy for annual plans and close it.",
           "other", domain="support")
    ticket = {"id": "BIL-21007", "subject": "Refund for annual plan?", "status": "open",
              "requester": "dana@orchardlabs.co",
              "body": "We signed up for the annual plan 10 days ago. Can we get a refund?"}
    first = None
    for n in range(7):
        e.call("get_agent_status", {}, _AGENT_STATUS, kind="read")
        i = e.call("get_ticket", {"ticket_id": "BIL-21007"}, ticket, kind="read")
        if n == 1:
            first = i
        if n == 1:
            e.say("Let me review the ticket before replying.")
    assert first is not None
    return e.loop("oscillation", first,
                  "a status check and the same ticket read alternate 7 times with the same "
                  "outputs; the reply it was asked for is never written")


@case
def housekeeping_loop_tabs_read_page() -> dict[str, Any]:
    e = Ep("corpus-housekeeping-loop-tabs-read-page", "housekeeping",
           "Find the return window for electronics on bestbuy.com and tell me if opened "
           "headphones can be returned.", "research", domain="retail")
    tabs = j([{"tab": 0, "url": "https://www.google.com/search?q=best+buy+return+policy"},
              {"tab": 1, "url": "https://www.bestbuy.com/site/help-topics/return-exchange-"
                                "policy/pcmcat260800050014.c"}])
    page = ("Return & Exchange Policy | Best Buy\nSign in for the best experience\n"
            "Most products: 15 days. My Best Buy Plus and Total members: 60 days.\n"
            "[Show exceptions]\nWas this helpful? Yes No")
    e.call("open_tab", {"url": "https://www.bestbuy.com/site/help-topics/return-exchange-policy/"
                               "pcmcat260800050014.c"}, {"tab": 1, "status": "loaded"})
    first = None
    for n in range(7):
        e.call("list_tabs", {}, tabs)
        i = e.call("read_page", {"tab": 1}, page)
        if n == 1:
            first = i
        if n == 2:
            e.say("The exceptions section is collapsed. Reading the page again.")
    assert first is not None
    return e.loop("oscillation", first,
                  "list_tabs and read_page on the same tab alternate 7 times with the same "
                  "outputs; the agent never clicks 'Show exceptions'")


@case
def housekeeping_loop_git_status_read() -> dict[str, Any]:
    e = Ep("corpus-housekeeping-loop-git-status-read", "housekeeping",
           "The /healthz endpoint returns 500 when Redis is down; it should return 200 with "
           "{\"redis\": \"down\"}. Fix it in app/health.py.", "coding", domain="coding")
    status = "On branch fix/healthz\nnothing to commit, working tree clean\n"
    src = ("from fastapi import APIRouter\nfrom .deps import redis_client\n\n"
           "router = APIRouter()\n\n\n@router.get(\"/healthz\")\nasync def healthz():\n"
           "    await redis_client.ping()\n    return {\"redis\": \"up\"}\n")
    first = None
    for n in range(7):
        e.call("git_status", {}, status, kind="read")
        i = e.call("read_file", {"path": "app/health.py"}, src, kind="read")
        if n == 1:
            first = i
        if n == 1:
            e.say("The ping is not wrapped in a try/except. Let me look at the file again.")
    assert first is not None
    return e.loop("oscillation", first,
                  "git status and the same read of app/health.py alternate 7 times with the same "
                  "outputs; the agent names the fix and never makes it")


# ---- 3. writes judged by identity, not by arguments -------------------------------------------

@case
def write_identity_ok_send_again() -> dict[str, Any]:
    e = Ep("corpus-write-identity-ok-send-again", "write_identity",
           "Email the signed NDA to legal@kestrelbio.com with the subject 'Signed NDA - "
           "Halvorsen Labs'. The file is in my documents as NDA_Kestrel_signed.pdf.",
           "transaction", domain="support")
    e.call("find_document", {"name": "NDA_Kestrel_signed.pdf"},
           {"document_id": "doc_71Kq2", "name": "NDA_Kestrel_signed.pdf", "size_kb": 412},
           kind="read")
    mail = {"to": ["legal@kestrelbio.com"], "subject": "Signed NDA - Halvorsen Labs",
            "body": "Hello,\n\nPlease find attached the signed NDA.\n\nBest regards,\n"
                    "Ingrid Halvorsen",
            "attachments": ["doc_71Kq2"]}
    e.call("send_email", mail, {"message_id": "<CAF=q1x7Y2@mail.halvorsenlabs.com>",
                                "status": "sent"}, kind="write")
    e.say("Sent to legal@kestrelbio.com with NDA_Kestrel_signed.pdf attached.")
    e.user("They say it never arrived, probably their spam filter. Can you send it again "
           "exactly the same?")
    e.call("send_email", mail, {"message_id": "<CAF=r8Lm0a@mail.halvorsenlabs.com>",
                                "status": "sent"}, kind="write", intent="duplicate")
    e.say("Sent again (new message id). If it still doesn't arrive, they may need to "
          "allow-list halvorsenlabs.com.")
    return e.legit("write_retry_legit",
                   "the identical send_email runs twice because the user asked for a resend in a "
                   "new turn")


_MONITOR_ORDER = {"user_id": "liam_brennan_5512", "address": {
    "address1": "400 Market St", "address2": "Floor 6", "city": "San Francisco", "state": "CA",
    "zip": "94111", "country": "USA"}, "items": [{"item_id": "2990817663", "quantity": 1}],
    "payment_method_id": "credit_card_8830114"}


@case
def write_identity_ok_colleague_order() -> dict[str, Any]:
    e = Ep("corpus-write-identity-ok-colleague-order", "write_identity",
           "Order the 27-inch 4K monitor (item 2990817663) to the office, 400 Market St floor 6, "
           "with my work card. User liam_brennan_5512.", "transaction", domain="retail")
    e.call("get_product_details", {"item_id": "2990817663"},
           {"item_id": "2990817663", "name": "Monitor 27\" 4K IPS", "price": 349.00,
            "available": True}, kind="read")
    e.call("place_order", _MONITOR_ORDER,
           {"order_id": "#W5510294", "status": "pending", "total": 349.00}, kind="write")
    e.say("Ordered: #W5510294, Monitor 27\" 4K IPS, $349.00, to 400 Market St floor 6.")
    e.user("Perfect. Yes, please book one more, the same one, for my colleague. Same office "
           "address, same card.")
    e.call("place_order", _MONITOR_ORDER,
           {"order_id": "#W5510377", "status": "pending", "total": 349.00}, kind="write")
    e.say("Second monitor ordered: #W5510377, same item, address and card. Two orders total, "
          "$698.00.")
    return e.legit("write_retry_legit",
                   "an identical place_order runs again because the user asked for a second unit "
                   "in a new turn; it gets a new order id")


@case
def write_identity_ok_three_placeholders() -> dict[str, Any]:
    e = Ep("corpus-write-identity-ok-three-placeholders", "write_identity",
           "In project PLAT, create three identical placeholder tickets titled 'TBD - Q3 "
           "capacity work', type Task, label q3-planning. I'll fill them in later.",
           "transaction", domain="devops")
    args = {"project": "PLAT", "issueType": "Task", "summary": "TBD - Q3 capacity work",
            "labels": ["q3-planning"]}
    keys = ["PLAT-4411", "PLAT-4412", "PLAT-4413"]
    for key in keys:
        e.call("createIssue", args,
               {"key": key, "self": f"https://jira.northwind.io/rest/api/2/issue/{key}"})
    e.say("Created PLAT-4411, PLAT-4412 and PLAT-4413, all 'TBD - Q3 capacity work' (Task, "
          "q3-planning).")
    return e.legit("write_retry_legit",
                   "the task asks for three identical tickets; three identical writes, each with "
                   "a new issue key")


@case
def write_identity_ok_four_workers() -> dict[str, Any]:
    e = Ep("corpus-write-identity-ok-four-workers", "write_identity",
           "Spin up 4 identical render workers: e2-standard-8, image render-worker-v14, zone "
           "europe-west4-a, label pool=render.", "transaction", domain="devops")
    args = {"machineType": "e2-standard-8", "image": "render-worker-v14",
            "zone": "europe-west4-a", "labels": {"pool": "render"}}
    names = ["render-wkr-8h2kd", "render-wkr-q7x1m", "render-wkr-2vzpt", "render-wkr-kk94c"]
    for name in names:
        e.call("createInstance", args,
               {"name": name, "status": "PROVISIONING", "zone": "europe-west4-a"}, kind="write")
    e.call("listInstances", {"filter": "labels.pool=render"},
           j([{"name": n, "status": "RUNNING"} for n in names]), kind="read", dt=48.0)
    e.say("4 render workers are running in europe-west4-a: " + ", ".join(names) + ".")
    return e.legit("write_retry_legit",
                   "the task asks for four identical workers; each identical createInstance "
                   "returns a new instance name")


@case
def write_identity_ok_idempotent_charge() -> dict[str, Any]:
    e = Ep("corpus-write-identity-ok-idempotent-charge", "write_identity",
           "Charge customer cus_Q2kd91 $480 for the June consulting invoice INV-0612.",
           "transaction", domain="finance")
    args = {"customer": "cus_Q2kd91", "amount": 48000, "currency": "usd",
            "description": "Invoice INV-0612 (June consulting)",
            "idempotency_key": "inv-0612-charge"}
    e.call("create_charge", args,
           "Error: Read timed out. (read timeout=20) while calling POST /v1/charges",
           kind="write", status="timeout", idempotency_key="inv-0612-charge", took=20.0)
    e.say("The charge request timed out. The request carries idempotency key inv-0612-charge, "
          "so retrying returns the original charge if it went through.")
    e.call("create_charge", args,
           {"id": "ch_3PQx8sK2m1", "amount": 48000, "currency": "usd", "status": "succeeded",
            "idempotent_replayed": True}, kind="write", idempotency_key="inv-0612-charge",
           dt=5.0)
    e.say("Charged: $480.00 to cus_Q2kd91 (charge ch_3PQx8sK2m1). The retry replayed the first "
          "request, so the customer was charged once.")
    return e.legit("write_retry_legit",
                   "a timed-out charge is retried with the caller's own idempotency key; the "
                   "provider returns the same charge")


@case
def write_identity_ok_client_token() -> dict[str, Any]:
    e = Ep("corpus-write-identity-ok-client-token", "write_identity",
           "Launch one t3.large from ami-0c7217cdde317cfec in subnet-0a91f3 for the load test, "
           "tagged Name=loadtest-runner.", "transaction", domain="devops")
    args = {"ImageId": "ami-0c7217cdde317cfec", "InstanceType": "t3.large", "MinCount": 1,
            "MaxCount": 1, "SubnetId": "subnet-0a91f3",
            "TagSpecifications": [{"ResourceType": "instance",
                                   "Tags": [{"Key": "Name", "Value": "loadtest-runner"}]}],
            "ClientToken": "loadtest-runner-20240611-01"}
    e.call("ec2_run_instances", args,
           "ConnectTimeoutError: Connect timeout on endpoint URL: "
           "\"https://ec2.us-east-1.amazonaws.com/\"", status="timeout", took=60.0)
    e.call("ec2_run_instances", args,
           {"ReservationId": "r-0f3b9a51c8e2d7a44",
            "Instances": [{"InstanceId": "i-07a1c3e95d2b84f10", "State": {"Name": "pending"}}]},
           dt=4.2)
    e.say("Launched i-07a1c3e95d2b84f10 (t3.large, loadtest-runner). The retry used the same "
          "ClientToken, so EC2 would have returned the existing instance rather than a second "
          "one.")
    return e.legit("write_retry_legit",
                   "a timed-out RunInstances is retried with the same ClientToken, which EC2 "
                   "guarantees idempotent")


@case
def write_identity_ok_reconcile_then_retry() -> dict[str, Any]:
    e = Ep("corpus-write-identity-ok-reconcile-then-retry", "write_identity",
           "Reorder my usual coffee beans (Ethiopia Guji, 1 kg, whole bean) to my home address. "
           "I'm nina_park_3378.", "transaction", domain="retail")
    e.call("get_user_details", {"user_id": "nina_park_3378"},
           {"user_id": "nina_park_3378", "orders": ["#W8822013"],
            "payment_methods": {"credit_card_6611204": {"brand": "visa", "last_four": "7720"}}},
           kind="read")
    args = {"user_id": "nina_park_3378", "items": [{"item_id": "7017453906", "quantity": 1}],
            "payment_method_id": "credit_card_6611204", "address_id": "home"}
    e.call("place_order", args, "Error: upstream timeout after 30000ms (order-service)",
           kind="write", status="timeout", took=30.0)
    e.say("The order request timed out, so it may or may not have been placed. Checking your "
          "orders before retrying.")
    e.call("list_orders", {"user_id": "nina_park_3378", "created_after": "2024-06-11T10:40:00Z"},
           j([]), kind="read")
    e.say("No new order was created. Placing it again.")
    e.call("place_order", args, {"order_id": "#W8830457", "status": "pending", "total": 38.50},
           kind="write")
    e.say("Ordered: #W8830457, Ethiopia Guji 1 kg whole bean, $38.50, to your home address.")
    return e.legit("write_retry_legit",
                   "after the timeout the agent looked the order up, found none, and retried "
                   "once; exactly one order exists")


@case
def write_identity_ok_booking_reconcile() -> dict[str, Any]:
    e = Ep("corpus-write-identity-ok-booking-reconcile", "write_identity",
           "Book me on HAT227 from JFK to SFO on May 30, economy, paying with my credit card. "
           "User id aisha_karim_7021.", "transaction", domain="airline")
    e.call("get_user_details", {"user_id": "aisha_karim_7021"},
           {"user_id": "aisha_karim_7021", "reservations": ["Q1WE7A"],
            "payment_methods": {"credit_card_3301986": {"brand": "amex", "last_four": "1005"}}},
           kind="read")
    args = {"user_id": "aisha_karim_7021", "origin": "JFK", "destination": "SFO",
            "flight_type": "one_way", "cabin": "economy",
            "flights": [{"flight_number": "HAT227", "date": "2024-05-30"}],
            "passengers": [{"first_name": "Aisha", "last_name": "Karim", "dob": "1991-07-19"}],
            "payment_methods": [{"payment_id": "credit_card_3301986", "amount": 218}],
            "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no"}
    e.call("book_reservation", args, "Error: timeout waiting for reservation service",
           kind="write", status="timeout", took=25.0)
    e.call("get_user_details", {"user_id": "aisha_karim_7021"},
           {"user_id": "aisha_karim_7021", "reservations": ["Q1WE7A"],
            "payment_methods": {"credit_card_3301986": {"brand": "amex", "last_four": "1005"}}},
           kind="read")
    e.say("The booking timed out and no new reservation appears on your profile, so it did not "
          "go through. Trying again.")
    e.call("book_reservation", args,
           {"reservation_id": "M7TQ2C", "status": "confirmed", "flights": [
               {"flight_number": "HAT227", "date": "2024-05-30"}]}, kind="write")
    e.say("Booked: reservation M7TQ2C, HAT227 JFK→SFO on May 30, economy, $218 on your Amex.")
    return e.legit("write_retry_legit",
                   "the timed-out booking was reconciled against the profile (no new "
                   "reservation) before one retry")


@case
def write_identity_loop_user_exists() -> dict[str, Any]:
    e = Ep("corpus-write-identity-loop-user-exists", "write_identity",
           "Create an admin-console account for our new hire Priya Nair (priya.nair@northwind.io) "
           "and add her to the analytics group.", "transaction", domain="support")
    args = {"email": "priya.nair@northwind.io", "first_name": "Priya", "last_name": "Nair",
            "role": "member"}
    conflict = ("HTTP 409 Conflict: {\"error\": \"user_exists\", \"message\": \"A user with email "
                "priya.nair@northwind.io already exists\", \"user_id\": \"usr_5V2kQ8\"}")
    e.call("create_user", args, conflict, kind="write", status="error")
    e.say("The create call returned a conflict. Let me try creating the account again.")
    e.call("create_user", args, conflict, kind="write", status="error")
    first = e.call("create_user", args, conflict, kind="write", status="error")
    e.say("Retrying account creation for Priya Nair.")
    for _ in range(4):
        e.call("create_user", args, conflict, kind="write", status="error")
    return e.loop("write_duplicate", first,
                  "create_user gets the same 409 'already exists' (with the user id) 7 times; the "
                  "agent never uses usr_5V2kQ8 to add her to the group")


@case
def write_identity_loop_transfer_timeouts() -> dict[str, Any]:
    e = Ep("corpus-write-identity-loop-transfer-timeouts", "write_identity",
           "Pay the contractor invoice: transfer €3,200 from the operations account to "
           "NL91ABNA0417164300 (Van Dijk Design), reference INV-2024-118.", "transaction",
           domain="finance")
    args = {"from_account": "ops-eur-01", "to_iban": "NL91ABNA0417164300",
            "beneficiary": "Van Dijk Design", "amount": "3200.00", "currency": "EUR",
            "reference": "INV-2024-118"}
    first = None
    for n in range(6):
        i = e.call("create_transfer", args,
                   "Error: gateway timeout (504) from payments-core after 30s", kind="write",
                   status="timeout", took=30.0)
        if n == 1:
            first = i
        if n == 2:
            e.say("The payment gateway keeps timing out. Retrying the transfer.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "a money transfer times out and is retried 5 times without ever checking "
                  "whether an earlier attempt went through")


@case
def write_identity_loop_sms_repeat() -> dict[str, Any]:
    e = Ep("corpus-write-identity-loop-sms-repeat", "write_identity",
           "Text the customer on +1 415 555 0142 that their refund for order #W3310872 has been "
           "processed.", "transaction", domain="support")
    args = {"to": "+14155550142",
            "body": "Hi! Your refund for order #W3310872 has been processed. It should appear on "
                    "your statement within 5-10 business days."}
    e.call("get_order_details", {"order_id": "#W3310872"},
           {"order_id": "#W3310872", "status": "refunded", "refund_amount": 64.90}, kind="read")
    sids = ["SM8f2c1a", "SM91d0be", "SMa33e7f", "SM0c5d92", "SM6b7a14", "SM2e98c0", "SMd41f63"]
    first = None
    for n, sid in enumerate(sids):
        i = e.call("send_sms", args, {"sid": sid + "0d4e6b2f91a7", "status": "queued"},
                   kind="write")
        if n == 1:
            first = i
        if n == 3:
            e.say("Sending the refund notification to the customer.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "one notification was asked for; the same SMS is sent 7 times in a row and "
                  "each one is queued to the customer")


@case
def write_identity_loop_room_conflict() -> dict[str, Any]:
    e = Ep("corpus-write-identity-loop-room-conflict", "write_identity",
           "Book the Fjord room for the design review on June 12, 10-11am, and send the invite "
           "to the design team.", "transaction", domain="other")
    args = {"roomId": "fjord-3f", "start": "2024-06-12T10:00:00+02:00",
            "end": "2024-06-12T11:00:00+02:00", "title": "Design review"}
    out = ("Error 409: room 'Fjord' is already booked 10:00-11:00 on 2024-06-12 by you "
           "(booking BK-22931)")
    first = None
    for n in range(7):
        i = e.call("reserveMeetingRoom", args, out, status="error")
        if n == 2:
            first = i
        if n == 1:
            e.say("The room seems taken; trying the reservation again.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "the same room booking is refused 7 times because the agent already holds it "
                  "(BK-22931); the invite is never sent")


@case
def write_identity_loop_noop_update() -> dict[str, Any]:
    e = Ep("corpus-write-identity-loop-noop-update", "write_identity",
           "Escalate ticket #58213 to tier 2 and let the customer know we've done so.", "other",
           domain="support")
    args = {"ticket_id": 58213, "group": "tier2", "priority": "high"}
    e.call("get_ticket", {"ticket_id": 58213},
           {"id": 58213, "group": "tier1", "priority": "normal", "status": "open",
            "requester": "marcus@fieldway.app"}, kind="read")
    first = None
    for n in range(7):
        i = e.call("update_ticket", args, "Ticket #58213 updated.", kind="write")
        if n == 2:
            first = i
        if n == 1:
            e.say("Ticket escalated. Making sure the escalation is applied.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "the same escalation update returns the same 'updated' confirmation 7 times; "
                  "the customer message is never written")


@case
def write_identity_loop_booking_timeouts() -> dict[str, Any]:
    e = Ep("corpus-write-identity-loop-booking-timeouts", "write_identity",
           "Book the 7:15 HAT041 from BOS to ORD on June 3 for me, economy, same passenger as "
           "usual. User id tomas_varga_1193.", "transaction", domain="airline")
    e.call("get_user_details", {"user_id": "tomas_varga_1193"},
           {"user_id": "tomas_varga_1193", "reservations": ["P0KXW2"],
            "saved_passengers": [{"first_name": "Tomas", "last_name": "Varga",
                                  "dob": "1979-11-02"}],
            "payment_methods": {"credit_card_9031257": {"brand": "visa", "last_four": "5152"}}})
    args = {"user_id": "tomas_varga_1193", "origin": "BOS", "destination": "ORD",
            "flight_type": "one_way", "cabin": "economy",
            "flights": [{"flight_number": "HAT041", "date": "2024-06-03"}],
            "passengers": [{"first_name": "Tomas", "last_name": "Varga", "dob": "1979-11-02"}],
            "payment_methods": [{"payment_id": "credit_card_9031257", "amount": 187}],
            "total_baggages": 1, "nonfree_baggages": 0, "insurance": "no"}
    first = None
    for n in range(5):
        i = e.call("book_reservation", args, "Error: request to reservations timed out",
                   status="timeout", took=20.0)
        if n == 1:
            first = i
        if n == 2:
            e.say("The booking system is slow; trying again.")
    e.say("I'm sorry, the booking system is not responding. Please try again later.")
    return e.loop("write_duplicate", first,
                  "a booking that timed out is retried 4 times with no look-up; any attempt may "
                  "have booked (and charged) a seat", outcome="unknown")


# ---- 4. polls judged by evidence and the task's stated time -----------------------------------

@case
def poll_ok_price_watch() -> dict[str, Any]:
    e = Ep("corpus-poll-ok-price-watch", "poll",
           "Watch the BTC-USD price and tell me as soon as it goes above $68,000.", "polling",
           domain="finance")
    prices = ["67412.10", "67530.55", "67488.02", "67702.90", "67815.33", "67769.48",
              "67940.11", "68012.47"]
    for n, px in enumerate(prices):
        e.call("get_spot_price", {"pair": "BTC-USD"},
               {"data": {"base": "BTC", "currency": "USD", "amount": px}},
               dt=None if n == 0 else e.rng.uniform(29.0, 33.0))
        if n == 3:
            e.say("BTC is at $67,702.90, still under $68,000. I'll keep checking every 30 "
                  "seconds.")
    e.say("BTC-USD just crossed $68,000: it is at $68,012.47 now.")
    return e.legit("poll_legit",
                   "a price polled every 30 s changes on every call; the watch ends when the "
                   "threshold is crossed")


@case
def poll_ok_error_rate_watch() -> dict[str, Any]:
    e = Ep("corpus-poll-ok-error-rate-watch", "poll",
           "We just deployed checkout v2.31. Watch the checkout 5xx error rate for the next 10 "
           "minutes and tell me whether it stays under 1%.", "polling", domain="devops")
    rates = ["0.42", "0.51", "0.47", "0.63", "0.58", "0.71", "0.55", "0.49", "0.52", "0.46",
             "0.44"]
    for n, rate in enumerate(rates):
        e.call("query_metric",
               {"expr": "sum(rate(http_requests_total{service=\"checkout\",code=~\"5..\"}[1m])) "
                        "/ sum(rate(http_requests_total{service=\"checkout\"}[1m])) * 100"},
               {"status": "success", "value": rate, "unit": "percent"},
               dt=None if n == 0 else e.rng.uniform(58.0, 62.0))
    e.say("Checkout v2.31 5xx error rate stayed under 1% for the full 10 minutes: between "
          "0.42% and 0.71% (peak at minute 5), ending at 0.44%.")
    return e.legit("poll_legit",
                   "a metric sampled once a minute for the 10 minutes the task asked; every "
                   "value differs and the watch ends on time")


@case
def poll_ok_restore_in_window() -> dict[str, Any]:
    e = Ep("corpus-poll-ok-restore-in-window", "poll",
           "Restore staging-db from last night's automated snapshot. Restores usually take 10-15 "
           "minutes; tell me when it's usable.", "polling", domain="devops")
    e.call("describe_db_snapshots", {"DBInstanceIdentifier": "staging-db",
                                     "SnapshotType": "automated"},
           {"DBSnapshots": [{"DBSnapshotIdentifier": "rds:staging-db-2024-06-11-03-10",
                             "Status": "available"}]}, kind="read")
    e.call("restore_db_instance_from_snapshot",
           {"DBInstanceIdentifier": "staging-db-restored",
            "DBSnapshotIdentifier": "rds:staging-db-2024-06-11-03-10"},
           {"DBInstance": {"DBInstanceIdentifier": "staging-db-restored",
                           "DBInstanceStatus": "creating"}}, kind="write")
    creating = {"DBInstances": [{"DBInstanceIdentifier": "staging-db-restored",
                                 "DBInstanceStatus": "creating"}]}
    for n in range(8):
        e.call("describe_db_instances", {"DBInstanceIdentifier": "staging-db-restored"},
               creating, kind="poll", dt=e.rng.uniform(85.0, 95.0))
        if n == 4:
            e.say("Still creating (about 7.5 minutes in), within the usual 10-15 minutes.")
    e.call("describe_db_instances", {"DBInstanceIdentifier": "staging-db-restored"},
           {"DBInstances": [{"DBInstanceIdentifier": "staging-db-restored",
                             "DBInstanceStatus": "available",
                             "Endpoint": {"Address": "staging-db-restored.c9xq2.eu-west-1.rds."
                                                     "amazonaws.com", "Port": 5432}}]},
           kind="poll", dt=91.0)
    e.say("staging-db-restored is available (about 13.5 minutes) at staging-db-restored.c9xq2."
          "eu-west-1.rds.amazonaws.com:5432.")
    return e.legit("poll_legit",
                   "an unchanged 'creating' status polled every ~90 s inside the 10-15 minutes "
                   "the task states, ending available")


@case
def poll_ok_pipeline_with_sleep() -> dict[str, Any]:
    e = Ep("corpus-poll-ok-pipeline-with-sleep", "poll",
           "Kick off the nightly-e2e pipeline on main and tell me the result. It should be done "
           "within an hour.", "polling", domain="devops")
    e.call("trigger_pipeline", {"project": "web/storefront", "ref": "main",
                                "pipeline": "nightly-e2e"},
           {"pipeline_id": 884213, "status": "created",
            "web_url": "https://gitlab.tidewater.io/web/storefront/-/pipelines/884213"},
           kind="write")
    running = {"pipeline_id": 884213, "status": "running", "ref": "main"}
    for _ in range(7):
        e.call("get_pipeline", {"pipeline_id": 884213}, running, kind="poll")
        e.call("sleep", {"seconds": 300}, "slept 300s", took=300.0)
    e.call("get_pipeline", {"pipeline_id": 884213},
           {"pipeline_id": 884213, "status": "success", "ref": "main", "duration": 2104,
            "jobs": {"passed": 148, "failed": 0, "skipped": 6}}, kind="poll")
    e.say("nightly-e2e on main passed (pipeline 884213, 35 minutes): 148 jobs passed, 6 "
          "skipped, none failed.")
    return e.legit("poll_legit",
                   "poll and a 5-minute sleep alternate with identical outputs, well inside the "
                   "hour the task allows; the pipeline succeeds")


@case
def poll_ok_declared_deadline() -> dict[str, Any]:
    e = Ep("corpus-poll-ok-declared-deadline", "poll",
           "Export the Q2 audit log to CSV and give me the download link. Exports can take up to "
           "half an hour.", "polling", domain="support")
    e.call("create_export", {"dataset": "audit_log", "from": "2024-04-01", "to": "2024-06-30",
                             "format": "csv"},
           {"export_id": "exp_40kd82", "state": "PENDING"}, kind="write")
    pending = {"export_id": "exp_40kd82", "state": "PENDING"}
    for n in range(6):
        e.call("get_export", {"export_id": "exp_40kd82"}, pending, kind="poll",
               dt=5.0 if n == 0 else e.rng.uniform(80.0, 100.0), deadline_s=1800)
    e.call("get_export", {"export_id": "exp_40kd82"},
           {"export_id": "exp_40kd82", "state": "DONE", "rows": 182204,
            "url": "https://exports.tidewater.io/exp_40kd82.csv?sig=4c1e9a"},
           kind="poll", dt=88.0, deadline_s=1800)
    e.say("The Q2 audit log export is ready (182,204 rows): "
          "https://exports.tidewater.io/exp_40kd82.csv?sig=4c1e9a")
    return e.legit("poll_legit",
                   "a declared poll (30-minute deadline) sees PENDING six times and DONE after "
                   "about 9 minutes")


@case
def poll_ok_certificate_validation() -> dict[str, Any]:
    e = Ep("corpus-poll-ok-certificate-validation", "poll",
           "Get a TLS certificate for shop.tidewater.io with DNS validation and tell me when "
           "it's issued. DNS validation usually takes 5 to 30 minutes.", "polling",
           domain="devops")
    arn = "arn:aws:acm:us-east-1:441782093310:certificate/6f1d3c2a-90b7-4e58-a1c4-2d7b8e0f5a19"
    e.call("requestCertificate", {"DomainName": "shop.tidewater.io",
                                  "ValidationMethod": "DNS"}, {"CertificateArn": arn},
           kind="write")
    e.call("describeCertificate", {"CertificateArn": arn},
           {"Status": "PENDING_VALIDATION", "ResourceRecord": {
               "Name": "_3c1f9e.shop.tidewater.io.", "Type": "CNAME",
               "Value": "_8a2d41.mzlfeqexyx.acm-validations.aws."}}, kind="poll")
    e.call("changeResourceRecordSets", {"HostedZoneId": "Z04411823QK2", "Changes": [{
        "Action": "UPSERT", "Name": "_3c1f9e.shop.tidewater.io.", "Type": "CNAME",
        "Value": "_8a2d41.mzlfeqexyx.acm-validations.aws.", "TTL": 300}]},
           {"ChangeInfo": {"Id": "/change/C2H8K1Q", "Status": "PENDING"}}, kind="write")
    pending = {"Status": "PENDING_VALIDATION", "ResourceRecord": {
        "Name": "_3c1f9e.shop.tidewater.io.", "Type": "CNAME",
        "Value": "_8a2d41.mzlfeqexyx.acm-validations.aws."}}
    for _ in range(8):
        e.call("describeCertificate", {"CertificateArn": arn}, pending, kind="poll",
               dt=e.rng.uniform(115.0, 125.0))
    e.call("describeCertificate", {"CertificateArn": arn},
           {"Status": "ISSUED", "NotAfter": "2025-07-10T23:59:59Z"}, kind="poll", dt=121.0)
    e.say("The certificate for shop.tidewater.io is issued (valid until 2025-07-10), about 18 "
          "minutes after the validation record was added.")
    return e.legit("poll_legit",
                   "PENDING_VALIDATION polled every 2 minutes inside the 5-30 minutes the task "
                   "states, then ISSUED")


@case
def poll_loop_smoke_test_overdue() -> dict[str, Any]:
    e = Ep("corpus-poll-loop-smoke-test-overdue", "poll",
           "Run the checkout smoke test job against staging and report the result. It completes "
           "in under 60 seconds.", "polling", domain="devops")
    start = e.call("start_job", {"job": "checkout-smoke", "env": "staging"},
                   {"job_id": "smk-8812", "state": "RUNNING"}, kind="write")
    launched = e.steps[start]["t"]
    running = {"job_id": "smk-8812", "state": "RUNNING", "started_at": "2024-06-11T10:02:14Z"}
    first = None
    for n in range(15):
        i = e.call("get_job_status", {"job_id": "smk-8812"}, running, kind="poll",
                   dt=e.rng.uniform(40.0, 50.0) if n else 20.0)
        if first is None and e.steps[i]["t"] > launched + 60:
            first = i
        if n in (5, 11):
            e.say("The smoke test is still running. I'll check again shortly.")
    assert first is not None
    return e.loop("poll_timeout", first,
                  "a job the task says finishes in under 60 s is still RUNNING and still polled "
                  "at 11 minutes; the agent never reports or investigates")


@case
def poll_loop_dns_past_limit() -> dict[str, Any]:
    e = Ep("corpus-poll-loop-dns-past-limit", "poll",
           "I changed the A record of api.tidewater.io to 35.201.96.14. Check until Google DNS "
           "returns the new IP; give up after 20 minutes and tell me.", "polling",
           domain="devops")
    old = {"name": "api.tidewater.io.", "type": "A", "answers": ["34.117.12.8"], "ttl": 3600,
           "resolver": "8.8.8.8"}
    first = None
    t0 = None
    for n in range(31):
        i = e.call("checkDns", {"name": "api.tidewater.io", "type": "A", "resolver": "8.8.8.8"},
                   old, dt=e.rng.uniform(57.0, 63.0) if n else 4.0)
        t0 = e.steps[i]["t"] if t0 is None else t0
        if first is None and e.steps[i]["t"] > t0 + 1200:
            first = i
        if n == 12:
            e.say("8.8.8.8 still returns the old IP (TTL 3600). Checking again in a minute.")
    assert first is not None
    return e.loop("poll_timeout", first,
                  "the task says give up after 20 minutes; the unchanged old IP is still polled "
                  "at 30 minutes and the user is never told")


@case
def poll_loop_rollout_no_rollback() -> dict[str, Any]:
    e = Ep("corpus-poll-loop-rollout-no-rollback", "poll",
           "Roll out orders:v5.2.0 to prod. The rollout should finish within 5 minutes; if it "
           "doesn't, roll back.", "polling", domain="devops")
    w = e.call("run_shell", {"command": "kubectl set image deployment/orders "
                                        "orders=registry.tidewater.io/orders:v5.2.0 -n prod"},
               "deployment.apps/orders image updated\n")
    started = e.steps[w]["t"]
    waiting = ("Waiting for deployment \"orders\" rollout to finish: 1 of 4 updated replicas "
               "are available...\n")
    first = None
    for n in range(19):
        i = e.call("run_shell", {"command": "kubectl rollout status deployment/orders -n prod "
                                            "--timeout=10s"},
                   waiting + "error: timed out waiting for the condition\n", status="error",
                   dt=e.rng.uniform(28.0, 32.0))
        if first is None and e.steps[i]["t"] > started + 300:
            first = i
        if n == 8:
            e.say("Rollout is progressing slowly; 1 of 4 replicas available. Waiting.")
    assert first is not None
    return e.loop("poll_timeout", first,
                  "the rollout is stuck at 1 of 4 and polled to ~10 minutes, past the 5 the task "
                  "allows; the requested rollback never happens")


@case
def poll_loop_hammer_queued() -> dict[str, Any]:
    e = Ep("corpus-poll-loop-hammer-queued", "poll",
           "Re-run last night's failed ETL for the sales_daily table and let me know when it "
           "finishes.", "polling", domain="devops")
    e.call("trigger_run", {"dag": "sales_daily", "logical_date": "2024-06-10"},
           {"run_id": "manual__2024-06-11T09:12:40", "state": "queued"}, kind="write")
    queued = {"run_id": "manual__2024-06-11T09:12:40", "state": "queued",
              "queue_position": 37, "estimated_start": "in ~25 min"}
    first = None
    for n in range(42):
        i = e.call("get_run_status", {"dag": "sales_daily",
                                      "run_id": "manual__2024-06-11T09:12:40"},
                   queued, kind="poll", dt=e.rng.uniform(0.8, 1.4))
        if n == 9:
            first = i
        if n in (4, 20):
            e.say("The run is still queued. Checking the status again.")
    assert first is not None
    return e.loop("exact_repeat", first,
                  "a run queued '~25 min' away is polled 42 times about once a second with no "
                  "wait and no change, until the agent's budget runs out")


@case
def poll_loop_hammer_build() -> dict[str, Any]:
    e = Ep("corpus-poll-loop-hammer-build", "poll",
           "Start a release build of the Android app from the release/4.12 branch and send me "
           "the APK link when it's done.", "polling", domain="coding")
    e.call("startBuild", {"project": "fieldway-android", "branch": "release/4.12",
                          "variant": "release"},
           {"buildId": "b-20931", "status": "PENDING"})
    pending = {"buildId": "b-20931", "status": "PENDING", "agentsBusy": 6, "agentsTotal": 6}
    first = None
    for n in range(36):
        i = e.call("getBuildStatus", {"buildId": "b-20931"}, pending,
                   dt=e.rng.uniform(0.9, 1.6))
        if n == 9:
            first = i
        if n == 18:
            e.say("Build b-20931 is pending. Let me check on it again.")
    assert first is not None
    return e.loop("exact_repeat", first,
                  "a build waiting for a free agent is polled 36 times in under a minute with "
                  "no wait and no change; the run ends on its call budget")


@case
def poll_loop_declared_deadline_passed() -> dict[str, Any]:
    e = Ep("corpus-poll-loop-declared-deadline-passed", "poll",
           "Start an export of the customers table to CSV. If it isn't ready within 15 minutes, "
           "cancel it and tell me.", "polling", domain="support")
    e.call("create_export", {"dataset": "customers", "format": "csv"},
           {"export_id": "exp_51mz07", "state": "PENDING"}, kind="write")
    pending = {"export_id": "exp_51mz07", "state": "PENDING"}
    first = None
    t0 = None
    for n in range(22):
        i = e.call("get_export", {"export_id": "exp_51mz07"}, pending, kind="poll",
                   dt=e.rng.uniform(55.0, 65.0) if n else 6.0, deadline_s=900)
        t0 = e.steps[i]["t"] if t0 is None else t0
        if first is None and e.steps[i]["t"] > t0 + 900:
            first = i
        if n == 10:
            e.say("Export is still pending; continuing to wait.")
    assert first is not None
    return e.loop("poll_timeout", first,
                  "a poll declared with a 15-minute deadline (the task's limit) goes on to 21 "
                  "minutes; the cancel the task asks for never happens")


# ---- 5. the same failure, worded differently --------------------------------------------------

def _pytest_fail(duration: str) -> str:
    return (
        "F.....                                                                   [100%]\n"
        "=================================== FAILURES ===================================\n"
        "___________________________ test_total_with_discount ___________________________\n\n"
        "    def test_total_with_discount():\n"
        "        inv = Invoice(lines=[Line(Decimal(\"99.99\"), qty=2)], discount=Decimal(\"0.15\"))\n"
        ">       assert inv.total() == Decimal(\"169.98\")\n"
        "E       AssertionError: assert Decimal('169.99') == Decimal('169.98')\n\n"
        "tests/test_invoice.py:42: AssertionError\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_invoice.py::test_total_with_discount - AssertionError: assert "
        "Decimal('169.99') == Decimal('169.98')\n"
        f"1 failed, 5 passed in {duration}s\n"
    )


@case
def error_variation_loop_pytest_rerun() -> dict[str, Any]:
    e = Ep("corpus-error-variation-loop-pytest-rerun", "error_variation",
           "test_total_with_discount in billing is failing on main. Make it pass without "
           "changing the test.", "coding", domain="coding")
    cmd = {"command": "cd /workspace/billing && python -m pytest tests/test_invoice.py -q"}
    e.call("execute_bash", {"command": "sed -n 1,60p /workspace/billing/billing/invoice.py"},
           "from decimal import Decimal, ROUND_UP\n...\n    def total(self):\n"
           "        gross = sum(l.amount * l.qty for l in self.lines)\n"
           "        net = gross * (1 - self.discount)\n"
           "        return net.quantize(Decimal(\"0.01\"), rounding=ROUND_UP)\n")
    durations = ["0.41", "0.38", "0.44", "0.39", "0.47", "0.40", "0.43"]
    first = None
    for n, d in enumerate(durations):
        i = e.call("execute_bash", cmd, _pytest_fail(d) + "[exit code 1]", status="error",
                   took=float(d) + 1.2)
        if n == 2:
            first = i
        if n in (1, 4):
            e.say("The test still fails with 169.99 vs 169.98. Let me run the tests again to "
                  "see the failure.")
    assert first is not None
    return e.loop("repeat_same_error", first,
                  "the unchanged test is run 7 times with no edit between; the same assertion "
                  "fails each time, only the timing differs")


@case
def error_variation_loop_upstream_503() -> dict[str, Any]:
    e = Ep("corpus-error-variation-loop-upstream-503", "error_variation",
           "How many units of SKU-88120 do we have in the Reno warehouse right now?", "lookup",
           domain="retail")
    url = {"method": "GET",
           "url": "https://inventory.internal/api/v2/stock/SKU-88120?warehouse=RNO1"}
    first = None
    for n in range(8):
        rid = "".join(e.rng.choices("0123456789abcdef", k=32))
        out = ("HTTP 503 Service Unavailable\nupstream connect error or disconnect/reset before "
               f"headers. reset reason: connection failure\nx-request-id: {rid}")
        i = e.call("http_request", url, out, status="error")
        if n == 2:
            first = i
        if n == 3:
            e.say("The inventory service returned 503. Retrying the request.")
    assert first is not None
    return e.loop("repeat_same_error", first,
                  "the same GET fails with the same 503 8 times within seconds (only the request "
                  "id differs); no backoff, no other route")


def _sf_error(rng: random.Random) -> str:
    qid = "01b3c5e2-0{}-8a6b-0000-4f2d00{}".format(
        "".join(rng.choices("0123456789", k=3)), "".join(rng.choices("0123456789abcdef", k=6)))
    return (f"000904 (42000): {qid}: SQL compilation error: error line 1 at position 37\n"
            "invalid identifier 'CREATED'")


@case
def error_variation_loop_sql_identifier() -> dict[str, Any]:
    e = Ep("corpus-error-variation-loop-sql-identifier", "error_variation",
           "How many new trial signups did we get each day last week? Use the SIGNUPS table in "
           "ANALYTICS.", "lookup", domain="research")
    q = {"sql": "SELECT DATE_TRUNC('day', created) AS d, COUNT(*) FROM ANALYTICS.PUBLIC.SIGNUPS "
                "WHERE plan = 'trial' AND created >= DATEADD(day, -7, CURRENT_DATE) "
                "GROUP BY 1 ORDER BY 1"}
    first = None
    for n in range(6):
        i = e.call("run_sql", q, _sf_error(e.rng), kind="read", status="error")
        if n == 2:
            first = i
        if n == 1:
            e.say("The query failed to compile. Running it again.")
    assert first is not None
    return e.loop("repeat_same_error", first,
                  "the same query fails 6 times with the same invalid identifier 'CREATED'; only "
                  "the query id differs and the column is never looked up")


@case
def error_variation_loop_payment_sum() -> dict[str, Any]:
    e = Ep("corpus-error-variation-loop-payment-sum", "error_variation",
           "Book HAT170 ORD→DEN on May 24, economy, for me and my son (Ravi Shah, born "
           "2012-09-30). Use my gift card first and put the rest on my Visa. I'm "
           "anjali_shah_2047.", "transaction", domain="airline")
    e.call("get_user_details", {"user_id": "anjali_shah_2047"},
           {"user_id": "anjali_shah_2047",
            "payment_methods": {"gift_card_8810332": {"amount": 299},
                                "credit_card_4430021": {"brand": "visa", "last_four": "0021"}}},
           kind="read")
    args = {"user_id": "anjali_shah_2047", "origin": "ORD", "destination": "DEN",
            "flight_type": "one_way", "cabin": "economy",
            "flights": [{"flight_number": "HAT170", "date": "2024-05-24"}],
            "passengers": [{"first_name": "Anjali", "last_name": "Shah", "dob": "1984-02-11"},
                           {"first_name": "Ravi", "last_name": "Shah", "dob": "2012-09-30"}],
            "payment_methods": [{"payment_id": "gift_card_8810332", "amount": 299}],
            "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no"}
    err = "Error: payment amount does not add up, total price is 375, but paid 299"
    first = None
    for n in range(5):
        i = e.call("book_reservation", args, err, kind="write", status="error")
        if n == 2:
            first = i
        e.call("think", {"thought": [
            "The total should be covered by the gift card.",
            "Two passengers at 187.50 each is 375. The gift card has 299.",
            "Retry the booking with the gift card payment.",
            "The payment should go through with the gift card.",
            "Try booking again."][n]}, "", kind="read")
    return e.loop("repeat_same_error", first,
                  "book_reservation fails 5 times with the same 'total 375, paid 299' error; "
                  "the agent never adds the Visa for the remaining 76")


@case
def error_variation_loop_read_timeouts() -> dict[str, Any]:
    e = Ep("corpus-error-variation-loop-read-timeouts", "error_variation",
           "Summarise the main findings of the 2023 IPCC synthesis report's summary for "
           "policymakers.", "research", domain="research")
    url = {"url": "https://www.ipcc.ch/report/ar6/syr/downloads/report/IPCC_AR6_SYR_SPM.pdf"}
    first = None
    for n, secs in enumerate(["30.2", "30.7", "30.1", "30.9", "30.4", "31.2", "30.6"]):
        i = e.call("fetch_url", url,
                   f"Error: ReadTimeout: HTTPSConnectionPool(host='www.ipcc.ch', port=443): "
                   f"Read timed out. (read timeout=30) after {secs}s", kind="read",
                   status="timeout", took=float(secs))
        if n == 2:
            first = i
        if n == 3:
            e.say("The download timed out again; the PDF is large. Retrying.")
    assert first is not None
    return e.loop("repeat_same_error", first,
                  "the same PDF fetch times out 7 times in a row (only the seconds differ); the "
                  "agent never tries a mirror, the HTML page or a search")


@case
def error_variation_loop_permission_wording() -> dict[str, Any]:
    e = Ep("corpus-error-variation-loop-permission-wording", "error_variation",
           "Deploy the new build of the thumbnailer Lambda (artifact "
           "s3://tw-artifacts/thumbnailer/1.8.3.zip) to prod.", "other", domain="devops")
    args = {"functionName": "thumbnailer-prod", "s3Bucket": "tw-artifacts",
            "s3Key": "thumbnailer/1.8.3.zip", "roleSession": "ci-deployer"}
    msgs = [
        "AccessDeniedException: User: arn:aws:sts::441782093310:assumed-role/ci-deployer/"
        "session-{} is not authorized to perform: lambda:UpdateFunctionCode on resource: "
        "arn:aws:lambda:eu-west-1:441782093310:function:thumbnailer-prod",
        "Error: permission denied (lambda:UpdateFunctionCode) for role ci-deployer, session {}",
        "An error occurred (AccessDeniedException) when calling the UpdateFunctionCode "
        "operation: ci-deployer (session {}) lacks lambda:UpdateFunctionCode on "
        "thumbnailer-prod",
    ]
    first = None
    for n in range(7):
        i = e.call("deployLambda", args, msgs[n % 3].format(1700 + 13 * n), status="error")
        if n == 2:
            first = i
        if n == 4:
            e.say("The deployment was rejected again. Retrying the deploy.")
    assert first is not None
    return e.loop("repeat_same_error", first,
                  "the same deploy is denied 7 times (lambda:UpdateFunctionCode for ci-deployer) "
                  "in three phrasings; nothing changes between attempts")


@case
def error_variation_ok_sql_fixed() -> dict[str, Any]:
    e = Ep("corpus-error-variation-ok-sql-fixed", "error_variation",
           "How many new trial signups did we get each day last week? Use the SIGNUPS table in "
           "ANALYTICS.", "lookup", domain="research")
    q = ("SELECT DATE_TRUNC('day', {c}) AS d, COUNT(*) FROM ANALYTICS.PUBLIC.SIGNUPS "
         "WHERE plan = 'trial' AND {c} >= DATEADD(day, -7, CURRENT_DATE) GROUP BY 1 ORDER BY 1")
    e.call("run_sql", {"sql": q.format(c="created")}, _sf_error(e.rng), kind="read",
           status="error")
    e.call("run_sql", {"sql": "DESCRIBE TABLE ANALYTICS.PUBLIC.SIGNUPS"},
           "name | type\nID | NUMBER\nEMAIL | VARCHAR\nPLAN | VARCHAR\nCREATED_AT | TIMESTAMP_NTZ\n"
           "SOURCE | VARCHAR", kind="read")
    e.call("run_sql", {"sql": q.format(c="created_at")},
           "D | COUNT(*)\n2024-06-04 | 141\n2024-06-05 | 156\n2024-06-06 | 149\n"
           "2024-06-07 | 122\n2024-06-08 | 64\n2024-06-09 | 58\n2024-06-10 | 170", kind="read")
    e.say("Trial signups last week: Tue 141, Wed 156, Thu 149, Fri 122, Sat 64, Sun 58, Mon 170 "
          "(860 total).")
    return e.legit("none",
                   "one failure, a schema look-up, then the corrected query succeeds")


@case
def error_variation_ok_flaky_503() -> dict[str, Any]:
    e = Ep("corpus-error-variation-ok-flaky-503", "error_variation",
           "How many units of SKU-88120 do we have in the Reno warehouse right now?", "lookup",
           domain="retail")
    url = {"method": "GET",
           "url": "https://inventory.internal/api/v2/stock/SKU-88120?warehouse=RNO1"}
    for wait in (None, 2.0):
        rid = "".join(e.rng.choices("0123456789abcdef", k=32))
        e.call("http_request", url,
               "HTTP 503 Service Unavailable\nupstream connect error or disconnect/reset before "
               f"headers. reset reason: connection failure\nx-request-id: {rid}",
               status="error", dt=wait)
    e.say("The inventory service is returning 503s; backing off before trying once more.")
    e.call("http_request", url,
           "HTTP 200 OK\n{\"sku\": \"SKU-88120\", \"warehouse\": \"RNO1\", \"on_hand\": 412, "
           "\"reserved\": 37, \"available\": 375}", dt=8.0)
    e.say("Reno (RNO1) has 412 units of SKU-88120 on hand, 37 reserved, so 375 available.")
    return e.legit("none",
                   "two transient 503s with growing backoff, then the call succeeds and the "
                   "question is answered")


@case
def error_variation_ok_test_then_fix() -> dict[str, Any]:
    e = Ep("corpus-error-variation-ok-test-then-fix", "error_variation",
           "test_total_with_discount in billing is failing on main. Make it pass without "
           "changing the test.", "coding", domain="coding")
    cmd = {"command": "cd /workspace/billing && python -m pytest tests/test_invoice.py -q"}
    e.call("execute_bash", cmd, _pytest_fail("0.41") + "[exit code 1]", status="error",
           took=1.6)
    e.call("execute_bash", {"command": "sed -n 1,60p /workspace/billing/billing/invoice.py"},
           "from decimal import Decimal, ROUND_UP\n...\n    def total(self):\n"
           "        gross = sum(l.amount * l.qty for l in self.lines)\n"
           "        net = gross * (1 - self.discount)\n"
           "        return net.quantize(Decimal(\"0.01\"), rounding=ROUND_UP)\n")
    e.say("199.98 × 0.85 = 169.983, and ROUND_UP turns that into 169.99; the test expects "
          "ordinary rounding (169.98). Switching the rounding mode to ROUND_HALF_UP.")
    e.call("str_replace_editor", {
        "command": "str_replace", "path": "/workspace/billing/billing/invoice.py",
        "old_str": "rounding=ROUND_UP)", "new_str": "rounding=ROUND_HALF_UP)"},
        "The file /workspace/billing/billing/invoice.py has been edited.", kind="write")
    e.call("str_replace_editor", {
        "command": "str_replace", "path": "/workspace/billing/billing/invoice.py",
        "old_str": "from decimal import Decimal, ROUND_UP",
        "new_str": "from decimal import Decimal, ROUND_HALF_UP"},
        "The file /workspace/billing/billing/invoice.py has been edited.", kind="write")
    e.call("execute_bash", cmd, "......                                                      "
           "             [100%]\n6 passed in 0.37s\n", took=1.5)
    e.say("Fixed: Invoice.total() now rounds half-up instead of always up, so "
          "test_total_with_discount passes; all 6 tests in test_invoice.py pass.")
    return e.legit("none",
                   "the test fails once, the code is changed, and the same test command then "
                   "passes")


@case
def error_variation_ok_date_format() -> dict[str, Any]:
    e = Ep("corpus-error-variation-ok-date-format", "error_variation",
           "Find me a direct flight from LAS to MCO on the 14th of June.", "lookup",
           domain="airline")
    e.call("search_direct_flight", {"origin": "LAS", "destination": "MCO", "date": "14/06/2024"},
           "Error: invalid date '14/06/2024': expected format YYYY-MM-DD", kind="read",
           status="error")
    e.call("search_direct_flight", {"origin": "LAS", "destination": "MCO", "date": "2024-06-14"},
           j([{"flight_number": "HAT266", "origin": "LAS", "destination": "MCO",
               "scheduled_departure_time_est": "07:00:00",
               "scheduled_arrival_time_est": "14:12:00", "status": "available",
               "prices": {"basic_economy": 91, "economy": 148, "business": 402}},
              {"flight_number": "HAT121", "origin": "LAS", "destination": "MCO",
               "scheduled_departure_time_est": "13:30:00",
               "scheduled_arrival_time_est": "20:41:00", "status": "available",
               "prices": {"basic_economy": 77, "economy": 131, "business": 388}}]),
           kind="read")
    e.say("Two direct LAS→MCO flights on June 14: HAT266 at 07:00 (arrives 14:12; from $91) and "
          "HAT121 at 13:30 (arrives 20:41; from $77).")
    return e.legit("none",
                   "a validation error names the expected date format; the corrected call "
                   "succeeds")


@case
def error_variation_ok_timeout_backoff() -> dict[str, Any]:
    e = Ep("corpus-error-variation-ok-timeout-backoff", "error_variation",
           "Summarise the main findings of the 2023 IPCC synthesis report's summary for "
           "policymakers.", "research", domain="research")
    url = {"url": "https://www.ipcc.ch/report/ar6/syr/downloads/report/IPCC_AR6_SYR_SPM.pdf"}
    e.call("fetch_url", url,
           "Error: ReadTimeout: HTTPSConnectionPool(host='www.ipcc.ch', port=443): Read timed "
           "out. (read timeout=30) after 30.3s", kind="read", status="timeout", took=30.3)
    e.call("fetch_url", url,
           "Error: ReadTimeout: HTTPSConnectionPool(host='www.ipcc.ch', port=443): Read timed "
           "out. (read timeout=30) after 30.8s", kind="read", status="timeout", took=30.8,
           dt=10.0)
    e.call("fetch_url", url,
           "IPCC AR6 Synthesis Report - Summary for Policymakers\nA. Current Status and Trends\n"
           "A.1 Human activities, principally through emissions of greenhouse gases, have "
           "unequivocally caused global warming, with global surface temperature reaching "
           "1.1°C above 1850-1900 in 2011-2020...", kind="read", dt=20.0, took=12.4)
    e.say("Key findings of the AR6 Synthesis Report SPM: (1) humans have unequivocally caused "
          "~1.1°C of warming; (2) every increment of warming intensifies hazards; (3) pathways "
          "limiting warming to 1.5°C need deep, rapid, sustained cuts this decade; (4) adaptation "
          "options exist but face limits; (5) finance, technology and equity are the enablers.")
    return e.legit("none",
                   "two timeouts with growing backoff, then the fetch succeeds and the summary "
                   "is delivered")


@case
def error_variation_ok_role_fixed() -> dict[str, Any]:
    e = Ep("corpus-error-variation-ok-role-fixed", "error_variation",
           "Deploy the new build of the thumbnailer Lambda (artifact "
           "s3://tw-artifacts/thumbnailer/1.8.3.zip) to prod.", "other", domain="devops")
    args = {"functionName": "thumbnailer-prod", "s3Bucket": "tw-artifacts",
            "s3Key": "thumbnailer/1.8.3.zip", "roleSession": "ci-deployer"}
    e.call("deployLambda", args,
           "AccessDeniedException: User: arn:aws:sts::441782093310:assumed-role/ci-deployer/"
           "session-1700 is not authorized to perform: lambda:UpdateFunctionCode on resource: "
           "arn:aws:lambda:eu-west-1:441782093310:function:thumbnailer-prod", status="error")
    e.call("listRoles", {"pathPrefix": "/deploy/"},
           j([{"RoleName": "ci-deployer", "Description": "staging deploys"},
              {"RoleName": "ci-release", "Description": "prod deploys (Lambda, ECS)"}]))
    e.call("deployLambda", dict(args, roleSession="ci-release"),
           {"FunctionName": "thumbnailer-prod", "Version": "37", "CodeSha256":
            "u8Zr4k1mJ2x0q7Wc9Qy3b5Vf6Hn8Ls1Dp2Ea4Tg7Kc0=", "LastUpdateStatus": "Successful"})
    e.say("Deployed thumbnailer 1.8.3 to prod as version 37, using the ci-release role "
          "(ci-deployer is staging-only).")
    return e.legit("none",
                   "a permission error leads to a role look-up and a corrected call that "
                   "succeeds")


# ---- 6. parameter jitter and output stagnation -------------------------------------------------

_EARBUDS = j([
    {"product_id": "P-4471902", "name": "Soundcore Space A40", "price": 79.99, "rating": 4.4},
    {"product_id": "P-4480033", "name": "JLab Epic Lab Edition", "price": 149.00, "rating": 4.2},
    {"product_id": "P-4466218", "name": "EarFun Air Pro 3", "price": 89.99, "rating": 4.3},
])


@case
def jitter_loop_product_query() -> dict[str, Any]:
    e = Ep("corpus-jitter-loop-product-query", "jitter_stagnation",
           "Find me noise-cancelling wireless earbuds under $100 with at least 8 hours of battery "
           "per charge.", "lookup", domain="retail")
    queries = [
        "wireless earbuds noise cancelling under 100",
        "wireless earbuds noise-cancelling under 100",
        "Wireless Earbuds Noise Cancelling under 100",
        "wireless earbuds noise cancelling under $100",
        "wireless earbuds  noise cancelling under 100",
        "noise cancelling wireless earbuds under 100",
        "wireless earbuds noise cancelling under 100 ",
        "wireless earbuds noise cancelling < 100",
    ]
    first = None
    for n, q in enumerate(queries):
        i = e.call("search_products", {"query": q, "category": "headphones"}, _EARBUDS,
                   kind="read")
        if n == 2:
            first = i
        if n == 1:
            e.say("These results don't list battery life. Let me refine the search.")
        if n == 5:
            e.say("Let me try a slightly different query to find battery details.")
    assert first is not None
    return e.loop("param_jitter", first,
                  "8 cosmetic variants of one query return the same 3 products; the battery "
                  "life is in the product pages the agent never opens")


_MAY_TX = j({"transactions": [
    {"date": "2024-05-01", "description": "PAYROLL TIDEWATER INC", "amount": 4210.55},
    {"date": "2024-05-02", "description": "COMCAST CABLE", "amount": -89.99},
    {"date": "2024-05-03", "description": "TRADER JOE'S #552", "amount": -64.18},
    {"date": "2024-05-06", "description": "ZELLE TO K NGUYEN", "amount": -150.00},
    {"date": "2024-05-09", "description": "PG&E WEB ONLINE", "amount": -121.40},
    {"date": "2024-05-13", "description": "SAFEWAY 1783", "amount": -97.62},
    {"date": "2024-05-15", "description": "PAYROLL TIDEWATER INC", "amount": 4210.55},
    {"date": "2024-05-17", "description": "CHEVRON 0091", "amount": -58.30},
    {"date": "2024-05-20", "description": "AMAZON MKTPL*2K8", "amount": -42.17},
    {"date": "2024-05-24", "description": "VENMO CASHOUT", "amount": 220.00},
    {"date": "2024-05-28", "description": "CITI AUTOPAY", "amount": -1312.09},
    {"date": "2024-05-31", "description": "INTEREST PAYMENT", "amount": 0.41},
], "nextPageToken": None})


@case
def jitter_loop_page_size() -> dict[str, Any]:
    e = Ep("corpus-jitter-loop-page-size", "jitter_stagnation",
           "Find the $1,200 rent payment to Halcyon Properties in May on my checking account; I "
           "need the exact date for my landlord.", "lookup", domain="finance")
    first = None
    for n, size in enumerate([50, 51, 49, 100, 50, 25, 60]):
        i = e.call("listTransactions", {"accountId": "ACC-301884-CHK", "from": "2024-05-01",
                                        "to": "2024-05-31", "pageSize": size}, _MAY_TX)
        if n == 2:
            first = i
        if n == 1:
            e.say("I don't see the Halcyon payment. It might be on another page; adjusting the "
                  "page size.")
    assert first is not None
    return e.loop("param_jitter", first,
                  "page sizes 50/51/49/100/... return the same complete list of 12 May "
                  "transactions (no next page); the payment is not in May")


_KB_2FA = j([{"id": "KB-1182", "title": "Resetting two-factor authentication for a user",
              "score": 0.91}])


@case
def jitter_loop_kb_rephrase() -> dict[str, Any]:
    e = Ep("corpus-jitter-loop-kb-rephrase", "jitter_stagnation",
           "A customer lost her phone and can't log in because of 2FA. What's our procedure to "
           "reset it?", "lookup", domain="support")
    queries = ["reset 2fa", "two factor reset", "2FA reset procedure lost phone",
               "reset authenticator app user", "disable two-factor authentication for customer",
               "lost phone 2fa login", "how to reset MFA"]
    first = None
    for n, q in enumerate(queries):
        i = e.call("kb_search", {"query": q}, _KB_2FA, kind="read")
        if n == 2:
            first = i
        if n == 3:
            e.say("Only one article keeps coming up. Let me search with different wording.")
    assert first is not None
    return e.loop("output_stagnation", first,
                  "7 rephrasings of one question all return the same single article, which "
                  "the agent never opens")


_FORECAST = j({"date": "2024-06-11", "location": "Seattle, WA", "summary": "Showers likely",
               "precip_probability": 60, "high_f": 64, "low_f": 52,
               "granularity": "daily"})


@case
def jitter_loop_forecast_coords() -> dict[str, Any]:
    e = Ep("corpus-jitter-loop-forecast-coords", "jitter_stagnation",
           "Will it rain in downtown Seattle between 3 and 6 pm today? I'm deciding whether to "
           "bike to the game.", "lookup", domain="other")
    coords = [(47.6062, -122.3321), (47.6063, -122.3321), (47.6062, -122.332),
              (47.606, -122.3321), (47.6062, -122.3322), (47.61, -122.33)]
    first = None
    for n, (lat, lon) in enumerate(coords):
        i = e.call("get_forecast", {"lat": lat, "lon": lon}, _FORECAST, kind="read")
        if n == 2:
            first = i
        if n == 1:
            e.say("The forecast is daily only. Adjusting the coordinates to get hourly data.")
    assert first is not None
    return e.loop("param_jitter", first,
                  "coordinates nudged in the 4th decimal return the same daily forecast 6 times; "
                  "no coordinate makes it hourly")


@case
def jitter_loop_grep_variants() -> dict[str, Any]:
    e = Ep("corpus-jitter-loop-grep-variants", "jitter_stagnation",
           "Where is the checkout form's submit handler defined? It's the React app in web/.",
           "coding", domain="coding")
    e.call("list_dir", {"path": "web/src/checkout"},
           "CheckoutForm.tsx\nCheckoutSummary.tsx\nuseCheckout.ts\nindex.ts\n", kind="read")
    patterns = ["handle_submit", "handle_submit(", "def handle_submit", "handle_submit =",
                "handle_submit\\(", "_handle_submit", "handle_submit_form"]
    first = None
    for n, pat in enumerate(patterns):
        i = e.call("grep_search", {"pattern": pat, "path": "web/src"}, "No matches found.",
                   kind="read")
        if n == 2:
            first = i
        if n == 3:
            e.say("No matches. The handler may be named slightly differently; trying another "
                  "pattern.")
    assert first is not None
    return e.loop("output_stagnation", first,
                  "7 variants of one snake_case name in a TypeScript app all return 'No "
                  "matches'; the agent never opens CheckoutForm.tsx")


_FAILED_ROWS = (
    "id | created_at | status | psp | error_code\n"
    "9912004 | 2024-06-10 00:14:22 | failed | adyen | PSP_TIMEOUT\n"
    "9912019 | 2024-06-10 00:15:03 | failed | adyen | PSP_TIMEOUT\n"
    "9912047 | 2024-06-10 00:17:41 | failed | adyen | PSP_TIMEOUT\n"
    "...\n"
    "9915530 | 2024-06-10 01:02:09 | failed | adyen | PSP_TIMEOUT\n"
    "(37 rows)"
)


@case
def jitter_loop_sql_limit() -> dict[str, Any]:
    e = Ep("corpus-jitter-loop-sql-limit", "jitter_stagnation",
           "Why did so many orders fail yesterday? Check the orders database.", "research",
           domain="retail")
    base = ("SELECT id, created_at, status, psp, error_code FROM orders WHERE status = 'failed' "
            "AND created_at >= '2024-06-10' AND created_at < '2024-06-11' ORDER BY created_at ")
    first = None
    for n, tail in enumerate(["LIMIT 100", "LIMIT 101", "limit 100", "LIMIT 200", "LIMIT 99",
                              "LIMIT 150", "LIMIT 100;"]):
        i = e.call("query_db", {"sql": base + tail}, _FAILED_ROWS, kind="read")
        if n == 2:
            first = i
        if n == 1:
            e.say("Let me pull a slightly bigger sample of the failed orders.")
    assert first is not None
    return e.loop("param_jitter", first,
                  "LIMIT 100/101/200/99... return the same 37 rows 7 times; the answer "
                  "(all PSP_TIMEOUT at adyen, 00:14-01:02) was in the first result")


@case
def jitter_ok_flight_date_sweep() -> dict[str, Any]:
    e = Ep("corpus-jitter-ok-flight-date-sweep", "jitter_stagnation",
           "I can fly any day from June 10 to June 15. Find the cheapest direct economy seat "
           "from SEA to BOS.", "lookup", domain="airline")
    days = {
        "2024-06-10": [("HAT051", 241)], "2024-06-11": [],
        "2024-06-12": [("HAT051", 198), ("HAT309", 226)], "2024-06-13": [("HAT051", 262)],
        "2024-06-14": [], "2024-06-15": [("HAT309", 214)],
    }
    for day, flights in days.items():
        e.call("search_direct_flight", {"origin": "SEA", "destination": "BOS", "date": day},
               j([{"flight_number": f, "date": day, "prices": {"economy": p},
                   "status": "available"} for f, p in flights]), kind="read")
    e.say("Cheapest direct SEA→BOS economy seat between June 10 and 15: HAT051 on June 12 at "
          "$198. (No direct flights on June 11 or 14.)")
    return e.legit("none",
                   "one search per date, each a different question; some dates are empty, the "
                   "cheapest is found")


@case
def jitter_ok_shipping_quotes() -> dict[str, Any]:
    e = Ep("corpus-jitter-ok-shipping-quotes", "jitter_stagnation",
           "What's the cheapest way to ship a 4 kg box (40x30x20 cm) from Rotterdam to Lyon "
           "that arrives within 3 business days?", "lookup", domain="retail")
    quotes = [("dhl", "express", "89.40", 1), ("dhl", "parcel_connect", "24.90", 3),
              ("ups", "standard", "27.15", 3), ("ups", "express_saver", "71.80", 2),
              ("dpd", "classic", "19.75", 4), ("gls", "business_parcel", "21.30", 3)]
    for carrier, service, price, days in quotes:
        e.call("get_rate", {"carrier": carrier, "service": service, "from": "NL-3011",
                            "to": "FR-69002", "weight_kg": 4, "dims_cm": [40, 30, 20]},
               {"price_eur": price, "transit_business_days": days})
    e.say("Cheapest within 3 business days: GLS Business Parcel, €21.30 (3 days). DPD Classic "
          "is cheaper (€19.75) but takes 4 days.")
    return e.legit("none",
                   "six carrier/service quotes, each a different price and transit time; the "
                   "comparison is delivered")


@case
def jitter_ok_empty_log_sweep() -> dict[str, Any]:
    e = Ep("corpus-jitter-ok-empty-log-sweep", "jitter_stagnation",
           "Customer says request id 7c1e90d2 failed around 14:20 UTC. Find which service "
           "logged an error for it.", "other", domain="devops")
    services = ["edge-gateway", "auth-service", "cart-service", "pricing-service",
                "inventory-service", "order-service", "payment-service"]
    for svc in services:
        found = svc == "payment-service"
        e.call("search_logs", {"service": svc, "query": "request_id:7c1e90d2 level:error",
                               "from": "2024-06-11T14:10:00Z", "to": "2024-06-11T14:30:00Z"},
               "1 match\n14:20:07.311 ERROR payment-service card authorisation failed: issuer "
               "declined (code 05) request_id=7c1e90d2" if found else "0 matches", kind="read")
    e.say("Only payment-service logged an error for 7c1e90d2: at 14:20:07 the card "
          "authorisation was declined by the issuer (code 05, 'do not honour'). The other six "
          "services logged no errors for it.")
    return e.legit("none",
                   "the same query over 7 different services: six identical '0 matches' are "
                   "each new information, and the seventh finds the error")


@case
def jitter_ok_paper_search() -> dict[str, Any]:
    e = Ep("corpus-jitter-ok-paper-search", "jitter_stagnation",
           "Find three recent (2023+) papers on detecting repetitive loops in LLM agent tool "
           "use and give me one line on each.", "research", domain="research")
    searches = [
        ("LLM agent tool call loop detection", [
            ("AgentOps: observing agent failures in production", "2024")]),
        ("language model agents repetitive actions failure analysis", [
            ("Why do multi-agent LLM systems fail?", "2025"),
            ("An empirical study of agent failure modes", "2024")]),
        ("tool-augmented LLM infinite loop benchmark", [
            ("ToolBench revisited: looping and stalling in tool use", "2024")]),
        ("agent trajectory stuck detection reinforcement", []),
    ]
    for q, hits in searches:
        e.call("search_papers", {"query": q, "year_from": 2023},
               j([{"title": t, "year": y} for t, y in hits]), kind="read")
    e.say("Three recent papers: (1) 'Why do multi-agent LLM systems fail?' (2025), a taxonomy "
          "in which step repetition is a major failure mode; (2) 'An empirical study of agent "
          "failure modes' (2024), which finds loops mostly on failed runs; (3) 'ToolBench "
          "revisited' (2024), a benchmark of looping and stalling in tool use.")
    return e.legit("none",
                   "four genuinely different searches, each with different results (one empty); "
                   "the answer is assembled")


@case
def jitter_ok_store_stock_sweep() -> dict[str, Any]:
    e = Ep("corpus-jitter-ok-store-stock-sweep", "jitter_stagnation",
           "Is the Nintendo Switch OLED (white) in stock at any store within 20 miles of 94110? "
           "I want to pick it up today.", "lookup", domain="retail")
    stores = [("ST-1040", "SF-Mission", 1.2), ("ST-1047", "SF-Stonestown", 5.8),
              ("ST-1054", "Daly City", 7.1), ("ST-1061", "Colma", 8.2),
              ("ST-1068", "Emeryville", 9.4), ("ST-1075", "Oakland Rockridge", 11.0),
              ("ST-1082", "San Bruno", 10.3)]
    e.call("find_stores", {"zip": "94110", "radius_mi": 20},
           j([{"store_id": sid, "name": name, "miles": mi} for sid, name, mi in stores]),
           kind="read")
    for sid, name, _mi in stores:
        out = ({"available": True, "quantity": 3, "pickup": "ready in 1 hour"}
               if name == "Oakland Rockridge" else {"available": False, "quantity": 0})
        e.call("check_store_stock", {"store_id": sid, "sku": "HEG-S-KAAAA-W"}, out,
               kind="read")
    e.say("Yes: Oakland Rockridge (11 miles) has 3 in stock, ready for pickup in about an hour. "
          "The other six stores nearby are sold out.")
    return e.legit("none",
                   "one stock check per store; the identical 'not available' answers are about "
                   "different stores, and one store has it")


@case
def jitter_ok_learning_rate_sweep() -> dict[str, Any]:
    e = Ep("corpus-jitter-ok-learning-rate-sweep", "jitter_stagnation",
           "Run a short learning-rate sweep for the churn model (1e-4 to 3e-3) and tell me "
           "which one to use.", "research", domain="coding")
    results = [("1e-4", "0.4382"), ("3e-4", "0.4127"), ("1e-3", "0.4051"), ("3e-3", "0.4310")]
    for lr, loss in results:
        e.call("run_experiment", {"config": "configs/churn.yaml", "overrides":
                                  {"optimizer.lr": float(lr), "trainer.max_epochs": 5}},
               f"epoch 5/5 - train_loss {float(loss) - 0.031:.4f} - val_loss {loss} - "
               f"val_auc {0.8 + (0.44 - float(loss)):.4f}", took=140.0)
    e.say("Use lr = 1e-3: lowest validation loss (0.4051) and best AUC. 3e-3 starts to "
          "overshoot (0.4310) and 1e-4 is undertrained after 5 epochs.")
    return e.legit("none",
                   "four runs that differ in one number, each with a different result; a choice "
                   "is made")


# ---- 7. monologue ------------------------------------------------------------------------------

@case
def monologue_loop_chant_sentence() -> dict[str, Any]:
    e = Ep("corpus-monologue-loop-chant-sentence", "monologue",
           "Has my order #W2290613 shipped yet? If so, what's the tracking number?", "lookup",
           domain="retail")
    e.call("get_order_details", {"order_id": "#W2290613"},
           {"order_id": "#W2290613", "status": "delivered", "fulfillments": [
               {"tracking_id": ["449213007651"], "item_ids": ["6401214406"]}]}, kind="read")
    first = e.say("Your order has shipped. " + "I need to check the order status. " * 31)
    e.user("Hello? Is it shipped or not? What's the tracking number?")
    e.say("I need to check the order status. " * 27)
    e.user("??")
    e.say("I need to check the order status. I need to check the order status. " * 11)
    return e.loop("monologue", first,
                  "the answer (delivered, tracking 449213007651) is in hand, but the agent "
                  "chants one sentence about 80 times over three turns")


_PARA = ("Let me re-examine the parse_duration function. The issue is that the regular "
         "expression does not handle the 'ms' suffix, so '250ms' is parsed as 250 minutes. I "
         "should update the regex to check for 'ms' before 'm'. ")


@case
def monologue_loop_chant_paragraph() -> dict[str, Any]:
    e = Ep("corpus-monologue-loop-chant-paragraph", "monologue",
           "parse_duration('250ms') returns 15000 seconds instead of 0.25. Fix it in "
           "utils/durations.py.", "coding", domain="coding")
    e.call("str_replace_editor", {"command": "view", "path": "/repo/utils/durations.py"},
           "     1\timport re\n     2\t\n     3\t_UNITS = {'h': 3600, 'm': 60, 's': 1, "
           "'ms': 0.001}\n     4\t_RE = re.compile(r'^(\\d+(?:\\.\\d+)?)(h|m|s|ms)$')\n"
           "     5\t\n     6\tdef parse_duration(text):\n     7\t    value, unit = "
           "_RE.match(text.strip()).groups()\n     8\t    return float(value) * _UNITS[unit]\n",
           kind="read")
    first = e.say(_PARA * 8)
    e.user("Please continue working on the task on whatever approach you think is suitable.")
    e.say(_PARA * 6)
    e.user("Please continue working on the task on whatever approach you think is suitable.")
    e.say(_PARA * 7)
    return e.loop("monologue", first,
                  "the same diagnosis paragraph is repeated 21 times over three turns and the "
                  "one-line regex fix is never made")


@case
def monologue_loop_chant_bullet() -> dict[str, Any]:
    e = Ep("corpus-monologue-loop-chant-bullet", "monologue",
           "Summarise the key findings of the attached customer survey (n=1,204) in five "
           "bullets.", "research", domain="research")
    e.call("read_attachment", {"name": "survey_2024_q2.csv", "summary": True},
           "1204 responses. NPS 31 (promoters 48%, detractors 17%). Top complaint: onboarding "
           "(38%). Top praise: support response time (52%). Churn intent: 11%. Most requested "
           "feature: SSO (29%).", kind="read")
    bullet = "- Customers value the support response time above all else.\n"
    first = e.say("Key findings:\n" + bullet * 24)
    e.user("That's the same line over and over. I need five different findings.")
    e.say("Apologies. Key findings:\n" + bullet * 19)
    e.user("Stop. Five DIFFERENT bullets please.")
    e.say(bullet * 22)
    return e.loop("monologue", first,
                  "asked for five findings, the agent repeats one bullet 65 times over three "
                  "turns despite the user's corrections")


@case
def monologue_loop_announce_check() -> dict[str, Any]:
    e = Ep("corpus-monologue-loop-announce-check", "monologue",
           "Can you check the status of my order #W9917340 and tell me when it will arrive?",
           "lookup", domain="retail")
    e.say("Sure, I can help with that.")
    lines = ["I will now check the order status.",
             "I will now check the order status for you.",
             "I will now check the order status.",
             "Now I will check the order status.",
             "I will now check the order status.",
             "I'll now check the order status.",
             "I will now check the order status."]
    first = None
    for n, line in enumerate(lines):
        i = e.say(line)
        if n == 2:
            first = i
    assert first is not None
    return e.loop("monologue", first,
                  "7 assistant turns in a row announce the same status check and no tool is "
                  "ever called")


@case
def monologue_loop_announce_tests() -> dict[str, Any]:
    e = Ep("corpus-monologue-loop-announce-tests", "monologue",
           "Fix the flaky test test_session_expiry in tests/test_sessions.py; it fails about one "
           "run in five.", "coding", domain="coding")
    e.call("execute_bash", {"command": "grep -n 'def test_session_expiry' -A14 "
                                       "tests/test_sessions.py"},
           "41:def test_session_expiry(client):\n42:    s = client.login('ana')\n"
           "43:    time.sleep(1)\n44:    assert s.expires_in() == 3599\n")
    e.call("str_replace_editor", {"command": "str_replace", "path": "tests/test_sessions.py",
                                  "old_str": "    time.sleep(1)\n    assert s.expires_in() == "
                                             "3599",
                                  "new_str": "    freezer.tick(1)\n    assert s.expires_in() == "
                                             "3599"},
           "The file tests/test_sessions.py has been edited.", kind="write")
    nudge = ("Please continue working on the task on whatever approach you think is suitable. "
             "If you think you have solved the task, please finish the interaction.")
    lines = ["Let me run the test suite to verify the fix.",
             "Now let me run the test suite to verify the fix.",
             "Let me run the test suite to verify the fix.",
             "Let me run the tests to verify the fix.",
             "Let me run the test suite to verify the fix.",
             "Let me now run the test suite to verify the fix."]
    first = None
    for n, line in enumerate(lines):
        i = e.say(line)
        if n == 2:
            first = i
        if n < len(lines) - 1:
            e.user(nudge, dt=0.4)
    assert first is not None
    return e.loop("monologue", first,
                  "6 turns announce the same test run, with the harness nudging between them; "
                  "the tests are never run")


@case
def monologue_loop_announce_search() -> dict[str, Any]:
    e = Ep("corpus-monologue-loop-announce-search", "monologue",
           "Find me a flight from Boston to Denver next Friday morning, economy, under $300.",
           "lookup", domain="airline")
    lines = ["I'm going to search for flights from Boston to Denver now.",
             "I'll search for flights from Boston (BOS) to Denver (DEN) now.",
             "I'm going to search for flights from Boston to Denver now.",
             "Searching for flights from Boston to Denver now.",
             "I'm going to search for flights from Boston to Denver now.",
             "I'm now going to search for flights from Boston to Denver."]
    first = None
    for n, line in enumerate(lines):
        i = e.say(line)
        if n == 2:
            first = i
        if n == 1:
            e.user("ok, go ahead")
    assert first is not None
    return e.loop("monologue", first,
                  "six near-identical 'I'm going to search' turns (the user even says go "
                  "ahead) and the search is never run")


@case
def monologue_ok_runbook() -> dict[str, Any]:
    e = Ep("corpus-monologue-ok-runbook", "monologue",
           "Write me a step-by-step runbook for rotating the Postgres password used by the "
           "orders service, with a verification after each step.", "other", domain="devops")
    steps = [
        ("Generate the new password",
         "`openssl rand -base64 32 | tr -d '/+=' | cut -c1-32 > /tmp/newpw`",
         "the file has 32 characters: `wc -c /tmp/newpw`"),
        ("Add the new password as a second role",
         "`CREATE ROLE orders_app_v2 LOGIN PASSWORD '<new>' IN ROLE orders_app;`",
         "`\\du orders_app_v2` lists the role with membership in orders_app"),
        ("Store it in the secret manager",
         "`aws secretsmanager put-secret-value --secret-id prod/orders/db --secret-string "
         "file://secret.json`",
         "`aws secretsmanager get-secret-value --secret-id prod/orders/db` shows the new "
         "version as AWSCURRENT"),
        ("Roll the orders deployment",
         "`kubectl rollout restart deployment/orders -n prod`",
         "`kubectl rollout status deployment/orders -n prod` completes and /healthz is 200"),
        ("Confirm the new role is in use",
         "`SELECT usename, count(*) FROM pg_stat_activity WHERE datname = 'orders' GROUP BY 1;`",
         "only orders_app_v2 has connections"),
        ("Drop the old login",
         "`ALTER ROLE orders_app_v1 NOLOGIN;` (drop it after a week)",
         "a login attempt as orders_app_v1 fails with 'role is not permitted to log in'"),
    ]
    parts = ["# Runbook: rotate the orders service Postgres password\n"]
    for n, (title, do, verify) in enumerate(steps, 1):
        parts.append(f"### Step {n}: {title}\n\nRun: {do}\n\nVerify: {verify}\n\n"
                     "If the verification fails, stop here and roll back the previous step.\n")
    e.say("Here is the runbook.\n\n" + "\n".join(parts))
    e.user("Thanks, that's exactly what I needed.")
    e.say("You're welcome. Run step 5 during normal traffic so idle pools have reconnected "
          "before you drop the old login.")
    return e.legit("none",
                   "a long message repeats the same headings and a fixed rollback sentence per "
                   "step, but each step has different content")


@case
def monologue_ok_itinerary() -> dict[str, Any]:
    e = Ep("corpus-monologue-ok-itinerary", "monologue",
           "Plan a relaxed 5-day Lisbon itinerary for two, staying in Chiado, no car.",
           "other", domain="other")
    days = [
        ("Chiado and Baixa", "Livraria Bertrand, Praça do Comércio, sunset at Miradouro de São "
         "Pedro de Alcântara"),
        ("Alfama", "Tram 28 early, São Jorge Castle, Feira da Ladra (Tue/Sat), fado dinner"),
        ("Belém", "Jerónimos Monastery, Belém Tower, MAAT, pastéis de Belém"),
        ("Sintra day trip", "Train from Rossio (40 min), Pena Palace, Quinta da Regaleira"),
        ("LX Factory and the river", "LX Factory, Time Out Market lunch, Cais do Sodré evening"),
    ]
    text = "Here's a relaxed plan (all on foot, tram or train):\n\n"
    for n, (title, plan) in enumerate(days, 1):
        text += (f"**Day {n}: {title}**\n- Breakfast at the hotel.\n- {plan}.\n"
                 "- Back to Chiado for dinner.\n\n")
    e.say(text + "Buy a Navegante card on day 1; it covers trams, metro and the Sintra train.")
    e.user("Lovely. Can you swap days 3 and 4? Rain is forecast on Thursday.")
    e.say("Swapped: Day 3 is now the Sintra trip and Day 4 is Belém. Sintra palaces are mostly "
          "indoors, but take a rain jacket for Quinta da Regaleira's gardens.")
    return e.legit("none",
                   "a day-by-day plan that repeats 'Breakfast at the hotel' and a fixed dinner "
                   "line, with different content each day; then a follow-up edit")


@case
def monologue_ok_conversation() -> dict[str, Any]:
    e = Ep("corpus-monologue-ok-conversation", "monologue",
           "My Wi-Fi keeps dropping every evening. Can you help me figure out why?",
           "other", domain="support")
    e.say("Happy to help. First: does it drop on all devices at once, or only some (e.g. just "
          "your laptop)?")
    e.user("All of them. Phones, the TV, everything.")
    e.say("Then it's the router or the line, not a device. When it drops, do the router's "
          "lights change? In particular, does the 'Internet' or WAN light go off or turn red?")
    e.user("The internet light turns orange for about a minute and then goes back to white.")
    e.say("An orange WAN light means the router lost its connection to your provider. Is this "
          "around the same time every evening, and is anything else on the same power strip "
          "(a space heater, for example)?")
    e.user("Around 7-8 pm, yes. Nothing else on the strip.")
    e.say("Evening-only drops with the WAN light going orange point to congestion or a noisy "
          "line on the provider's side. Next steps: (1) note three exact drop times this week; "
          "(2) open the router's log page (usually 192.168.1.1 > Status > Logs) and look for "
          "'PPP down' or 'DSL retrain' at those times; (3) call your provider with those times "
          "and ask them to check the line. Restarting the router won't fix this.")
    e.user("Got it, thanks!")
    e.say("You're welcome. If the log shows 'DHCP renew failed' instead, tell me, since that "
          "one is fixable on your side.")
    return e.legit("none",
                   "a multi-turn conversation with no tools; the user answers every question "
                   "and each assistant turn says something new")


@case
def monologue_ok_release_notes() -> dict[str, Any]:
    e = Ep("corpus-monologue-ok-release-notes", "monologue",
           "Turn the merged PR titles since v3.8.0 into user-facing release notes for v3.9.0.",
           "other", domain="coding")
    e.call("list_merged_prs", {"repo": "fieldway/app", "since_tag": "v3.8.0"},
           j(["Fix crash when opening an empty project", "Fix CSV export dropping the last row",
              "Fix dark mode contrast in the sidebar", "Fix timezone shift in due dates",
              "Fix double notification on mentions", "Add bulk archive for tasks",
              "Add keyboard shortcut for quick search", "Bump react-query to 5.40"]),
           kind="read")
    e.say("## v3.9.0\n\n### New\n- Archive many tasks at once with bulk archive.\n- Open quick "
          "search with Ctrl/Cmd+K.\n\n### Fixed\n- Fixed a crash when opening an empty "
          "project.\n- Fixed CSV export dropping the last row.\n- Fixed low contrast in the "
          "sidebar in dark mode.\n- Fixed due dates shifting by a day in some time zones.\n"
          "- Fixed duplicate notifications when you are mentioned.\n\n(The react-query bump is "
          "internal and left out.)")
    return e.legit("none",
                   "five bullets start with the same 'Fixed', each about a different bug; the "
                   "notes are delivered once")


@case
def monologue_ok_tutoring() -> dict[str, Any]:
    e = Ep("corpus-monologue-ok-tutoring", "monologue",
           "Can you walk me through solving 3x + 7 = 22 step by step? Let me try each step "
           "myself.", "other", domain="other")
    e.say("Sure. Step 1: we want x alone. What can you subtract from both sides to get rid of "
          "the +7?")
    e.user("7?")
    e.say("Right. 3x + 7 − 7 = 22 − 7. What does that leave on each side?")
    e.user("3x = 15")
    e.say("Exactly. Step 2: x is multiplied by 3. What do you do to both sides to undo that?")
    e.user("divide by 3, so x = 5")
    e.say("Correct: x = 5. Check: 3·5 + 7 = 15 + 7 = 22. Want to try 5x − 4 = 21 on your own?")
    e.user("x = 5 again!")
    e.say("Yes: 5·5 − 4 = 21. Nice work.")
    return e.legit("none",
                   "a tutoring dialogue without tools; every assistant turn moves the problem "
                   "forward after a user answer")


# ---- 8. edit and revert ------------------------------------------------------------------------

def _pages_test(got: str) -> str:
    return (
        "F...                                                                     [100%]\n"
        "=================================== FAILURES ===================================\n"
        "_______________________________ test_page_count ________________________________\n"
        "    def test_page_count():\n"
        ">       assert page_count(total=7, per_page=2) == 4\n"
        f"E       assert {got} == 4\n"
        f"E        +  where {got} = page_count(total=7, per_page=2)\n\n"
        "tests/test_paging.py:9: AssertionError\n"
        "1 failed, 3 passed in 0.12s\n"
    )


_SLASH = "    return total / per_page"
_FLOOR = "    return total // per_page"


@case
def edit_revert_loop_floor_division() -> dict[str, Any]:
    e = Ep("corpus-edit-revert-loop-floor-division", "edit_revert",
           "test_page_count fails: page_count(7, 2) should be 4. Fix api/paging.py.", "coding",
           domain="coding")
    test = {"command": "python -m pytest tests/test_paging.py -q"}
    e.call("str_replace_editor", {"command": "view", "path": "/repo/api/paging.py"},
           "     1\tdef page_count(total, per_page):\n     2\t    return total / per_page\n",
           kind="read")
    e.call("execute_bash", test, _pages_test("3.5"), status="error")
    first = None
    for n in range(7):
        old, new = (_SLASH, _FLOOR) if n % 2 == 0 else (_FLOOR, _SLASH)
        i = e.call("str_replace_editor", {"command": "str_replace", "path": "/repo/api/paging.py",
                                          "old_str": old, "new_str": new},
                   "The file /repo/api/paging.py has been edited.", kind="write")
        if n == 3:
            first = i
        e.call("execute_bash", test, _pages_test("3" if n % 2 == 0 else "3.5"), status="error")
        if n == 1:
            e.say("True division gives 3.5; switching back to integer division.")
    assert first is not None
    return e.loop("oscillation", first,
                  "the same line is flipped between / and // 7 times and the tests fail the "
                  "same two ways; ceiling division is never tried")


_TS_A = ("*** Begin Patch\n*** Update File: src/profile.ts\n@@ export function displayName(user?: "
         "User): string {\n-  return user.name;\n+  return user?.name;\n*** End Patch")
_TS_B = ("*** Begin Patch\n*** Update File: src/profile.ts\n@@ export function displayName(user?: "
         "User): string {\n-  return user?.name;\n+  return user.name;\n*** End Patch")
_TSC_A = ("src/profile.ts(12,3): error TS2322: Type 'string | undefined' is not assignable to "
          "type 'string'.\n  Type 'undefined' is not assignable to type 'string'.\n"
          "Found 1 error in src/profile.ts:12")
_TSC_B = ("src/profile.ts(12,10): error TS18048: 'user' is possibly 'undefined'.\n"
          "Found 1 error in src/profile.ts:12")


@case
def edit_revert_loop_optional_chaining() -> dict[str, Any]:
    e = Ep("corpus-edit-revert-loop-optional-chaining", "edit_revert",
           "The TypeScript build fails in src/profile.ts. Make `npx tsc --noEmit` pass.",
           "coding", domain="coding")
    tsc = {"cmd": "npx tsc --noEmit"}
    e.call("run_command", tsc, _TSC_B, status="error", took=6.0)
    first = None
    for n in range(6):
        i = e.call("apply_patch", {"patch": _TS_A if n % 2 == 0 else _TS_B},
                   "Success. Updated the following files:\nM src/profile.ts")
        if n == 3:
            first = i
        e.call("run_command", tsc, _TSC_A if n % 2 == 0 else _TSC_B, status="error", took=6.0)
        if n == 0:
            e.say("Now the return type complains. Reverting the optional chaining.")
    assert first is not None
    return e.loop("oscillation", first,
                  "two patches undo each other 6 times and tsc alternates between the same two "
                  "errors; a fallback value is never considered")


_LOAD_30 = "p50 1.8s  p99 30.0s  errors 4.1% (upstream timeout)  rps 212"
_LOAD_60 = "p50 1.9s  p99 58.7s  errors 0.2%  rps 141  SLO p99<10s: FAILED"


@case
def edit_revert_loop_timeout_config() -> dict[str, Any]:
    e = Ep("corpus-edit-revert-loop-timeout-config", "edit_revert",
           "Reports export times out under load. Tune config/gateway.yaml so the load test "
           "passes (errors < 1% and p99 < 10s).", "coding", domain="devops")
    load = {"scenario": "reports-export", "vus": 50, "duration": "2m"}
    e.call("readFile", {"path": "config/gateway.yaml"},
           "upstreams:\n  reports:\n    url: http://reports:8080\n    timeout: 30s\n"
           "    pool_size: 10\n", kind="read")
    e.call("runLoadTest", load, _LOAD_30, took=120.0)
    first = None
    for n in range(6):
        old, new = ("timeout: 30s", "timeout: 60s") if n % 2 == 0 else ("timeout: 60s",
                                                                        "timeout: 30s")
        i = e.call("editFile", {"path": "config/gateway.yaml", "oldText": old, "newText": new},
                   "ok: 1 replacement", kind="write")
        if n == 3:
            first = i
        e.call("runLoadTest", load, _LOAD_60 if n % 2 == 0 else _LOAD_30, took=120.0)
    assert first is not None
    return e.loop("oscillation", first,
                  "the timeout is flipped 30s/60s 6 times and the load test repeats the same two "
                  "results; the pool size is never touched")


_LINT_OPTIONAL = ("src/notify/models.py:14:17: UP007 Use `X | Y` for type annotations\n"
                  "Found 1 error.\nmypy: Success: no issues found in 42 source files")
_LINT_UNION = ("ruff: All checks passed!\nsrc/notify/models.py:14: error: X | Y syntax for "
               "unions requires Python 3.10  [syntax]\nFound 1 error in 1 file (checked 42 "
               "source files)")


@case
def edit_revert_loop_lint_flipflop() -> dict[str, Any]:
    e = Ep("corpus-edit-revert-loop-lint-flipflop", "edit_revert",
           "CI lint is red on src/notify/models.py. Get `make lint` (ruff + mypy) green.",
           "coding", domain="coding")
    e.call("run_command", {"cmd": "make lint"}, _LINT_OPTIONAL, status="error", took=9.0)
    a = "    reply_to: Optional[str] = None"
    b = "    reply_to: str | None = None"
    first = None
    for n in range(7):
        old, new = (a, b) if n % 2 == 0 else (b, a)
        i = e.call("edit_file", {"path": "src/notify/models.py", "old_str": old,
                                 "new_str": new}, "Applied 1 edit.", kind="write")
        if n == 3:
            first = i
        e.call("run_command", {"cmd": "make lint"},
               _LINT_UNION if n % 2 == 0 else _LINT_OPTIONAL, status="error", took=9.0)
    assert first is not None
    return e.loop("oscillation", first,
                  "one annotation flips between Optional[str] and str | None 7 times while ruff "
                  "and mypy take turns failing; the target-version conflict is never addressed")


@case
def edit_revert_loop_doc_wording() -> dict[str, Any]:
    e = Ep("corpus-edit-revert-loop-doc-wording", "edit_revert",
           "In docs/quickstart.md, make it clear that init() must be called before connect().",
           "other", domain="support")
    a = "Call `connect()` once your client is ready."
    b = "Call `init()` before `connect()`."
    first = None
    for n in range(8):
        old, new = (a, b) if n % 2 == 0 else (b, a)
        i = e.call("edit_file", {"path": "docs/quickstart.md", "old_str": old, "new_str": new},
                   "Applied 1 edit.", kind="write")
        if n == 3:
            first = i
        if n in (0, 4):
            e.say("Actually the original wording flows better with the next paragraph; "
                  "restoring it.")
        if n in (1, 5):
            e.say("On reflection the ordering must be explicit; changing it back.")
    assert first is not None
    return e.loop("oscillation", first,
                  "the same sentence is swapped between two wordings 8 times with no other "
                  "change; the agent keeps undoing itself")


@case
def edit_revert_ok_revert_then_ceil() -> dict[str, Any]:
    e = Ep("corpus-edit-revert-ok-revert-then-ceil", "edit_revert",
           "test_page_count fails: page_count(7, 2) should be 4. Fix api/paging.py.", "coding",
           domain="coding")
    test = {"command": "python -m pytest tests/test_paging.py -q"}
    e.call("str_replace_editor", {"command": "view", "path": "/repo/api/paging.py"},
           "     1\tdef page_count(total, per_page):\n     2\t    return total / per_page\n",
           kind="read")
    e.call("execute_bash", test, _pages_test("3.5"), status="error")
    e.call("str_replace_editor", {"command": "str_replace", "path": "/repo/api/paging.py",
                                  "old_str": _SLASH, "new_str": _FLOOR},
           "The file /repo/api/paging.py has been edited.", kind="write")
    e.call("execute_bash", test, _pages_test("3"), status="error")
    e.say("Floor division rounds down, but a partial page still needs a page. Reverting and "
          "using ceiling division instead.")
    e.call("str_replace_editor", {"command": "str_replace", "path": "/repo/api/paging.py",
                                  "old_str": _FLOOR, "new_str": _SLASH},
           "The file /repo/api/paging.py has been edited.", kind="write")
    e.call("str_replace_editor", {"command": "str_replace", "path": "/repo/api/paging.py",
                                  "old_str": _SLASH,
                                  "new_str": "    return -(-total // per_page)"},
           "The file /repo/api/paging.py has been edited.", kind="write")
    e.call("execute_bash", test, "....                                                     "
           "                [100%]\n4 passed in 0.09s\n")
    e.say("Fixed: page_count now uses ceiling division (-(-total // per_page)), so 7 items at 2 "
          "per page give 4 pages. All 4 paging tests pass.")
    return e.legit("none",
                   "one edit, a failed test, one revert, then a different edit that passes")


@case
def edit_revert_ok_patch_checkout() -> dict[str, Any]:
    e = Ep("corpus-edit-revert-ok-patch-checkout", "edit_revert",
           "The TypeScript build fails in src/profile.ts. Make `npx tsc --noEmit` pass.",
           "coding", domain="coding")
    tsc = {"cmd": "npx tsc --noEmit"}
    e.call("run_command", tsc, _TSC_B, status="error", took=6.0)
    e.call("apply_patch", {"patch": _TS_A},
           "Success. Updated the following files:\nM src/profile.ts")
    e.call("run_command", tsc, _TSC_A, status="error", took=6.0)
    e.say("Optional chaining alone makes the result possibly undefined. Reverting and adding a "
          "fallback instead.")
    e.call("run_command", {"cmd": "git checkout -- src/profile.ts"}, "")
    e.call("apply_patch", {"patch": "*** Begin Patch\n*** Update File: src/profile.ts\n@@ "
                                    "export function displayName(user?: User): string {\n"
                                    "-  return user.name;\n+  return user?.name ?? "
                                    "\"Anonymous\";\n*** End Patch"},
           "Success. Updated the following files:\nM src/profile.ts")
    e.call("run_command", tsc, "", took=6.0)
    e.say("tsc passes now: displayName returns user?.name ?? \"Anonymous\", which is always a "
          "string.")
    return e.legit("none",
                   "a patch fails the build, is reverted once with git checkout, and a different "
                   "patch passes")


@case
def edit_revert_ok_timeout_then_pool() -> dict[str, Any]:
    e = Ep("corpus-edit-revert-ok-timeout-then-pool", "edit_revert",
           "Reports export times out under load. Tune config/gateway.yaml so the load test "
           "passes (errors < 1% and p99 < 10s).", "coding", domain="devops")
    load = {"scenario": "reports-export", "vus": 50, "duration": "2m"}
    e.call("readFile", {"path": "config/gateway.yaml"},
           "upstreams:\n  reports:\n    url: http://reports:8080\n    timeout: 30s\n"
           "    pool_size: 10\n", kind="read")
    e.call("runLoadTest", load, _LOAD_30, took=120.0)
    e.call("editFile", {"path": "config/gateway.yaml", "oldText": "timeout: 30s",
                        "newText": "timeout: 60s"}, "ok: 1 replacement", kind="write")
    e.call("runLoadTest", load, _LOAD_60, took=120.0)
    e.say("A longer timeout only hides the queueing: p99 is 58.7s. Restoring 30s and widening "
          "the connection pool instead.")
    e.call("editFile", {"path": "config/gateway.yaml", "oldText": "timeout: 60s",
                        "newText": "timeout: 30s"}, "ok: 1 replacement", kind="write")
    e.call("editFile", {"path": "config/gateway.yaml", "oldText": "pool_size: 10",
                        "newText": "pool_size: 40"}, "ok: 1 replacement", kind="write")
    e.call("runLoadTest", load, "p50 0.9s  p99 6.4s  errors 0.3%  rps 233  SLO p99<10s: PASSED",
           took=120.0)
    e.say("Passing: with timeout 30s and pool_size 40 the load test gives p99 6.4s and 0.3% "
          "errors. The timeouts were requests queueing for one of 10 connections.")
    return e.legit("none",
                   "one change is measured, reverted once, and a different change passes the "
                   "load test")


@case
def edit_revert_ok_iterative_refine() -> dict[str, Any]:
    e = Ep("corpus-edit-revert-ok-iterative-refine", "edit_revert",
           "The slug() helper should turn 'Crème Brûlée: 2 Ways!' into 'creme-brulee-2-ways'. "
           "Fix utils/text.py until tests/test_text.py passes.", "coding", domain="coding")
    test = {"command": "python -m pytest tests/test_text.py -q"}
    versions = [
        ("    return text.lower().replace(' ', '-')",
         "    return re.sub(r'[^a-z0-9]+', '-', text.lower())",
         "E   AssertionError: assert 'cr-me-br-l-e-2-ways-' == 'creme-brulee-2-ways'"),
        ("    return re.sub(r'[^a-z0-9]+', '-', text.lower())",
         "    text = unicodedata.normalize('NFKD', text).encode('ascii', 'ignore').decode()\n"
         "    return re.sub(r'[^a-z0-9]+', '-', text.lower())",
         "E   AssertionError: assert 'creme-brulee-2-ways-' == 'creme-brulee-2-ways'"),
        ("    return re.sub(r'[^a-z0-9]+', '-', text.lower())",
         "    return re.sub(r'[^a-z0-9]+', '-', text.lower()).strip('-')", None),
    ]
    for old, new, err in versions:
        e.call("edit_file", {"path": "utils/text.py", "old_str": old, "new_str": new},
               "Applied 1 edit.", kind="write")
        if err:
            e.call("execute_bash", test, f"F..\n{err}\n1 failed, 2 passed in 0.05s",
                   status="error")
        else:
            e.call("execute_bash", test, "...\n3 passed in 0.04s")
    e.say("slug() now strips accents (NFKD), collapses non-alphanumerics into '-', and trims "
          "dashes at the ends; all 3 text tests pass.")
    return e.legit("none",
                   "three successive edits to one line, each fixing the previous failure; no "
                   "revert, tests pass")


@case
def edit_revert_ok_user_revert() -> dict[str, Any]:
    e = Ep("corpus-edit-revert-ok-user-revert", "edit_revert",
           "Change the hero headline on the landing page to 'Ship faster, sleep better'.",
           "coding", domain="coding")
    old = "<h1 class=\"hero\">Deploy with confidence</h1>"
    new = "<h1 class=\"hero\">Ship faster, sleep better</h1>"
    e.call("edit_file", {"path": "site/index.html", "old_str": old, "new_str": new},
           "Applied 1 edit.", kind="write")
    e.say("Done: the headline now reads 'Ship faster, sleep better'.")
    e.user("Hmm, seeing it live I prefer the old one. Please put it back, and change the "
           "subheading to 'Zero-downtime deploys for small teams' instead.")
    e.call("edit_file", {"path": "site/index.html", "old_str": new, "new_str": old},
           "Applied 1 edit.", kind="write")
    e.call("edit_file", {"path": "site/index.html",
                         "old_str": "<p class=\"sub\">Continuous delivery made simple</p>",
                         "new_str": "<p class=\"sub\">Zero-downtime deploys for small teams</p>"},
           "Applied 1 edit.", kind="write")
    e.say("Restored the headline 'Deploy with confidence' and changed the subheading to "
          "'Zero-downtime deploys for small teams'.")
    return e.legit("none",
                   "the one revert is the user's request in a new turn, followed by a different "
                   "change")


# ---- 9. the six examples of DESIGN.md section 1 ----------------------------------------------

_ORDERS_Q = {"customer_email": "jonas.weber@posteo.de", "status": "open"}
_ORDERS_ONE = j({"orders": [{"order_id": "A-1029384", "placed": "2024-06-02",
                             "status": "awaiting_payment", "total": "€86.40"}], "count": 1})


@case
def design_seed_loop_search_orders() -> dict[str, Any]:
    e = Ep("corpus-design-seed-loop-search-orders", "design_seed",
           "I paid for order A-1029384 by bank transfer on Monday but it still says awaiting "
           "payment. Can you sort it out? Email jonas.weber@posteo.de.", "transaction",
           domain="retail", design_seed="search_orders")
    first = None
    for n in range(7):
        i = e.call("search_orders", _ORDERS_Q, _ORDERS_ONE, kind="read")
        if n == 2:
            first = i
        if n == 1:
            e.say("The order still shows awaiting_payment. Let me search the orders again.")
        if n == 4:
            e.say("Searching the customer's open orders once more.")
    assert first is not None
    return e.loop("exact_repeat", first,
                  "search_orders with the same query returns the same single order 7 times; "
                  "the payment is never looked up or matched")


@case
def design_seed_ok_search_orders() -> dict[str, Any]:
    e = Ep("corpus-design-seed-ok-search-orders", "design_seed",
           "What open orders do I have? Email jonas.weber@posteo.de.", "lookup",
           domain="retail", design_seed="search_orders")
    e.call("search_orders", _ORDERS_Q, _ORDERS_ONE, kind="read")
    e.say("You have one open order: A-1029384 from June 2 (€86.40), awaiting payment.")
    e.user("I just placed another one from my phone a minute ago. Can you look again?")
    e.call("search_orders", _ORDERS_Q,
           j({"orders": [{"order_id": "A-1029384", "placed": "2024-06-02",
                          "status": "awaiting_payment", "total": "€86.40"},
                         {"order_id": "A-1031177", "placed": "2024-06-11",
                          "status": "processing", "total": "€23.90"}], "count": 2}),
           kind="read")
    e.say("Now there are two: A-1029384 (€86.40, awaiting payment) and the new A-1031177 "
          "(€23.90, processing).")
    return e.legit("none",
                   "the same search runs twice, the second time at the user's request, and "
                   "returns a new order")


@case
def design_seed_loop_operation_status() -> dict[str, Any]:
    e = Ep("corpus-design-seed-loop-operation-status", "design_seed",
           "Create the search index 'products-v7' from the catalog snapshot. It should finish "
           "within 5 minutes; if it doesn't, stop and tell me.", "polling", domain="devops",
           design_seed="get_operation_status")
    w = e.call("create_index", {"name": "products-v7", "source": "catalog-snap-0611"},
               {"operation": "operations/idx-7f3e21", "state": "RUNNING"}, kind="write")
    started = e.steps[w]["t"]
    running = {"name": "operations/idx-7f3e21", "done": False,
               "metadata": {"state": "RUNNING", "progressPercent": 0}}
    first = None
    for n in range(24):
        i = e.call("get_operation_status", {"name": "operations/idx-7f3e21"}, running,
                   kind="poll", dt=e.rng.uniform(27.0, 33.0))
        if first is None and e.steps[i]["t"] > started + 300:
            first = i
        if n == 12:
            e.say("The index build is still running. Checking again.")
    assert first is not None
    return e.loop("poll_timeout", first,
                  "RUNNING at 0% is polled for 12 minutes although the task says 5 and asks to "
                  "stop and report; the agent never stops")


@case
def design_seed_ok_operation_status() -> dict[str, Any]:
    e = Ep("corpus-design-seed-ok-operation-status", "design_seed",
           "Create the search index 'products-v7' from the catalog snapshot and tell me when "
           "it's ready.", "polling", domain="devops", design_seed="get_operation_status")
    e.call("create_index", {"name": "products-v7", "source": "catalog-snap-0611"},
           {"operation": "operations/idx-7f3e21", "state": "RUNNING"}, kind="write")
    running = {"name": "operations/idx-7f3e21", "done": False,
               "metadata": {"state": "RUNNING"}}
    e.call("get_operation_status", {"name": "operations/idx-7f3e21"}, running, kind="poll",
           dt=30.0)
    e.call("get_operation_status", {"name": "operations/idx-7f3e21"}, running, kind="poll",
           dt=31.0)
    e.call("get_operation_status", {"name": "operations/idx-7f3e21"},
           {"name": "operations/idx-7f3e21", "done": True,
            "response": {"index": "products-v7", "documents": 1482093}}, kind="poll", dt=30.0)
    e.say("products-v7 is ready: 1,482,093 documents indexed.")
    return e.legit("poll_legit",
                   "RUNNING, RUNNING, DONE: a poll that waits while the state can still change "
                   "and ends")


_CUSTOMER = j({"id": "cus_88XkQ2", "name": "Harbor & Pine Studio", "email":
               "ops@harborpine.co", "plan": "business", "seats": 12})
_SUBS = j({"data": [{"id": "sub_1PbQ4r", "price": "business_monthly", "quantity": 12,
                     "status": "active", "current_period_end": "2024-06-30"}]})


@case
def design_seed_loop_oscillation() -> dict[str, Any]:
    e = Ep("corpus-design-seed-loop-oscillation", "design_seed",
           "Downgrade Harbor & Pine Studio (cus_88XkQ2) from Business to Team at the end of "
           "this billing period, keeping 12 seats.", "transaction", domain="finance",
           design_seed="oscillation")
    first = None
    for n in range(5):
        e.call("get_customer", {"customer_id": "cus_88XkQ2"}, _CUSTOMER, kind="read")
        i = e.call("list_subscriptions", {"customer_id": "cus_88XkQ2"}, _SUBS, kind="read")
        if n == 1:
            first = i
        if n == 2:
            e.say("The customer is on business with 12 seats. Let me re-check the customer and "
                  "subscription before changing anything.")
    assert first is not None
    return e.loop("oscillation", first,
                  "get_customer and list_subscriptions alternate 5 full cycles with the same "
                  "outputs (A→B→A→B...); the downgrade is never scheduled")


@case
def design_seed_ok_alternation() -> dict[str, Any]:
    e = Ep("corpus-design-seed-ok-alternation", "design_seed",
           "Where are my four orders from last week? Give me a carrier status for each.",
           "lookup", domain="retail", design_seed="oscillation")
    orders = [("#W6610032", "1Z999AA10123456784", "in transit, Memphis TN"),
              ("#W6610047", "9400111899223847361234", "out for delivery"),
              ("#W6610081", "1Z999AA10123456795", "delivered, front porch"),
              ("#W6610096", "9400111899223847369999", "label created, not yet scanned")]
    for oid, trk, where in orders:
        e.call("get_order_details", {"order_id": oid},
               {"order_id": oid, "status": "shipped", "tracking_id": trk}, kind="read")
        e.call("track_package", {"tracking_id": trk},
               {"tracking_id": trk, "status": where}, kind="read")
    e.say("#W6610032: in transit (Memphis). #W6610047: out for delivery. #W6610081: delivered "
          "to the front porch. #W6610096: label created, not scanned yet.")
    return e.legit("none",
                   "two tools alternate A→B→A→B, but each pair is about a different order with "
                   "new results")


_LOG_HEAD = ("2024-06-11 00:00:01.002 INFO  worker-1 starting, version 2.14.0\n"
             "2024-06-11 00:00:01.118 INFO  worker-1 connected to redis://cache:6379/0\n"
             "2024-06-11 00:00:01.240 INFO  worker-1 consuming queue 'emails'\n"
             "... (lines 4-200 of 5,184: INFO heartbeat / job done lines)")


@case
def design_seed_loop_file_offsets() -> dict[str, Any]:
    e = Ep("corpus-design-seed-loop-file-offsets", "design_seed",
           "The email worker crashed sometime this afternoon. Find the error in "
           "logs/worker-2024-06-11.log.", "other", domain="devops",
           design_seed="file_offsets")
    first = None
    for n in range(8):
        i = e.call("read_file", {"path": "logs/worker-2024-06-11.log", "offset": n % 2,
                                 "limit": 200}, _LOG_HEAD, kind="read")
        if n == 2:
            first = i
        if n == 1:
            e.say("These are startup lines. Let me read from a different offset.")
    assert first is not None
    return e.loop("param_jitter", first,
                  "offsets 0,1,0,1... of a 5,184-line log return the same first 200 lines 8 "
                  "times; the afternoon crash is thousands of lines further down")


@case
def design_seed_ok_file_offsets() -> dict[str, Any]:
    e = Ep("corpus-design-seed-ok-file-offsets", "design_seed",
           "What settings does config/legacy.ini set in its [smtp] section? It's a long file.",
           "lookup", domain="coding", design_seed="file_offsets")
    chunks = [
        (0, "[general]\nname = mailer\n... (lines 1-200: [general], [paths], [logging])"),
        (200, "[queue]\nbackend = redis\n... (lines 201-400: [queue], [retry])"),
        (400, "[templates]\ndir = /srv/tpl\n... (lines 401-600: [templates], [i18n])"),
        (600, "[smtp]\nhost = smtp.eu.mailgun.org\nport = 587\nstarttls = true\n"
              "user = postmaster@mg.tidewater.io\npassword_env = SMTP_PASSWORD\n"
              "timeout = 20\n\n[metrics]\n..."),
    ]
    for off, text in chunks:
        e.call("read_file", {"path": "config/legacy.ini", "offset": off, "limit": 200}, text,
               kind="read")
    e.say("[smtp] sets host = smtp.eu.mailgun.org, port = 587, starttls = true, user = "
          "postmaster@mg.tidewater.io, the password from $SMTP_PASSWORD, and timeout = 20.")
    return e.legit("none",
                   "the offset changes on every read and each chunk is new text; the section is "
                   "found at lines 601+")


_CREATE_ORDER = {"customer_id": "cus_51Hq7", "sku": "KB-ERGO-2", "quantity": 1,
                 "ship_to": "default"}


@case
def design_seed_loop_create_order_timeout() -> dict[str, Any]:
    e = Ep("corpus-design-seed-loop-create-order-timeout", "design_seed",
           "Order one ergonomic keyboard (KB-ERGO-2) for customer cus_51Hq7 to their default "
           "address.", "transaction", domain="retail", design_seed="create_order_timeout")
    first = None
    for n in range(6):
        i = e.call("create_order", _CREATE_ORDER,
                   "TimeoutError: order-service did not respond within 15s", kind="write",
                   status="timeout", took=15.0)
        if n == 1:
            first = i
        if n == 2:
            e.say("The order service is timing out. Trying again.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "create_order times out (UNKNOWN, not failed) and is retried 5 times without "
                  "looking up whether an order was created")


@case
def design_seed_ok_create_order_reconcile() -> dict[str, Any]:
    e = Ep("corpus-design-seed-ok-create-order-reconcile", "design_seed",
           "Order one ergonomic keyboard (KB-ERGO-2) for customer cus_51Hq7 to their default "
           "address.", "transaction", domain="retail", design_seed="create_order_timeout")
    e.call("create_order", _CREATE_ORDER, "TimeoutError: order-service did not respond within "
           "15s", kind="write", status="timeout", took=15.0)
    e.say("The request timed out, which doesn't mean it failed. Checking for a new order before "
          "doing anything else.")
    e.call("list_orders", {"customer_id": "cus_51Hq7", "created_after": "2024-06-11T13:58:00Z"},
           j([{"order_id": "ORD-77120945", "sku": "KB-ERGO-2", "quantity": 1,
               "status": "confirmed", "created_at": "2024-06-11T13:58:41Z"}]), kind="read")
    e.say("The order went through despite the timeout: ORD-77120945, one KB-ERGO-2, confirmed. "
          "No second order was placed.")
    return e.legit("write_retry_legit",
                   "the timed-out write is reconciled by a look-up that finds the order, so it "
                   "is not retried")


@case
def design_seed_loop_unrequested_repeat() -> dict[str, Any]:
    e = Ep("corpus-design-seed-loop-unrequested-repeat", "design_seed",
           "Buy one pack of A4 printer paper (500 sheets) for the office, the usual brand.",
           "transaction", domain="retail", design_seed="buy_another_one")
    e.call("search_catalog", {"query": "A4 paper 500 sheets Navigator"},
           j([{"sku": "NAV-A4-500", "name": "Navigator Universal A4 80gsm, 500 sheets",
               "price": "6.49"}]), kind="read")
    first = None
    for n, oid in enumerate(["PO-33810", "PO-33811", "PO-33812", "PO-33813", "PO-33814"]):
        i = e.call("create_order", {"sku": "NAV-A4-500", "quantity": 1,
                                    "deliver_to": "office-main"},
                   {"order_id": oid, "status": "confirmed", "total": "6.49"}, kind="write")
        if n == 1:
            first = i
        if n == 2:
            e.say("Placing the order for the printer paper.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "one pack was asked for; create_order succeeds 5 times in a row with new "
                  "order ids and no user request between")


@case
def design_seed_ok_buy_another() -> dict[str, Any]:
    e = Ep("corpus-design-seed-ok-buy-another", "design_seed",
           "Buy one pack of A4 printer paper (500 sheets) for the office, the usual brand.",
           "transaction", domain="retail", design_seed="buy_another_one")
    e.call("search_catalog", {"query": "A4 paper 500 sheets Navigator"},
           j([{"sku": "NAV-A4-500", "name": "Navigator Universal A4 80gsm, 500 sheets",
               "price": "6.49"}]), kind="read")
    args = {"sku": "NAV-A4-500", "quantity": 1, "deliver_to": "office-main"}
    e.call("create_order", args, {"order_id": "PO-33810", "status": "confirmed",
                                  "total": "6.49"}, kind="write")
    e.say("Ordered: PO-33810, one pack of Navigator A4 (500 sheets), €6.49, to the main "
          "office.")
    e.user("Actually we'll run out fast this month. Buy another one.")
    e.call("create_order", args, {"order_id": "PO-33829", "status": "confirmed",
                                  "total": "6.49"}, kind="write", intent="duplicate")
    e.say("Done: a second pack, PO-33829. Two packs are on the way.")
    return e.legit("write_retry_legit",
                   "'buy another one': the identical create_order is the user's new request and "
                   "gets a new order id")


# ---- 10. cursor pagination ---------------------------------------------------------------------

def _issue_page(first_number: int, n: int = 50) -> list[int]:
    return [first_number - 3 * k for k in range(n)]


@case
def cursor_loop_cursor_echoed() -> dict[str, Any]:
    e = Ep("corpus-cursor-loop-cursor-echoed", "cursor_pagination",
           "How many open issues labelled 'bug' does fieldway/app have?", "lookup",
           domain="coding")
    cur = "Y3Vyc29yOnYyOpK5MjAyNC0wNS0yOFQxMDoxNjo0MiswMjowMM4xP0-d"
    e.call("list_issues", {"repo": "fieldway/app", "state": "open", "labels": "bug",
                           "per_page": 50},
           j({"issues": _issue_page(4188), "next_cursor": cur}), kind="read")
    page2 = j({"issues": _issue_page(4037), "next_cursor": cur})
    first = None
    for n in range(7):
        i = e.call("list_issues", {"repo": "fieldway/app", "state": "open", "labels": "bug",
                                   "per_page": 50, "cursor": cur}, page2, kind="read")
        if n == 2:
            first = i
        if n == 3:
            e.say("Fetching the next page of issues.")
    assert first is not None
    return e.loop("cursor_stuck", first,
                  "the API echoes the cursor it was given, so the same second page comes back 7 "
                  "times; the agent keeps following it")


@case
def cursor_loop_stale_token() -> dict[str, Any]:
    e = Ep("corpus-cursor-loop-stale-token", "cursor_pagination",
           "How much data is under s3://tw-media-archive/2023/ in total?", "lookup",
           domain="devops")
    t1 = "1Jq0dK3pWv2Z8rS5hX9gYt4uB7nMcE6aLf2oQ1iVbN3kR8sT0wY5xU4zP9lH2jG6"
    t2 = "1Kx7mN2bV5cX8zL1kJ4hG7fD0sA3qW6eR9tY2uI5oP8aS1dF4gH7jK0lZ3xC6vB"
    e.call("list_objects_v2", {"Bucket": "tw-media-archive", "Prefix": "2023/",
                               "MaxKeys": 1000},
           j({"KeyCount": 1000, "TotalSizeOnPage": 48213441020, "IsTruncated": True,
              "NextContinuationToken": t1, "FirstKey": "2023/01/01/cam01-000001.mp4"}))
    page2 = j({"KeyCount": 1000, "TotalSizeOnPage": 47994120311, "IsTruncated": True,
               "NextContinuationToken": t2, "FirstKey": "2023/02/14/cam03-004410.mp4"})
    first = None
    for n in range(7):
        i = e.call("list_objects_v2", {"Bucket": "tw-media-archive", "Prefix": "2023/",
                                       "MaxKeys": 1000, "ContinuationToken": t1}, page2)
        if n == 2:
            first = i
        if n == 1:
            e.say("Page 2 totals about 48 GB. Continuing with the next page.")
    assert first is not None
    return e.loop("cursor_stuck", first,
                  "the agent keeps sending the first continuation token instead of the new one "
                  "and gets page 2 seven times")


@case
def cursor_loop_offset_not_advanced() -> dict[str, Any]:
    e = Ep("corpus-cursor-loop-offset-not-advanced", "cursor_pagination",
           "List every admin login to the billing console in May from the audit log.", "lookup",
           domain="finance")
    base = {"action": "admin.login", "resource": "billing-console", "from": "2024-05-01",
            "to": "2024-05-31", "limit": 100}
    e.call("get_audit_log", dict(base, offset=0),
           j({"entries": "entries 1-100 (2024-05-01 .. 2024-05-09)", "total": 412,
              "next_offset": 100}), kind="read")
    page = j({"entries": "entries 101-200 (2024-05-09 .. 2024-05-16)", "total": 412,
              "next_offset": 200})
    first = None
    for n in range(7):
        i = e.call("get_audit_log", dict(base, offset=100), page, kind="read")
        if n == 2:
            first = i
        if n == 1:
            e.say("Got entries 101-200. Requesting the next batch.")
    assert first is not None
    return e.loop("cursor_stuck", first,
                  "offset stays at 100 although each response says next_offset 200; the same "
                  "entries 101-200 come back 7 times")


@case
def cursor_loop_graphql_end_cursor() -> dict[str, Any]:
    e = Ep("corpus-cursor-loop-graphql-end-cursor", "cursor_pagination",
           "List the commits on main of fieldway/api since June 1 whose message mentions "
           "'migration'.", "research", domain="coding")
    q = ("query($after: String) { repository(owner: \"fieldway\", name: \"api\") { ref(qualifiedName"
         ": \"main\") { target { ... on Commit { history(first: 100, since: "
         "\"2024-06-01T00:00:00Z\", after: $after) { pageInfo { hasNextPage endCursor } nodes "
         "{ oid messageHeadline } } } } } } }")
    c1 = "f3a9c1e7b2d4 99"
    e.call("fetchCommits", {"query": q, "variables": {"after": None}},
           j({"pageInfo": {"hasNextPage": True, "endCursor": c1},
              "nodes": "100 commits, 2024-06-11 .. 2024-06-06 (2 mention 'migration')"}))
    page = j({"pageInfo": {"hasNextPage": True, "endCursor": c1},
              "nodes": "100 commits, 2024-06-06 .. 2024-06-03 (1 mentions 'migration')"})
    first = None
    for n in range(8):
        i = e.call("fetchCommits", {"query": q, "variables": {"after": c1}}, page)
        if n == 2:
            first = i
        if n == 4:
            e.say("hasNextPage is still true; fetching the next page.")
    assert first is not None
    return e.loop("cursor_stuck", first,
                  "endCursor never changes and hasNextPage stays true; the same page is fetched "
                  "8 times with the same cursor")


@case
def cursor_ok_long_pagination() -> dict[str, Any]:
    e = Ep("corpus-cursor-ok-long-pagination", "cursor_pagination",
           "Total up all card refunds we issued in May.", "lookup", domain="finance")
    cursor = None
    total_cents = 0
    for page in range(10):
        nxt = None if page == 9 else f"re_cur_{page + 1:02d}{'k' * 3}{page * 7 + 11:04d}"
        amount = 184_210 + 9_337 * page - (page % 3) * 12_118
        total_cents += amount
        args: dict[str, Any] = {"created_gte": "2024-05-01", "created_lt": "2024-06-01",
                                "limit": 100}
        if cursor:
            args["starting_after"] = cursor
        e.call("list_refunds", args,
               j({"data": f"100 refunds (page {page + 1})", "page_sum_cents": amount,
                  "has_more": nxt is not None, "last_id": nxt}), kind="read")
        cursor = nxt
    e.say(f"May card refunds: 1,000 refunds totalling ${total_cents / 100:,.2f} over 10 pages.")
    return e.legit("none",
                   "ten pages, each with a new cursor and new refunds, ending with has_more "
                   "false")


@case
def cursor_ok_s3_pages() -> dict[str, Any]:
    e = Ep("corpus-cursor-ok-s3-pages", "cursor_pagination",
           "How much data is under s3://tw-media-archive/2023/ in total?", "lookup",
           domain="devops")
    token = None
    total = 0
    for page in range(7):
        size = 48_213_441_020 - page * 911_304_117
        total += size
        nxt = None if page == 6 else f"1Pg{page + 2}" + "".join(e.rng.choices(_ID_CHARS, k=40))
        args: dict[str, Any] = {"Bucket": "tw-media-archive", "Prefix": "2023/",
                                "MaxKeys": 1000}
        if token:
            args["ContinuationToken"] = token
        out = {"KeyCount": 1000 if nxt else 412, "TotalSizeOnPage": size,
               "IsTruncated": nxt is not None,
               "FirstKey": f"2023/{page * 2 + 1:02d}/01/cam01-{page * 1000 + 1:06d}.mp4"}
        if nxt:
            out["NextContinuationToken"] = nxt
        e.call("list_objects_v2", args, out)
        token = nxt
    e.say(f"s3://tw-media-archive/2023/ holds 6,412 objects, {total / 1e12:.2f} TB in total.")
    return e.legit("none",
                   "seven pages followed with a new continuation token each time until "
                   "IsTruncated is false")


@case
def cursor_ok_search_pages() -> dict[str, Any]:
    e = Ep("corpus-cursor-ok-search-pages", "cursor_pagination",
           "Find every support conversation from June that mentions 'invoice PDF blank' and "
           "give me the customer names.", "research", domain="support")
    names = [["Orchard Labs", "Kiln & Co"], ["Brightline Dental", "Marlow Freight"],
             ["Pinecrest HOA"], ["Aster Legal", "Nordlys AS"], ["Tidepool Games"], []]
    for n, batch in enumerate(names, 1):
        e.call("search_conversations", {"query": "\"invoice PDF blank\"", "month": "2024-06",
                                        "page": n, "per_page": 20},
               j({"page": n, "results": [{"customer": c, "conversation_id": f"cv_{n}{k}"}
                                         for k, c in enumerate(batch)],
                  "has_next": n < len(names)}), kind="read")
    flat = [c for batch in names for c in batch]
    e.say(f"{len(flat)} customers reported blank invoice PDFs in June: " + ", ".join(flat) + ".")
    return e.legit("none",
                   "pages 1-6 of a search, each with different results, until the last page is "
                   "empty")


@case
def cursor_ok_graphql_pages() -> dict[str, Any]:
    e = Ep("corpus-cursor-ok-graphql-pages", "cursor_pagination",
           "List the commits on main of fieldway/api since June 1 whose message mentions "
           "'migration'.", "research", domain="coding")
    q = ("query($after: String) { repository(owner: \"fieldway\", name: \"api\") { ref(qualifiedName"
         ": \"main\") { target { ... on Commit { history(first: 100, since: "
         "\"2024-06-01T00:00:00Z\", after: $after) { pageInfo { hasNextPage endCursor } nodes "
         "{ oid messageHeadline } } } } } } }")
    after = None
    found = [["9f1c2e0 Add migration for invoice_lines.tax_rate",
              "41ab77d Fix migration ordering on fresh DBs"],
             ["c02e9b1 Squash June migrations"], [], ["7d3f0aa Revert 'Add migration lock'"]]
    for n, hits in enumerate(found):
        end = f"f3a9c1e7b2d4 {99 + 100 * n}"
        more = n < len(found) - 1
        e.call("fetchCommits", {"query": q, "variables": {"after": after}},
               j({"pageInfo": {"hasNextPage": more, "endCursor": end},
                  "nodes": f"{100 if more else 37} commits", "matching": hits}))
        after = end
    e.say("Commits on main since June 1 mentioning 'migration': 9f1c2e0 (tax_rate migration), "
          "41ab77d (migration ordering), c02e9b1 (squash June migrations), 7d3f0aa (revert "
          "migration lock).")
    return e.legit("none",
                   "four GraphQL pages with an advancing endCursor until hasNextPage is false")


# ---- 11. oscillation between two reads --------------------------------------------------------

@case
def read_oscillation_loop_inventory_warehouse() -> dict[str, Any]:
    e = Ep("corpus-read-oscillation-loop-inventory-warehouse", "read_oscillation",
           "Can we ship 40 units of SKU-2231 from the Dallas warehouse today? The customer needs "
           "an answer in the next few minutes.", "lookup", domain="retail")
    inv = j({"sku": "SKU-2231", "warehouse": "DAL2", "on_hand": 31, "reserved": 3,
             "available": 28})
    wh = j({"warehouse": "DAL2", "city": "Dallas, TX", "same_day_cutoff": "15:00 CT",
            "now": "13:42 CT", "transfer_in_transit": []})
    first = None
    for n in range(5):
        e.call("get_inventory", {"sku": "SKU-2231", "warehouse": "DAL2"}, inv, kind="read")
        i = e.call("get_warehouse", {"warehouse": "DAL2"}, wh, kind="read")
        if n == 1:
            first = i
        if n == 2:
            e.say("Available is 28 and the cutoff is 15:00. Let me double-check inventory and "
                  "the warehouse details.")
    assert first is not None
    return e.loop("oscillation", first,
                  "inventory and warehouse are read alternately for 5 full cycles with the same "
                  "outputs; the answer (no, only 28 available) never comes")


_DESCRIBE = (
    "Name:         image-resizer-5f7d9c8b6-lq2wz\nNamespace:    media\nStatus:       Running\n"
    "Containers:\n  resizer:\n    Ready:          False\n    Restart Count:  0\n"
    "Events:\n  Warning  Unhealthy  3m (x41 over 23m)  kubelet  Readiness probe failed: HTTP "
    "probe failed with statuscode: 503\n"
)
_LOGS = (
    "2024-06-11T12:01:14Z INFO  server listening on :8080\n"
    "2024-06-11T12:01:14Z WARN  model file /models/resizer.onnx not found; readiness = 503\n"
    "2024-06-11T12:01:44Z WARN  model file /models/resizer.onnx not found; readiness = 503\n"
)


@case
def read_oscillation_loop_describe_logs() -> dict[str, Any]:
    e = Ep("corpus-read-oscillation-loop-describe-logs", "read_oscillation",
           "Why is the image-resizer pod in the media namespace never becoming ready?",
           "other", domain="devops")
    first = None
    for n in range(4):
        e.call("run_shell", {"command": "kubectl describe pod image-resizer-5f7d9c8b6-lq2wz "
                                        "-n media"}, _DESCRIBE)
        i = e.call("run_shell", {"command": "kubectl logs image-resizer-5f7d9c8b6-lq2wz -n media "
                                            "--tail=3"}, _LOGS)
        if n == 1:
            first = i
        if n == 1:
            e.say("The readiness probe returns 503. Let me look at the pod description and logs "
                  "again.")
    assert first is not None
    return e.loop("oscillation", first,
                  "describe and logs alternate 4 full cycles with the same outputs; the cause "
                  "(missing /models/resizer.onnx) was in the first logs")


_SETTINGS_PY = ("from app.models import DEFAULT_CURRENCY\n\nDATABASE_URL = "
                "os.environ['DATABASE_URL']\nCURRENCY = DEFAULT_CURRENCY\n")
_MODELS_PY = ("from app.settings import DATABASE_URL\n\nDEFAULT_CURRENCY = 'EUR'\n\n"
              "engine = create_engine(DATABASE_URL)\n")


@case
def read_oscillation_loop_two_files() -> dict[str, Any]:
    e = Ep("corpus-read-oscillation-loop-two-files", "read_oscillation",
           "Importing app.settings fails with 'ImportError: cannot import name DEFAULT_CURRENCY "
           "from partially initialized module app.models'. Fix the circular import.", "coding",
           domain="coding")
    first = None
    for n in range(5):
        e.call("read_file", {"path": "app/settings.py"}, _SETTINGS_PY, kind="read")
        i = e.call("read_file", {"path": "app/models.py"}, _MODELS_PY, kind="read")
        if n == 1:
            first = i
        if n == 2:
            e.say("settings imports models and models imports settings. Let me look at both "
                  "files again.")
    assert first is not None
    return e.loop("oscillation", first,
                  "the two files of the cycle are read alternately 5 times each with the same "
                  "content; the agent names the cycle but never edits")


@case
def read_oscillation_loop_flight_gate() -> dict[str, Any]:
    e = Ep("corpus-read-oscillation-loop-flight-gate", "read_oscillation",
           "Is my flight HAT318 to Austin delayed, and which gate should I go to?", "lookup",
           domain="airline")
    status = j({"flightNumber": "HAT318", "status": "DELAYED", "scheduledDeparture": "17:55",
                "estimatedDeparture": "18:40", "reason": "late inbound aircraft"})
    gate = j({"flightNumber": "HAT318", "terminal": "B", "gate": "B22", "boarding": "18:10"})
    first = None
    for n in range(5):
        e.call("getFlightStatus", {"flightNumber": "HAT318", "date": "2024-06-11"}, status)
        i = e.call("getGateInfo", {"flightNumber": "HAT318", "date": "2024-06-11"}, gate)
        if n == 1:
            first = i
        if n == 3:
            e.say("Confirming the delay and gate information.")
    assert first is not None
    return e.loop("oscillation", first,
                  "flight status and gate are read alternately 5 full cycles, unchanged; the "
                  "user is never told (delayed to 18:40, gate B22)")


@case
def read_oscillation_ok_blue_green() -> dict[str, Any]:
    e = Ep("corpus-read-oscillation-ok-blue-green", "read_oscillation",
           "We're shifting traffic from blue to green for checkout (10% → 100% over about 6 "
           "minutes). Compare both dashboards as it goes and tell me if green is healthy.",
           "polling", domain="devops")
    steps = [(10, "0.31", "0.29", 212, 188), (25, "0.30", "0.34", 207, 195),
             (50, "0.33", "0.31", 210, 199), (75, "0.29", "0.36", 214, 203),
             (90, "0.32", "0.33", 209, 198), (100, "-", "0.30", 0, 197)]
    for n, (pct, err_b, err_g, p99_b, p99_g) in enumerate(steps):
        e.call("getDashboard", {"service": "checkout", "env": "blue"},
               {"env": "blue", "traffic_pct": 100 - pct, "error_rate_pct": err_b,
                "p99_ms": p99_b}, dt=None if n == 0 else e.rng.uniform(55.0, 65.0))
        e.call("getDashboard", {"service": "checkout", "env": "green"},
               {"env": "green", "traffic_pct": pct, "error_rate_pct": err_g, "p99_ms": p99_g})
    e.say("Green is healthy: at 100% traffic its error rate is 0.30% and p99 197 ms, in line "
          "with blue before the shift (≈0.31%, ≈210 ms). No regressions during the ramp.")
    return e.legit("none",
                   "two dashboards read alternately during a traffic shift; every read shows new "
                   "numbers and the comparison ends with the ramp")


@case
def read_oscillation_ok_exchange_spread() -> dict[str, Any]:
    e = Ep("corpus-read-oscillation-ok-exchange-spread", "read_oscillation",
           "Tell me when the ETH-USD price gap between Kraken and Coinbase goes above $5.",
           "polling", domain="finance")
    pairs = [("3521.40", "3519.85"), ("3523.10", "3520.02"), ("3526.75", "3522.40"),
             ("3524.90", "3521.30"), ("3529.60", "3524.15")]
    for n, (kr, cb) in enumerate(pairs):
        e.call("get_ticker", {"exchange": "kraken", "pair": "ETH-USD"},
               {"exchange": "kraken", "last": kr}, dt=None if n == 0 else e.rng.uniform(20, 25))
        e.call("get_ticker", {"exchange": "coinbase", "pair": "ETH-USD"},
               {"exchange": "coinbase", "last": cb})
    e.say("The gap is now $5.45: Kraken $3,529.60 vs Coinbase $3,524.15.")
    return e.legit("none",
                   "two tickers read alternately, every price new, until the spread condition "
                   "is met")


@case
def read_oscillation_ok_incident_logs() -> dict[str, Any]:
    e = Ep("corpus-read-oscillation-ok-incident-logs", "read_oscillation",
           "We just failed over the primary DB. Watch the api and db-proxy logs and tell me "
           "when both are clean again.", "polling", domain="devops")
    api = ["12:40:02 ERROR pq: the database system is in recovery mode (x214)",
           "12:40:33 ERROR pq: the database system is in recovery mode (x37)",
           "12:41:04 WARN  retrying connection (x5)\n12:41:05 INFO  pool re-established",
           "12:41:35 INFO  GET /v1/orders 200 (x612)"]
    proxy = ["12:40:03 WARN  backend db-primary-a unreachable; promoting db-primary-b",
             "12:40:34 INFO  db-primary-b promoted; draining stale connections (41)",
             "12:41:05 INFO  stale connections drained",
             "12:41:36 INFO  healthy: 1 primary, 2 replicas"]
    for n, (a, p) in enumerate(zip(api, proxy, strict=True)):
        e.call("tail_log", {"service": "api", "lines": 50}, a, kind="read",
               dt=None if n == 0 else e.rng.uniform(26, 30))
        e.call("tail_log", {"service": "db-proxy", "lines": 50}, p, kind="read")
    e.say("Both are clean as of 12:41:36: db-proxy reports db-primary-b healthy with 2 "
          "replicas, and the api is serving 200s with no database errors since 12:41:05.")
    return e.legit("none",
                   "two logs read alternately during a failover; each read shows new lines "
                   "until recovery is confirmed")


@case
def read_oscillation_ok_queue_drain() -> dict[str, Any]:
    e = Ep("corpus-read-oscillation-ok-queue-drain", "read_oscillation",
           "I restarted the order consumers. Keep an eye on the orders queue and its "
           "retry queue and tell me when both are drained.", "polling", domain="devops")
    depths = [(18240, 312), (12031, 298), (6220, 171), (1408, 64), (0, 0)]
    for n, (main, dlq) in enumerate(depths):
        e.call("get_queue_depth", {"queue": "orders"},
               {"queue": "orders", "messages": main},
               dt=None if n == 0 else e.rng.uniform(40, 50))
        e.call("get_queue_depth", {"queue": "orders-retry"},
               {"queue": "orders-retry", "messages": dlq})
    e.say("Both queues are drained: orders went from 18,240 to 0 and orders-retry from 312 to 0 "
          "in about 3 minutes.")
    return e.legit("none",
                   "two queue depths read alternately while both fall on every read; ends when "
                   "both reach zero")


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


CASE_MODULES = ("cases_information", "cases_writes_polls", "cases_runs_messages")
"""The modules beside this file that hold detection v3's classes (issue 16), in order."""


def builders() -> list[Any]:
    """Every episode builder: this file's, then each case module's."""
    return [*CASES, *(fn for name in CASE_MODULES for fn in import_module(name).CASES)]


def build() -> list[dict[str, Any]]:
    episodes = [fn() for fn in builders()]
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
