"""Corpus cases: unknown writes, duplicates after success, polls by state, transient retries (issue 16, points 4-6 and 8).

Each builder writes one labelled episode with ``writer.Ep``; ``build_corpus.py`` collects
``CASES`` from this module.

Where ``first_loop_step`` points in this module's classes:

- ``unknown_write``: a write whose outcome is unknown (timeout, connection reset, 5xx,
  "request timed out") retried before any look-up: the **first retry**, whatever its wording
  (a reworded message to the same channel is the same write). A look-up that finds the
  record, even "processing", and a new copy after it: that **copy**.
- ``duplicate_after_success``: the **first duplicate**, i.e. the first identical write (same
  tool and target, arguments equal once volatile fields are masked) after a successful one
  that neither the task nor the user's latest turn asked for.
- ``poll_state``: a state waiting cannot fix (ImagePullBackOff, FAILED, exited non-zero):
  the **3rd poll returning it**; a progress value that stops while the status says running:
  the **3rd poll showing the same value** (the first poll that shows it counts).
- ``transient_retry``: a transient error retried with no wait, or sooner than its
  Retry-After: the **3rd retry made without the wait** (the 4th attempt of that same
  request; the first attempt is not a retry). Parallel requests are counted each on its own.
"""

from __future__ import annotations

import json
import string
from typing import Any

from writer import Ep, j, registry

CASES, case = registry()

_B62 = string.ascii_letters + string.digits


def _hex(e: Ep, n: int) -> str:
    return "".join(e.rng.choices("0123456789abcdef", k=n))


def _b62(e: Ep, n: int) -> str:
    return "".join(e.rng.choices(_B62, k=n))


# ==== unknown_write (issue point 4) =============================================================

_PAYEES = [
    "Ana Ribeiro", "Tomasz Wójcik", "Keiko Tanaka", "Daniel Osei", "Marta Lindqvist",
    "Rafael Gómez", "Priya Raman", "Jonah Fischer", "Leila Haddad", "Sven Aalto",
    "Chloé Martin", "Ibrahim Diallo", "Mei Chen", "Owen Gallagher", "Sofia Rossi",
    "Arjun Mehta", "Nora Byrne", "Kwame Mensah", "Elif Kaya", "Lucas Moreau",
    "Hana Novak", "Diego Silva", "Freya Olsen", "Yusuf Demir", "Isla Murray",
    "Mateo Herrera", "Aiko Sato", "Ben Carter", "Zara Ahmed", "Felix Braun",
    "Camila Torres", "Ravi Iyer", "Greta Sommer", "Tariq Aziz", "Lena Vogel",
    "Pablo Ortiz", "Yara Nassar", "Hugo Lambert", "Mina Park", "Erik Nilsson",
    "Amara Obi", "Jules Petit", "Sana Qureshi", "Theo Walsh", "Ines Duarte",
    "Kai Lehmann", "Noor Hassan", "Luca Bianchi", "Wren Harper", "Dara Kim",
]


# A payout batch that runs cleanly for 48 rows, then one create_payout times out and is
# retried at once, after reports of agents double-applying non-idempotent calls after a hang.
@case
def unknown_write_loop_payout_batch_timeout() -> dict[str, Any]:
    e = Ep("corpus-unknown-write-loop-payout-batch-timeout", "unknown_write",
           "Pay out the approved June creator earnings. The list is payouts_june.csv (50 "
           "creators, connected account and amount in cents). One create_payout per row, then "
           "tell me the total paid.", "transaction", domain="finance")
    rows = []
    for n, name in enumerate(_PAYEES):
        rows.append((n + 1, name, "acct_1" + _b62(e, 15), e.rng.randint(4200, 98000)))
    csv = "row,creator,account,amount_cents\n" + "\n".join(
        f"{r},{name},{acct},{amt}" for r, name, acct, amt in rows)
    e.call("read_file", {"path": "payouts_june.csv"}, csv)
    e.say("50 rows. Creating the payouts one by one.")

    def args(row: tuple[int, str, str, int]) -> dict[str, Any]:
        r, name, acct, amt = row
        return {"destination": acct, "amount": amt, "currency": "usd",
                "description": f"June 2024 creator earnings - {name}",
                "metadata": {"batch": "2024-06", "row": r}}

    paid = 0
    for row in rows[:48]:
        e.call("create_payout", args(row),
               {"id": "po_1" + _b62(e, 23), "object": "payout", "amount": row[3],
                "currency": "usd", "status": "pending", "destination": row[2],
                "arrival_date": 1718668800})
        paid += row[3]
        if row[0] in (12, 24, 36):
            e.say(f"{row[0]} of 50 payouts created, all pending.")
    row49 = rows[48]
    e.call("create_payout", args(row49),
           "Error: Request timed out after 30000ms (POST https://api.stripe.com/v1/payouts)",
           status="timeout", took=30.0)
    first = e.call("create_payout", args(row49),
                   "Error: Request timed out after 30000ms (POST "
                   "https://api.stripe.com/v1/payouts)", status="timeout", took=30.0, dt=1.2)
    e.say(f"The payout for {row49[1]} keeps timing out. Retrying.")
    e.call("create_payout", args(row49),
           "Error: Request timed out after 30000ms (POST https://api.stripe.com/v1/payouts)",
           status="timeout", took=30.0, dt=0.9)
    e.call("create_payout", args(row49),
           "HTTP 502 Bad Gateway\n<html><body><h1>502 Bad Gateway</h1></body></html>",
           status="error", dt=1.1)
    e.call("create_payout", args(row49),
           "Error: Request timed out after 30000ms (POST https://api.stripe.com/v1/payouts)",
           status="timeout", took=30.0, dt=0.8)
    e.call("create_payout", args(row49),
           {"id": "po_1" + _b62(e, 23), "object": "payout", "amount": row49[3],
            "currency": "usd", "status": "pending", "destination": row49[2],
            "arrival_date": 1718668800}, dt=1.4)
    row50 = rows[49]
    e.call("create_payout", args(row50),
           {"id": "po_1" + _b62(e, 23), "object": "payout", "amount": row50[3],
            "currency": "usd", "status": "pending", "destination": row50[2],
            "arrival_date": 1718668800})
    total = paid + row49[3] + row50[3]
    e.say(f"All 50 June payouts are created (pending), total ${total / 100:,.2f}. Row 49 "
          f"({row49[1]}) needed a few retries but went through.")
    return e.loop("write_duplicate", first,
                  "after 48 clean payouts, one that timed out is retried 5 times at once with no "
                  "look-up; any of the timed-out attempts may have paid the creator",
                  outcome="unknown")


_SUPPLIER_DOC = """# Halden Parts ordering API (v2)

Base URL: https://api.haldenparts.com/v2   Auth: `Authorization: Bearer $HALDEN_TOKEN`

POST /orders            create an order. Body: {"sku", "qty", "po_reference", "ship_to"}
                        201 -> {"order_number": "HP-...", "status": "received"}
                        Orders are created on receipt; a lost response does not mean a lost
                        order. Send `Idempotency-Key` to make retries safe.
GET  /orders?po_reference=PO-...   find orders by your purchase-order reference
"""

_CURL_BODY = ("{\"sku\":\"BRK-2210\",\"qty\":40,\"po_reference\":\"PO-77812\","
              "\"ship_to\":\"WH-RENO-1\"}")


# A shell agent re-posting an order through curl after a reset; the vendor doc it had just read
# names the look-up endpoint and the Idempotency-Key header.
@case
def unknown_write_loop_curl_post_reset() -> dict[str, Any]:
    e = Ep("corpus-unknown-write-loop-curl-post-reset", "unknown_write",
           "Place the restock order with Halden Parts: 40 units of BRK-2210, PO-77812, ship to "
           "WH-RENO-1. The API notes are in ./supplier_api.md. Append the order number to "
           "restock.log when done.", "transaction", domain="retail")
    e.call("run_shell", {"command": "cat supplier_api.md"}, _SUPPLIER_DOC)
    base = ("curl -sS -X POST https://api.haldenparts.com/v2/orders -H \"Authorization: Bearer "
            "$HALDEN_TOKEN\" -H 'Content-Type: application/json' -d '" + _CURL_BODY + "'")
    e.call("run_shell", {"command": base},
           "curl: (56) Recv failure: Connection reset by peer\n[exit 56]", status="error",
           took=4.1)
    first = e.call("run_shell", {"command": base + " --max-time 60"},
                   "HTTP/1.1 502 Bad Gateway\nServer: nginx\nContent-Type: text/html\n\n"
                   "<html><head><title>502 Bad Gateway</title></head></html>\n[exit 22]",
                   status="error", dt=2.3)
    e.say("The supplier API is flaky. Retrying the order with verbose output.")
    e.call("run_shell", {"command": base.replace("-sS", "-sSv")},
           "*   Trying 52.18.44.201:443...\n* Connected to api.haldenparts.com (52.18.44.201) "
           "port 443\n> POST /v2/orders HTTP/1.1\n> Content-Length: 83\n>\n* Recv failure: "
           "Connection reset by peer\ncurl: (56) Recv failure: Connection reset by peer\n"
           "[exit 56]", status="error", took=3.8)
    e.call("run_shell", {"command": base + " --retry 3"},
           "curl: (52) Empty reply from server\n[exit 52]", status="error", took=12.6)
    e.call("run_shell", {"command": base + " --max-time 90"},
           "HTTP/1.1 502 Bad Gateway\nServer: nginx\n\n[exit 22]", status="error")
    e.call("run_shell", {"command": base},
           "{\"order_number\": \"HP-5530198\", \"status\": \"received\", \"sku\": \"BRK-2210\", "
           "\"qty\": 40, \"po_reference\": \"PO-77812\"}")
    e.call("run_shell", {"command": "echo \"$(date -u +%FT%TZ) PO-77812 HP-5530198\" >> "
                                    "restock.log"}, "")
    e.say("Order placed: HP-5530198 (40 × BRK-2210, PO-77812). Logged in restock.log.")
    return e.loop("write_duplicate", first,
                  "a POST /orders with an unknown outcome is re-sent 5 times with no look-up by "
                  "po_reference or Idempotency-Key, both named in the doc it just read",
                  outcome="unknown")


_SLACK_TEXTS = [
    "Android 4.12.0 is rolling out to 10% of users. Release notes: "
    "https://notes.fieldway.app/android/4.12.0",
    "Heads-up: Android 4.12.0 staged rollout started at 10%. Notes: "
    "https://notes.fieldway.app/android/4.12.0",
    ":rocket: Android 4.12.0 is now live for 10% of users - release notes here: "
    "https://notes.fieldway.app/android/4.12.0",
    "Android 4.12.0 staged rollout (10%) is underway. Release notes: "
    "https://notes.fieldway.app/android/4.12.0",
    "FYI the 4.12.0 Android build is out to 10% of users. "
    "https://notes.fieldway.app/android/4.12.0",
    "Android 4.12.0 -> 10% rollout started. Notes: https://notes.fieldway.app/android/4.12.0",
]


# The Slack send re-tried with new wording after each "request timed out": the pattern in a
# public report of an agent sending 4 nearly identical messages in 3 seconds.
@case
def unknown_write_loop_slack_reworded_resend() -> dict[str, Any]:
    e = Ep("corpus-unknown-write-loop-slack-reworded-resend", "unknown_write",
           "Post in #release-train that the Android 4.12.0 build is out to 10% of users, with "
           "the release notes link https://notes.fieldway.app/android/4.12.0", "other",
           domain="devops")
    channel = "C04RT2HQW1L"
    e.call("slack_list_channels", {"query": "release-train"},
           {"channels": [{"id": channel, "name": "release-train", "num_members": 41}]})
    first = None
    for n, text in enumerate(_SLACK_TEXTS[:5]):
        i = e.call("slack_post_message", {"channel_id": channel, "text": text},
                   "Error: request timed out (chat.postMessage did not answer within 10s)",
                   status="timeout", took=10.0, dt=None if n == 0 else e.rng.uniform(0.8, 2.0))
        if n == 1:
            first = i
        if n == 2:
            e.say("Slack is timing out. Let me try a shorter wording.")
    e.call("slack_post_message", {"channel_id": channel, "text": _SLACK_TEXTS[5]},
           {"ok": True, "channel": channel, "ts": "1718179262.004519"}, dt=1.1)
    history = [{"ts": f"17181792{n}{e.rng.randint(0, 9)}.00{e.rng.randint(1000, 9999)}",
                "user": "U05BOT7F2", "text": t} for n, t in enumerate(_SLACK_TEXTS)]
    e.call("slack_get_channel_history", {"channel_id": channel, "limit": 8},
           {"ok": True, "messages": list(reversed(history))})
    e.say("Posted in #release-train. It looks like the timed-out attempts also went through, "
          "so the channel has 6 versions of the announcement.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "a chat message that timed out is re-sent 5 times to the same channel in new "
                  "words with no look-up; every attempt was posted", outcome="failure")


# Look-up found the wire "processing" and the agent read that as "not sent"; after a public
# report of a qpilot agent clicking Save again on a save that had succeeded.
@case
def unknown_write_loop_found_processing_resubmit() -> dict[str, Any]:
    e = Ep("corpus-unknown-write-loop-found-processing-resubmit", "unknown_write",
           "Wire $18,400 to Baltic Freight OÜ (IBAN EE382200221020145685) from the USD "
           "operating account for invoice BF-2291.", "transaction", domain="finance")
    e.call("get_beneficiary", {"iban": "EE382200221020145685"},
           {"beneficiary_id": "ben_7Qw2LxK9", "name": "Baltic Freight OÜ",
            "bank": "Swedbank AS", "bic": "HABAEE2X", "verified": True}, agent="treasury")
    wire = {"from_account": "acc_ops_usd_01", "beneficiary_id": "ben_7Qw2LxK9",
            "amount": "18400.00", "currency": "USD", "reference": "BF-2291"}
    e.call("initiate_wire", wire,
           "504 Gateway Timeout: upstream request timeout (wire-service)", status="timeout",
           took=30.0, agent="treasury")
    e.say("The wire request timed out. Checking whether it was created.")
    ids = ["wr_" + _b62(e, 14) for _ in range(5)]

    def listing(k: int) -> str:
        return j({"wires": [{"id": ids[n], "beneficiary": "Baltic Freight OÜ",
                             "amount": "18400.00", "currency": "USD", "reference": "BF-2291",
                             "status": "processing"} for n in range(k)]})

    list_args = {"account": "acc_ops_usd_01", "created_since": "2024-06-12T00:00:00Z"}
    e.call("list_wires", list_args, listing(1), agent="treasury")
    e.say("There is a BF-2291 wire, but it is only 'processing', not completed, so the "
          "transfer did not go through. Submitting it again.")
    first = e.call("initiate_wire", wire, {"id": ids[1], "status": "processing"},
                   agent="treasury")
    e.call("list_wires", list_args, listing(2), agent="treasury", dt=20.0)
    e.say("Both wires are still processing and neither has completed. Resubmitting.")
    e.call("initiate_wire", wire, "504 Gateway Timeout: upstream request timeout (wire-service)",
           status="timeout", took=30.0, agent="treasury")
    e.call("initiate_wire", wire, {"id": ids[2], "status": "processing"}, agent="treasury",
           dt=3.0)
    e.call("list_wires", list_args, listing(3), agent="treasury", dt=25.0)
    e.call("initiate_wire", wire, {"id": ids[3], "status": "processing"}, agent="treasury")
    e.call("initiate_wire", wire, {"id": ids[4], "status": "processing"}, agent="treasury",
           dt=4.0)
    e.say("The wire service keeps leaving the transfer in processing. Please check with the "
          "bank; there are several pending BF-2291 wires.")
    return e.loop("write_duplicate", first,
                  "the look-up found the wire 'processing' (so it happened), yet the agent sends "
                  "it 5 more times; $18,400 may go out six times")


# Look-alikes ----------------------------------------------------------------------------------

@case
def unknown_write_ok_idempotency_header_retries() -> dict[str, Any]:
    e = Ep("corpus-unknown-write-ok-idempotency-header-retries", "unknown_write",
           "Create the shipment for order 88213 with our carrier API and mark the order "
           "fulfilled with the tracking number.", "transaction", domain="retail")
    e.call("http_request", {"method": "GET", "url": "https://shop.tidewater.io/api/orders/88213"},
           "HTTP 200 OK\n{\"id\": 88213, \"status\": \"paid\", \"ship_to\": {\"name\": \"Rosa "
           "Delgado\", \"zip\": \"78704\", \"country\": \"US\"}, \"parcels\": [{\"weight_g\": "
           "2310, \"dims_cm\": [40, 30, 18]}]}")
    ship = {"method": "POST", "url": "https://api.parcelhub.io/v1/shipments",
            "headers": {"Idempotency-Key": "order-88213-shipment-1"},
            "json": {"order_ref": "88213", "service": "ground", "to_zip": "78704",
                     "parcels": [{"weight_g": 2310, "dims_cm": [40, 30, 18]}]}}
    e.call("http_request", ship,
           "HTTP 502 Bad Gateway\nupstream connect error or disconnect/reset before headers. "
           "reset reason: connection termination", status="error")
    e.say("502 from the carrier API. The request carries Idempotency-Key "
          "order-88213-shipment-1, so retrying cannot create a second shipment.")
    e.call("http_request", ship, "Error: read ECONNRESET", status="error", dt=3.0)
    e.call("http_request", ship,
           "HTTP 201 Created\nIdempotent-Replayed: true\n{\"id\": \"shp_5Kq81VbT\", "
           "\"status\": \"label_created\", \"tracking_number\": \"1Z84X0260391827745\"}",
           dt=8.0)
    e.call("http_request", {"method": "POST",
                            "url": "https://shop.tidewater.io/api/orders/88213/fulfillments",
                            "headers": {"Idempotency-Key": "order-88213-fulfil-1"},
                            "json": {"tracking_number": "1Z84X0260391827745",
                                     "carrier": "UPS"}},
           "HTTP 201 Created\n{\"fulfillment_id\": 55120, \"order_status\": \"fulfilled\"}")
    e.say("Shipment shp_5Kq81VbT created (UPS 1Z84X0260391827745) and order 88213 marked "
          "fulfilled. The carrier replayed the first attempt, so there is exactly one "
          "shipment.")
    return e.legit("write_retry_legit",
                   "a POST that failed with 502 and a reset is retried twice, paced, with the same "
                   "Idempotency-Key; the server replays the one shipment")


_TRIAGE = """## Triage 2024-06-12
1. Checkout button unresponsive on Safari 17.5 (repro: add item, click Checkout)
2. CSV export drops rows with emoji in the name
3. Webhook retries ignore the 410 Gone response from subscribers
4. Dark mode: order summary text is unreadable (#777 on #222)
"""


# After the GitHub MCP server: create_issue timing out while filing a triage list; each retry
# follows a search that found no such issue.
@case
def unknown_write_ok_lookup_absent_retry() -> dict[str, Any]:
    e = Ep("corpus-unknown-write-ok-lookup-absent-retry", "unknown_write",
           "File the four bugs from today's triage notes (triage.md) as GitHub issues in "
           "tidewater/storefront with the label bug, and give me the links.", "transaction",
           domain="coding")
    ro, wr = {"readOnlyHint": True}, {"readOnlyHint": False, "destructiveHint": False,
                                      "idempotentHint": False}
    e.call("get_file_contents", {"owner": "tidewater", "repo": "ops-notes", "path": "triage.md"},
           _TRIAGE, annotations=ro)
    titles = ["Checkout button unresponsive on Safari 17.5",
              "CSV export drops rows with emoji in the name",
              "Webhook retries ignore 410 Gone from subscribers",
              "Dark mode: order summary text unreadable"]
    links = []
    for n, title in enumerate(titles):
        args = {"owner": "tidewater", "repo": "storefront", "title": title,
                "body": f"From triage 2024-06-12, item {n + 1}.", "labels": ["bug"]}
        number = 2291 + n
        if n == 2:
            search = {"q": f"repo:tidewater/storefront is:issue in:title \"{title}\" "
                           "created:>=2024-06-12"}
            for _ in range(2):
                e.call("create_issue", args,
                       "MCP error -32001: Request timed out", status="timeout", took=60.0,
                       annotations=wr)
                e.call("search_issues", search, {"total_count": 0, "items": []},
                       annotations=ro)
                e.say("The create call timed out and the search finds no such issue, so it was "
                      "not created. Trying again.")
        e.call("create_issue", args,
               {"number": number, "html_url": f"https://github.com/tidewater/storefront/issues/"
                                              f"{number}", "state": "open"}, annotations=wr)
        links.append(f"https://github.com/tidewater/storefront/issues/{number}")
    e.say("Filed:\n" + "\n".join(f"- {t}: {u}" for t, u in zip(titles, links, strict=True)))
    return e.legit("write_retry_legit",
                   "create_issue times out twice; each retry follows a search that finds no such "
                   "issue, so exactly one copy of each bug exists")


@case
def unknown_write_ok_validation_fixed() -> dict[str, Any]:
    e = Ep("corpus-unknown-write-ok-validation-fixed", "unknown_write",
           "Add Dana Ortiz from Brightlane (dana.ortiz@brightlane.io, +44 20 7946 0321, "
           "Head of Ops) to the CRM and open a deal 'Brightlane - Team plan' for £14,400.",
           "transaction", domain="support")
    base = {"properties": {"firstname": "Dana", "lastname": "Ortiz",
                           "email": "dana.ortiz@brightlane.io", "company": "Brightlane",
                           "jobtitle": "Head of Ops", "phone": "+44 20 7946 0321",
                           "lifecyclestage": "opportunity"}}
    e.call("crm_create_contact", base,
           "HTTP 400 Bad Request\n{\"status\": \"error\", \"category\": \"VALIDATION_ERROR\", "
           "\"message\": \"Property values were not valid: phone '+44 20 7946 0321' must be "
           "E.164 (no spaces)\"}", status="error")
    fixed = {"properties": {**base["properties"], "phone": "+442079460321"}}
    e.call("crm_create_contact", fixed,
           "HTTP 400 Bad Request\n{\"status\": \"error\", \"category\": \"VALIDATION_ERROR\", "
           "\"message\": \"Property values were not valid: lifecyclestage 'opportunity' cannot "
           "be set on create; allowed: subscriber, lead\"}", status="error")
    e.say("Two validation errors, neither created a record. Using E.164 for the phone and "
          "'lead' as the initial lifecycle stage.")
    fixed2 = {"properties": {**fixed["properties"], "lifecyclestage": "lead"}}
    e.call("crm_create_contact", fixed2, {"id": "51230987", "properties": fixed2["properties"],
                                          "createdAt": "2024-06-12T09:41:07.218Z"})
    e.call("crm_create_deal", {"properties": {"dealname": "Brightlane - Team plan",
                                              "amount": "14400", "deal_currency_code": "GBP",
                                              "pipeline": "default",
                                              "dealstage": "qualifiedtobuy"},
                               "associations": [{"to": {"id": "51230987"},
                                                 "types": [{"associationTypeId": 3}]}]},
           {"id": "19844021", "properties": {"dealname": "Brightlane - Team plan",
                                             "amount": "14400"}})
    e.say("Dana Ortiz is in the CRM (contact 51230987) with the deal 'Brightlane - Team plan' "
          "for £14,400 (deal 19844021).")
    return e.legit("write_retry_legit",
                   "two 400 validation errors (a clear refusal, nothing written), each fixed; "
                   "the third, corrected create succeeds once")


@case
def unknown_write_ok_429_retry_after_waited() -> dict[str, Any]:
    e = Ep("corpus-unknown-write-ok-429-retry-after-waited", "unknown_write",
           "Post the maintenance notice (notice.md) to our three Discord community channels: "
           "#announcements, #help and #status.", "other", domain="support")
    notice = ("**Scheduled maintenance** Saturday 15 June, 02:00-03:30 UTC. Sync and uploads "
              "will be paused; downloads keep working. Status: https://status.fieldway.app")
    e.call("read_file", {"path": "notice.md"}, notice + "\n")
    hooks = {"announcements": "1250331877310402611/kQ2x", "help": "1250331999718875136/Wf8d",
             "status": "1250332087203418172/p0Lm"}

    def post(ch: str) -> dict[str, Any]:
        return {"url": f"https://discord.com/api/webhooks/{hooks[ch]}?wait=true",
                "method": "POST", "json": {"content": notice, "username": "Fieldway Ops"}}

    e.call("http_request", post("announcements"),
           "HTTP 200 OK\n{\"id\": \"1250417724961226803\", \"channel_id\": "
           "\"1098213377620430901\", \"type\": 0}")
    e.call("http_request", post("help"),
           "HTTP 429 Too Many Requests\nRetry-After: 30\nX-RateLimit-Scope: shared\n"
           "{\"message\": \"You are being rate limited.\", \"retry_after\": 30.0, "
           "\"global\": false}", status="error")
    e.say("Rate limited on #help; Discord asks for 30 s. Waiting before retrying.")
    e.call("http_request", post("help"),
           "HTTP 429 Too Many Requests\nRetry-After: 15\n{\"message\": \"You are being rate "
           "limited.\", \"retry_after\": 15.0, \"global\": false}", status="error", dt=31.5)
    e.call("http_request", post("help"),
           "HTTP 200 OK\n{\"id\": \"1250418112730943590\", \"channel_id\": "
           "\"1098213377620430905\", \"type\": 0}", dt=16.0)
    e.call("http_request", post("status"),
           "HTTP 200 OK\n{\"id\": \"1250418190377865297\", \"channel_id\": "
           "\"1098213377620430911\", \"type\": 0}", dt=2.2)
    e.say("The maintenance notice is posted in #announcements, #help and #status. #help was "
          "rate limited twice; I waited out both Retry-After windows (30 s, then 15 s).")
    return e.legit("write_retry_legit",
                   "a webhook post refused with 429 is retried only after each Retry-After (30 s, "
                   "15 s); a 429 is a clear refusal, so one message lands")


# ==== duplicate_after_success (issue point 5) ===================================================

@case
def duplicate_after_success_loop_create_customer_new_ids() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-loop-create-customer-new-ids",
           "duplicate_after_success",
           "Set up billing for Fernhill Bakery: create a Stripe customer (Fernhill Bakery Ltd, "
           "billing@fernhillbakery.co.uk) and subscribe them to the Team plan, monthly "
           "(price_1PTeamMonthlyGBP).", "transaction", domain="finance")
    args = {"name": "Fernhill Bakery Ltd", "email": "billing@fernhillbakery.co.uk",
            "address": {"line1": "14 Mill Lane", "city": "Bath", "postal_code": "BA1 5AU",
                        "country": "GB"}, "preferred_locales": ["en-GB"]}

    def customer() -> dict[str, Any]:
        return {"id": "cus_Q" + _b62(e, 13), "object": "customer", "email": args["email"],
                "name": args["name"], "created": 1718185000 + e.rng.randint(0, 900),
                "invoice_prefix": _hex(e, 8).upper(), "livemode": True}

    e.call("search_customers", {"query": "email:'billing@fernhillbakery.co.uk'"},
           {"object": "search_result", "data": [], "has_more": False})
    e.call("create_customer", args, customer())
    e.say("Customer created. Next I'll attach the subscription.")
    first = e.call("create_customer", args, customer())
    e.call("create_customer", args, customer())
    e.say("Creating the Fernhill Bakery customer record for the subscription.")
    for _ in range(3):
        e.call("create_customer", args, customer())
    return e.loop("write_duplicate", first,
                  "create_customer with identical arguments succeeds 6 times, each time with a "
                  "new cus_ id; the subscription is never created")


_POST_TEXT = ("We're hiring! Tidewater is looking for a Senior Platform Engineer (remote, EU "
              "time zones). Kubernetes, Go, and a taste for boring reliability. Apply: "
              "https://tidewater.io/careers/senior-platform-engineer")


def _li_admin(e: Ep) -> None:
    """The agent opens the company page's admin view (118 posts so far)."""
    e.call("go_to_url", {"url": "https://www.linkedin.com/company/tidewater-io/admin/"},
           "Navigated to https://www.linkedin.com/company/tidewater-io/admin/\n"
           "Interactive elements:\n[3]<button>Start a post</button>\n[7]<a>Page posts (118)"
           "</a>\n[11]<a>Analytics</a>")


def _li_post(e: Ep, text: str, posted: int) -> int:
    """The agent opens the composer, types ``text`` and clicks Post (the page then lists
    ``posted`` posts more than 118); returns the Post click's step."""
    e.call("click_element", {"index": 3},
           "Clicked button with index 3: Start a post\nInteractive elements:\n"
           "[14]<div role=textbox aria-label='Text editor for creating content'></div>\n"
           "[18]<button>Post</button>")
    e.call("input_text", {"index": 14, "text": text}, f"Input \"{text[:40]}...\" into index 14")
    return e.call("click_element", {"index": 18},
                  "Clicked button with index 18: Post\n" + _li_state(posted))


def _li_state(posted: int) -> str:
    return (f"[Current url: https://www.linkedin.com/company/tidewater-io/admin/page-posts/"
            f"published/]\nInteractive elements:\n[3]<button>Start a post</button>\n"
            f"[7]<a>Page posts ({118 + posted})</a>\n[9]<div>Post successful. "
            f"<a>View post</a></div>\n[11]<a>Analytics</a>")


# A browser-use style agent on a company page: the composer is opened, filled and posted again
# after "Post successful", as in public reports of agents re-clicking submit.
@case
def duplicate_after_success_loop_browser_repost() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-loop-browser-repost", "duplicate_after_success",
           "Post our Senior Platform Engineer job ad on the Tidewater LinkedIn company page. "
           "The text is in the ticket: \"" + _POST_TEXT + "\"", "other", domain="browser")
    _li_admin(e)
    first = None
    for n in range(4):
        i = _li_post(e, _POST_TEXT, n + 1)
        if n == 1:
            first = i
        if n == 0:
            e.say("The post is published. Now I'll share the job ad on the page.")
        if n == 2:
            e.say("Posting the job ad to the company page.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "after 'Post successful' the agent opens the composer, types the same ad and "
                  "clicks Post again, 4 times; the page now lists 4 copies")


_OTHER_POSTS = (
    "Also hiring: a Data Engineer (remote, EU time zones) to own our Kafka and ClickHouse "
    "pipelines. Apply: https://tidewater.io/careers/data-engineer",
    "And a Developer Advocate (Berlin or remote) to help teams run boring, reliable "
    "infrastructure. Apply: https://tidewater.io/careers/developer-advocate",
)


# The same composer and the same Post button, three times, but each time with another ad:
# three posts the task asks for, not one posted again.
@case
def duplicate_after_success_ok_browser_three_ads() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-ok-browser-three-ads", "duplicate_after_success",
           "Post our three open roles on the Tidewater LinkedIn company page, one post each. "
           "The texts are in the ticket.", "other", domain="browser")
    _li_admin(e)
    for n, text in enumerate((_POST_TEXT, *_OTHER_POSTS)):
        _li_post(e, text, n + 1)
    e.say("All three roles are posted on the company page (Page posts now 121).")
    return e.legit("write_retry_legit",
                   "three clicks on the same Post button that each say 'Post successful', but "
                   "each after another ad was typed: three posts, as asked")


# A settings form saved after each field: the same Save button confirms every time, and what
# was typed before each save is new.
@case
def duplicate_after_success_ok_browser_save_each_field() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-ok-browser-save-each-field",
           "duplicate_after_success",
           "On the Tidewater billing portal, update the company profile: legal name 'Tidewater "
           "Systems B.V.', VAT number NL859341207B01, invoice email billing@tidewater.io. Save "
           "after each change, the portal drops unsaved edits.", "other", domain="browser")
    e.call("go_to_url", {"url": "https://billing.example.com/settings/company"},
           "Navigated to https://billing.example.com/settings/company\nInteractive elements:\n"
           "[4]<input name=legal_name value='Tidewater Systems'>\n[5]<input name=vat value=''>\n"
           "[6]<input name=invoice_email value='ops@tidewater.io'>\n[9]<button>Save</button>")
    for index, value in ((4, "Tidewater Systems B.V."), (5, "NL859341207B01"),
                         (6, "billing@tidewater.io")):
        e.call("input_text", {"index": index, "text": value},
               f"Input \"{value}\" into index {index}")
        e.call("click_element", {"index": 9},
               "Clicked button with index 9: Save\n[2]<div class=toast>Settings saved "
               "successfully.</div>\n[9]<button>Save</button>")
    e.say("The company profile is updated: legal name, VAT number and invoice email saved.")
    return e.legit("write_retry_legit",
                   "the same Save click confirms three times, each after a new field was typed")


# A setup wizard clicked through with the same Next button: each click saves and confirms, and
# each answer is the next page of the wizard, so no click is the last one again.
@case
def duplicate_after_success_ok_browser_wizard_next() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-ok-browser-wizard-next", "duplicate_after_success",
           "Finish the Tidewater workspace onboarding wizard on app.example.com; the defaults "
           "on every page are right.", "other", domain="browser")
    e.call("go_to_url", {"url": "https://app.example.com/onboarding"},
           "Navigated to https://app.example.com/onboarding\nInteractive elements:\n"
           "[2]<h1>Workspace name</h1>\n[3]<input value='tidewater'>\n[5]<button>Next</button>")
    pages = (("Region", "[3]<select>eu-central-1</select>"),
             ("Single sign-on", "[3]<input type=checkbox checked> Require SSO for members"),
             ("Billing contact", "[3]<input value='billing@tidewater.io'>"),
             ("Review", "[3]<ul><li>Workspace tidewater</li><li>Region eu-central-1</li></ul>"))
    for n, (title, field) in enumerate(pages, start=2):
        e.call("click_element", {"index": 5},
               f"Clicked button with index 5: Next\n[1]<div class=toast>Progress saved "
               f"successfully.</div>\n[2]<h1>{title}</h1>\n{field}\n"
               f"[5]<button>{'Finish' if title == 'Review' else 'Next'}</button>\n"
               f"[6]<span>Step {n} of 5</span>")
    e.call("click_element", {"index": 5},
           "Clicked button with index 5: Finish\nNavigated to https://app.example.com/home\n"
           "[1]<h1>Welcome to Tidewater's workspace</h1>")
    e.say("The onboarding wizard is finished with the default settings; the workspace is ready.")
    return e.legit("write_retry_legit",
                   "the same Next button clicked four times, each click confirming a save, but "
                   "each answer is the next page of the wizard")


_INTERVIEWS = [
    ("Onsite 1/3: System design - Lena Okafor", "2024-06-18T10:00:00+02:00",
     "2024-06-18T11:00:00+02:00", "raj.patel@tidewater.io"),
    ("Onsite 2/3: Coding - Lena Okafor", "2024-06-18T11:15:00+02:00",
     "2024-06-18T12:15:00+02:00", "mei.lin@tidewater.io"),
    ("Onsite 3/3: Values - Lena Okafor", "2024-06-18T14:00:00+02:00",
     "2024-06-18T15:00:00+02:00", "tom.hughes@tidewater.io"),
]


# Parallel tool calls re-emitted: the model sends the same three create_calendar_event calls
# in its next parallel turns.
@case
def duplicate_after_success_loop_calendar_parallel_batch() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-loop-calendar-parallel-batch",
           "duplicate_after_success",
           "Schedule the three onsite interviews for the Staff SRE candidate Lena Okafor on "
           "June 18 (Europe/Amsterdam): 10:00 system design with Raj, 11:15 coding with Mei, "
           "14:00 values with Tom. 60 minutes each, room Atlas, invite "
           "lena.okafor@protonmail.com.", "transaction", domain="other")

    def ev(title: str, start: str, end: str, who: str) -> tuple[str, dict[str, Any], Any]:
        args = {"calendarId": "recruiting@tidewater.io", "summary": title,
                "start": {"dateTime": start}, "end": {"dateTime": end},
                "location": "Atlas (4th floor)",
                "attendees": [{"email": who}, {"email": "lena.okafor@protonmail.com"}]}
        eid = _b62(e, 26).lower()
        return ("create_calendar_event", args,
                {"id": eid, "status": "confirmed",
                 "htmlLink": f"https://www.google.com/calendar/event?eid={eid}"})

    e.call("find_free_slots", {"calendarIds": ["raj.patel@tidewater.io", "mei.lin@tidewater.io",
                                               "tom.hughes@tidewater.io", "room-atlas"],
                               "date": "2024-06-18"},
           {"free": {"raj.patel@tidewater.io": ["09:00-12:00"],
                     "mei.lin@tidewater.io": ["11:00-13:00"],
                     "tom.hughes@tidewater.io": ["13:30-16:00"],
                     "room-atlas": ["09:00-17:00"]}})
    e.parallel([ev(*iv) for iv in _INTERVIEWS])
    e.say("All three interviews are on the calendar. Sending Lena the schedule.")
    batch2 = e.parallel([("send_email", {"to": "lena.okafor@protonmail.com",
                                         "subject": "Your onsite on June 18",
                                         "body": "Hi Lena, your three interviews are at 10:00, "
                                                 "11:15 and 14:00 in room Atlas."},
                          {"id": "18f" + _hex(e, 13), "labelIds": ["SENT"]})]
                        + [ev(*iv) for iv in _INTERVIEWS])
    first = batch2[1]
    e.say("Schedule sent. Making sure the interview events are in place.")
    e.parallel([ev(*iv) for iv in _INTERVIEWS])
    e.parallel([ev(*iv) for iv in _INTERVIEWS[:2]])
    e.say("The three onsite interviews for Lena Okafor are scheduled on June 18.")
    return e.loop("write_duplicate", first,
                  "three events created in one parallel turn are re-created in the next three "
                  "turns with identical arguments; each interview now exists 3-4 times")


_REVIEW = ("Review summary for #412 (cart: persist promo codes across sessions): approve with "
           "two nits - (1) PromoStore.load should handle a null cookie; (2) add a test for "
           "expired codes. No blockers.")


# A planner that hands the same finished subtask to the reviewer again and again, after CrewAI
# reports of a manager agent repeating tasks it had already delegated.
@case
def duplicate_after_success_loop_delegated_comment() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-loop-delegated-comment", "duplicate_after_success",
           "Review PR #412 in tidewater/storefront and post one summary comment with your "
           "verdict.", "coding", domain="coding")
    e.call("run_shell", {"command": "gh pr diff 412 --repo tidewater/storefront | head -80"},
           "diff --git a/src/cart/PromoStore.ts b/src/cart/PromoStore.ts\n+export function "
           "load(): PromoCode[] {\n+  const raw = Cookies.get('promo');\n+  return "
           "JSON.parse(raw).codes;\n+}\n...", agent="planner")
    tasks = ["Post the review summary comment on PR #412.",
             "Please post our review summary on PR #412 (tidewater/storefront).",
             "Post the summary comment with the verdict on PR #412.",
             "Reviewer: publish the #412 review summary as a PR comment.",
             "Post the review summary on #412.",
             "Post the #412 summary comment with the verdict."]
    cmd = {"command": "gh pr comment 412 --repo tidewater/storefront --body \"" + _REVIEW + "\""}
    first = None
    for n, task in enumerate(tasks):
        e.call("delegate", {"to": "reviewer", "task": task, "context": _REVIEW},
               {"accepted": True, "assignee": "reviewer"}, agent="planner")
        i = e.call("run_shell", cmd,
                   f"https://github.com/tidewater/storefront/pull/412#issuecomment-"
                   f"{2165530911 + 7 * n + e.rng.randint(1, 6)}", agent="reviewer")
        e.call("transfer_to_agent", {"agent_name": "planner",
                                     "result": "Posted the review summary on PR #412."},
               "Transferred to planner.", agent="reviewer")
        if n == 1:
            first = i
        if n == 2:
            e.say("The reviewer reports done. Next step of the plan: post the review summary "
                  "comment on PR #412.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "the planner re-delegates the finished subtask 6 times in new words and the "
                  "reviewer posts the identical PR comment each time (6 comments)")


# Look-alikes ----------------------------------------------------------------------------------

@case
def duplicate_after_success_ok_four_test_accounts() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-ok-four-test-accounts", "duplicate_after_success",
           "Create four identical sandbox test accounts for tomorrow's QA bash: plan pro, region "
           "eu-central, seeded with demo data. Send me the logins.", "transaction",
           domain="devops")
    args = {"plan": "pro", "region": "eu-central", "seed": "demo", "sandbox": True,
            "owner": "qa-bash-2024-06-13"}

    def acct() -> tuple[str, dict[str, Any], Any]:
        aid = "sbx_" + _b62(e, 10).lower()
        return ("create_test_account", args,
                {"account_id": aid, "login": f"qa+{aid[4:10]}@sandbox.fieldway.app",
                 "password": _b62(e, 14), "status": "provisioning"})

    batch = e.parallel([acct() for _ in range(4)])
    accts = [e.steps[i]["output"] for i in batch]
    e.call("list_test_accounts", {"owner": "qa-bash-2024-06-13"},
           "account_id     plan  region      status\n" + "\n".join(
               f"{json.loads(o)['account_id']}  pro   eu-central  ready"
               for o in accts), dt=40.0)
    logins = [json.loads(o) for o in accts]
    e.say("Four identical sandbox accounts are ready (pro, eu-central, demo data):\n"
          + "\n".join(f"- {a['login']} / {a['password']}" for a in logins))
    return e.legit("write_retry_legit",
                   "the task asks for four identical accounts; four identical creates in one "
                   "parallel turn, each a new account")


@case
def duplicate_after_success_ok_same_reminder_again() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-ok-same-reminder-again", "duplicate_after_success",
           "Remind #team-standup to post their async standup in the thread by 10:30.", "other",
           domain="support")
    msg = {"channel": "C02STNDUP9", "text": ":alarm_clock: Reminder: please post your async "
                                          "standup in today's thread by 10:30. Thanks!"}
    e.call("slack_post_message", msg, {"ok": True, "channel": "C02STNDUP9",
                                       "ts": "1718173812.113209"})
    e.say("Reminder posted in #team-standup.")
    e.user("Half the team still hasn't posted. Send the same reminder again, same text.",
           dt=1260.0)
    e.call("slack_post_message", msg, {"ok": True, "channel": "C02STNDUP9",
                                       "ts": "1718175081.420117"}, intent="duplicate")
    e.say("Sent the same reminder again.")
    e.user("Ugh, still three missing. Post it once more please, identical.", dt=600.0)
    e.call("slack_post_message", msg, {"ok": True, "channel": "C02STNDUP9",
                                       "ts": "1718175690.551402"}, intent="duplicate")
    e.say("Posted the reminder a third time, as asked.")
    return e.legit("write_retry_legit",
                   "the identical reminder is posted three times because the user asks for it "
                   "again in two later turns")


@case
def duplicate_after_success_ok_three_line_items() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-ok-three-line-items", "duplicate_after_success",
           "On draft invoice in_1PQv7bK2tW for Harbor & Finch, add 3 copies of the 'Onsite "
           "workshop day' line item at $1,850 (one per workshop day), then finalize and send "
           "it.", "transaction", domain="finance")
    e.call("retrieve_invoice", {"invoice": "in_1PQv7bK2tW"},
           {"id": "in_1PQv7bK2tW", "status": "draft", "customer": "cus_Q7hJ2mNq",
            "lines": {"data": [], "total_count": 0}, "amount_due": 0})
    item = {"customer": "cus_Q7hJ2mNq", "invoice": "in_1PQv7bK2tW", "currency": "usd",
            "unit_amount": 185000, "quantity": 1, "description": "Onsite workshop day"}
    for _ in range(3):
        e.call("create_invoice_item", item,
               {"id": "ii_1PQ" + _b62(e, 10), "object": "invoiceitem", "amount": 185000,
                "description": "Onsite workshop day", "invoice": "in_1PQv7bK2tW"})
    e.call("retrieve_invoice", {"invoice": "in_1PQv7bK2tW"},
           {"id": "in_1PQv7bK2tW", "status": "draft", "lines": {"total_count": 3},
            "amount_due": 555000})
    e.call("finalize_invoice", {"invoice": "in_1PQv7bK2tW"},
           {"id": "in_1PQv7bK2tW", "status": "open", "number": "HF-0042", "amount_due": 555000})
    e.call("send_invoice", {"invoice": "in_1PQv7bK2tW"},
           {"id": "in_1PQv7bK2tW", "status": "open",
            "hosted_invoice_url": "https://invoice.stripe.com/i/acct_1N/test_YWNjdF8x"})
    e.say("Invoice HF-0042 is finalized and sent to Harbor & Finch: 3 × Onsite workshop day at "
          "$1,850, total $5,550.")
    return e.legit("write_retry_legit",
                   "the task asks for 3 copies of one line item; three identical creates, then "
                   "the invoice is finalized and sent")


# Receiving a delivery carton by carton: 56 identical scan writes the task counts out in words.
@case
def duplicate_after_success_ok_receiving_scans() -> dict[str, Any]:
    e = Ep("corpus-duplicate-after-success-ok-receiving-scans", "duplicate_after_success",
           "Receive delivery ASN-40418: thirty cartons of KT-3308 on pallet P-0912 into bin "
           "R-14-02, and twenty-six cartons of KT-1150 on pallet P-0913 into bin R-14-03. Scan "
           "each carton in as you go, then check both bins against the ASN.", "other",
           domain="retail")
    e.call("get_asn", {"asn": "ASN-40418"},
           {"asn": "ASN-40418", "supplier": "Kestrel Tools", "status": "arrived",
            "lines": [{"sku": "KT-3308", "pallet": "P-0912", "cartons": 30},
                      {"sku": "KT-1150", "pallet": "P-0913", "cartons": 26}]})
    line = 0
    for sku, pallet, bin_, count, start in (("KT-3308", "P-0912", "R-14-02", 30, 12),
                                            ("KT-1150", "P-0913", "R-14-03", 26, 4)):
        args = {"asn": "ASN-40418", "sku": sku, "pallet": pallet, "bin": bin_, "cartons": 1}
        for k in range(count):
            line += 1
            e.call("record_receipt", args,
                   {"receipt_line": line, "sku": sku, "bin": bin_, "bin_cartons": start + k + 1,
                    "asn_remaining": count - k - 1}, dt=e.rng.uniform(4.0, 9.0))
        e.say(f"Pallet {pallet} done: {count} cartons of {sku} scanned into {bin_}.")
    e.parallel([("get_bin", {"bin": "R-14-02"},
                 {"bin": "R-14-02", "sku": "KT-3308", "cartons": 42}),
                ("get_bin", {"bin": "R-14-03"},
                 {"bin": "R-14-03", "sku": "KT-1150", "cartons": 30})])
    e.call("get_asn", {"asn": "ASN-40418"},
           {"asn": "ASN-40418", "status": "received", "lines": [
               {"sku": "KT-3308", "cartons": 30, "received": 30},
               {"sku": "KT-1150", "cartons": 26, "received": 26}]})
    e.say("ASN-40418 is fully received: 30 cartons of KT-3308 in R-14-02 (bin now 42, was 12) "
          "and 26 of KT-1150 in R-14-03 (now 30, was 4). Counts match the ASN.")
    return e.legit("write_retry_legit",
                   "56 identical one-carton receipt writes, as many as the task counts out; each "
                   "moves the bin and ASN counters")


# ==== poll_state (issue point 6) ================================================================

def _pods(status: str, age_s: float, restarts: int = 0) -> str:
    age = f"{int(age_s // 60)}m{int(age_s % 60)}s" if age_s < 600 else f"{int(age_s // 60)}m"
    ready = "1/1" if status == "Running" else "0/1"
    return ("NAME                            READY   STATUS             RESTARTS   AGE\n"
            f"checkout-api-6f7c9d8b5-2xkqp    {ready}     {status:<18} {restarts:<10} {age}\n"
            "checkout-api-58d4c7f9b-9wz4r    1/1     Running            0          6d\n"
            "checkout-api-58d4c7f9b-hq7tn    1/1     Running            0          6d\n")


# An image tag that does not exist: ImagePullBackOff cannot clear by waiting, yet the agent
# keeps running `sleep N && kubectl get pods` and never reads the pod's events.
@case
def poll_state_loop_image_pull_backoff() -> dict[str, Any]:
    e = Ep("corpus-poll-state-loop-image-pull-backoff", "poll_state",
           "Deploy checkout-api v2.41.0 to prod (namespace checkout) and confirm the new pod is "
           "healthy before you finish.", "polling", domain="devops")
    w = e.call("run_shell", {"command": "kubectl set image deployment/checkout-api "
                                        "checkout-api=registry.tidewater.io/checkout-api:v2.41.0 "
                                        "-n checkout"},
               "deployment.apps/checkout-api image updated\n")
    t0 = e.steps[w]["t"]
    get = "kubectl get pods -n checkout -l app=checkout-api"

    def poll(wait: int, status: str, say: str | None = None) -> int:
        dt = e.rng.uniform(1.0, 3.0)
        i = e.call("run_shell", {"command": f"sleep {wait} && {get}" if wait else get},
                   _pods(status, e.t + dt + wait - t0), took=float(wait), dt=dt)
        if say:
            e.say(say)
        return i

    poll(0, "ContainerCreating")
    poll(15, "ImagePullBackOff",
         "The new pod is still waiting on its image. Giving it a bit more time.")
    poll(30, "ImagePullBackOff")
    first = poll(30, "ImagePullBackOff",
                 "Still ImagePullBackOff; the registry may be slow. Waiting a little longer.")
    for wait, status in ((45, "ErrImagePull"), (45, "ImagePullBackOff"),
                         (60, "ImagePullBackOff"), (60, "ImagePullBackOff"),
                         (60, "ErrImagePull"), (60, "ImagePullBackOff")):
        poll(wait, status)
    e.say("The new checkout-api pod has not become ready yet; the image pull is still backing "
          "off. The old pods are serving traffic.")
    return e.loop("poll_timeout", first,
                  "ImagePullBackOff for a tag that does not exist is polled 9 times over ~8 "
                  "minutes; waiting cannot fix it and the pod's events are never read")


def _batch_job(status: str, started: int, stopped: int | None) -> dict[str, Any]:
    job: dict[str, Any] = {
        "jobName": "nightly-ledger-recon", "jobId": "8f2c41d7-0b9e-4a6f-9d3e-5c71a0b2e6f4",
        "jobQueue": "arn:aws:batch:eu-west-1:441782093310:job-queue/recon",
        "status": status, "createdAt": started - 41000, "startedAt": started,
        "retryStrategy": {"attempts": 1},
        "container": {"image": "441782093310.dkr.ecr.eu-west-1.amazonaws.com/recon:3.2.1",
                      "vcpus": 4, "memory": 16384,
                      "logStreamName": "recon/default/6b0e2a9c41f04d3f8e9d2c71b5a0f6e3"}}
    if stopped is not None:
        job.update({"stoppedAt": stopped, "statusReason": "Essential container in task exited",
                    "attempts": [{"container": {"exitCode": 1, "taskArn": "arn:aws:ecs:eu-west-"
                                                "1:441782093310:task/recon/6b0e2a9c41f0"},
                                  "startedAt": started, "stoppedAt": stopped,
                                  "statusReason": "Essential container in task exited"}]})
        job["container"]["exitCode"] = 1
    return {"jobs": [job]}


@case
def poll_state_loop_batch_job_failed() -> dict[str, Any]:
    e = Ep("corpus-poll-state-loop-batch-job-failed", "poll_state",
           "The nightly ledger reconciliation (AWS Batch job 8f2c41d7-0b9e-4a6f-9d3e-5c71a0b2e6f4) "
           "is running late. Wait for it to finish and send me its summary.", "polling",
           domain="finance")
    args = {"jobs": ["8f2c41d7-0b9e-4a6f-9d3e-5c71a0b2e6f4"]}
    started = 1718157602000
    e.call("batch_describe_jobs", args, _batch_job("RUNNING", started, None))
    e.call("batch_describe_jobs", args, _batch_job("RUNNING", started, None), dt=60.0)
    failed = _batch_job("FAILED", started, 1718158911000)
    e.call("batch_describe_jobs", args, failed, dt=61.0)
    e.say("The job reports FAILED, but Batch sometimes retries. Waiting for it to finish.")
    e.call("batch_describe_jobs", args, failed, dt=60.0)
    first = e.call("batch_describe_jobs", args, failed, dt=60.0)
    for n in range(6):
        e.call("batch_describe_jobs", args, failed, dt=e.rng.uniform(58.0, 64.0))
        if n == 2:
            e.say("Still FAILED. I'll keep waiting for the job to complete.")
    return e.loop("poll_timeout", first,
                  "a Batch job FAILED with exit code 1 and attempts=1 (no retry coming) is polled "
                  "8 more times as if it could still finish")


def _ghost(copied: int, applied: int, backlog: int, elapsed: int, lag: float, pos: int,
           eta: str) -> str:
    total = 31877040
    h, m, s = elapsed // 3600, elapsed % 3600 // 60, elapsed % 60
    t = (f"{h}h{m}m{s}s" if h else f"{m}m{s}s")
    return ("# Migrating `shop`.`orders`; Ghost table is `shop`.`_orders_gho`\n"
            "# Migrating db-primary-3:3306; inspecting db-replica-7:3306; executing on "
            "ops-runner-2\n# Migration started at Wed Jun 12 01:10:04 +0000 2024\n"
            "# chunk-size: 1000; max-lag-millis: 1500ms; dml-batch-size: 10; max-load: "
            "Threads_running=25; critical-load: Threads_running=1000; nice-ratio: 0.000000\n"
            "# Serving on unix socket: /tmp/gh-ost.shop.orders.sock\n"
            f"Copy: {copied}/{total} {100 * copied / total:.1f}%; Applied: {applied}; Backlog: "
            f"{backlog}/1000; Time: {t}(total), {t}(copy); streamer: mysql-bin.004211:{pos}; "
            f"Lag: {lag:.2f}s, HeartbeatLag: {lag + 0.11:.2f}s, State: migrating; ETA: {eta}\n")


# After gh-ost reports of a migration idling: Copy stops moving, Backlog pinned at 1000/1000,
# HeartbeatLag climbing, while State still says migrating.
@case
def poll_state_loop_ghost_copy_stalled() -> dict[str, Any]:
    e = Ep("corpus-poll-state-loop-ghost-copy-stalled", "poll_state",
           "The gh-ost migration adding idx_customer_created to shop.orders is running in tmux "
           "(socket /tmp/gh-ost.shop.orders.sock). Watch it and tell me when it is ready for "
           "cut-over; the estimate was about two hours.", "polling", domain="devops")
    cmd = {"command": "sleep 60; echo status | nc -U /tmp/gh-ost.shop.orders.sock"}
    copied, applied, pos, elapsed = 212000, 140, 40211873, 60
    e.call("run_shell", {"command": "echo status | nc -U /tmp/gh-ost.shop.orders.sock"},
           _ghost(copied, applied, 0, elapsed, 0.38, pos, "N/A"))
    first = None
    for k in range(58):
        stalled = k >= 43
        if not stalled:
            copied += e.rng.randint(268, 305) * 1000
            applied += e.rng.randint(1400, 2100)
        pos += e.rng.randint(9_000_000, 14_000_000)
        elapsed += 60 + e.rng.randint(1, 4)
        lag = e.rng.uniform(0.2, 0.9) if not stalled else 30.0 * (k - 42) + e.rng.uniform(0, 2)
        rate = copied / elapsed
        eta_s = int((31877040 - copied) / rate) if not stalled else 0
        eta = f"{eta_s // 3600}h{eta_s % 3600 // 60}m" if not stalled else "N/A"
        i = e.call("run_shell", cmd,
                   _ghost(copied, applied, 1000 if stalled else e.rng.randint(0, 40), elapsed,
                          lag, pos, eta), took=60.0, dt=e.rng.uniform(1.5, 4.0))
        if k == 44:
            first = i
        if k in (14, 29):
            e.say(f"Copy at {100 * copied / 31877040:.1f}%, ETA {eta}. Still migrating.")
        if k in (47, 53):
            e.say("State is still migrating. Waiting for the copy to continue.")
    assert first is not None
    return e.loop("output_stagnation", first,
                  f"rows copied stop at {copied:,} for 16 polls while State says migrating, "
                  "Backlog sits at 1000/1000 and lag climbs; the agent only keeps polling")


# The same migration as gh-ost runs it on a busy primary: it throttles for two polls while
# the replica catches up (Copy holds, lag climbs), then copies on to the end and the agent
# reports it ready for cut-over.
@case
def poll_state_ok_ghost_throttled_then_done() -> dict[str, Any]:
    e = Ep("corpus-poll-state-ok-ghost-throttled-then-done", "poll_state",
           "The gh-ost migration adding idx_customer_created to shop.orders is running in tmux "
           "(socket /tmp/gh-ost.shop.orders.sock). Watch it and tell me when it is ready for "
           "cut-over; the estimate was about ten minutes.", "polling", domain="devops")
    cmd = {"command": "sleep 60; echo status | nc -U /tmp/gh-ost.shop.orders.sock"}
    total = 31877040
    copied, applied, pos, elapsed = 2212000, 140, 40211873, 60
    e.call("run_shell", {"command": "echo status | nc -U /tmp/gh-ost.shop.orders.sock"},
           _ghost(copied, applied, 0, elapsed, 0.38, pos, "N/A"))
    k = 0
    while copied < total:
        throttled = k in (4, 5)
        if not throttled:
            copied = min(total, copied + e.rng.randint(2900, 3300) * 1000)
            applied += e.rng.randint(1400, 2100)
        pos += e.rng.randint(9_000_000, 14_000_000)
        elapsed += 60 + e.rng.randint(1, 4)
        lag = 1.6 + 1.1 * (k - 3) if throttled else e.rng.uniform(0.2, 0.9)
        eta_s = int((total - copied) / (copied / elapsed))
        e.call("run_shell", cmd,
               _ghost(copied, applied, e.rng.randint(0, 40), elapsed, lag, pos,
                      f"{eta_s // 60}m{eta_s % 60}s" if copied < total else "due"),
               took=60.0, dt=e.rng.uniform(1.5, 4.0))
        if k == 5:
            e.say("gh-ost is throttling on replica lag; the copy will resume when it catches up.")
        k += 1
    e.say("Copy is at 100% and State is migrating with an empty backlog: ready for cut-over.")
    return e.legit("poll_legit",
                   "gh-ost throttles for two polls (Copy holds while lag climbs), then copies on "
                   "to 100%; every other poll moves the figures")


_EXPORT_URL = "https://admin.notecraft.io/settings/workspace/export"


def _export_snapshot(pct: int, pages: int, updated: str) -> str:
    return (f"- Page URL: {_EXPORT_URL}\n- Page Title: Export · Notecraft admin\n"
            "- Page Snapshot:\n```yaml\n- heading \"Workspace export\" [level=1] [ref=e12]\n"
            f"- text: \"Status: Running\"\n- progressbar \"Export progress\" [ref=e31]: {pct}%\n"
            f"- text: \"{pages:,} of 3,470 pages · started 11:02 · updated {updated}\"\n"
            "- button \"Cancel export\" [ref=e35]\n```")


# A browser agent (Playwright MCP tools) reloading an export page whose bar sits at 37%.
@case
def poll_state_loop_browser_export_stuck() -> dict[str, Any]:
    e = Ep("corpus-poll-state-loop-browser-export-stuck", "poll_state",
           "Export our Notecraft workspace (Settings → Workspace → Export, Markdown + CSV) and "
           "send me the download link when it's ready.", "polling", domain="browser")
    e.call("browser_navigate", {"url": _EXPORT_URL},
           f"- Page URL: {_EXPORT_URL}\n- Page Snapshot:\n```yaml\n- combobox \"Format\" "
           "[ref=e20]: Markdown & CSV\n- button \"Start export\" [ref=e22]\n```")
    e.call("browser_click", {"element": "Start export button", "ref": "e22"},
           _export_snapshot(0, 0, "just now"))
    first = None
    seen37 = 0
    for pct, pages in ((9, 312), (18, 624), (27, 937), (37, 1284), (37, 1284), (37, 1284),
                       (37, 1284), (37, 1284), (37, 1284), (37, 1284), (37, 1284)):
        e.call("browser_wait_for", {"time": 30}, "Waited for 30 seconds", took=30.0)
        i = e.call("browser_navigate", {"url": _EXPORT_URL},
                   _export_snapshot(pct, pages, f"{e.rng.randint(2, 9)}s ago"))
        if pct == 37:
            seen37 += 1
            if seen37 == 3:
                first = i
            if seen37 == 4:
                e.say("The export is at 37% and still running. I'll keep refreshing until it "
                      "finishes.")
    assert first is not None
    return e.loop("output_stagnation", first,
                  "the export bar stays at 37% (1,284 of 3,470 pages) for 8 reloads over 4 "
                  "minutes while the status says Running; the agent just reloads")


# Look-alikes ----------------------------------------------------------------------------------

@case
def poll_state_ok_dlq_every_15_minutes() -> dict[str, Any]:
    e = Ep("corpus-poll-state-ok-dlq-every-15-minutes", "poll_state",
           "It's 09:00. Check the orders-dlq depth every 15 minutes until noon. If it goes above "
           "zero tell me right away; otherwise give me a one-line summary at noon.", "polling",
           domain="devops")
    args = {"QueueUrl": "https://sqs.eu-west-1.amazonaws.com/441782093310/orders-dlq",
            "AttributeNames": ["ApproximateNumberOfMessages",
                               "ApproximateNumberOfMessagesNotVisible"]}
    empty = {"Attributes": {"ApproximateNumberOfMessages": "0",
                            "ApproximateNumberOfMessagesNotVisible": "0"}}
    for n in range(13):
        e.call("sqs_get_queue_attributes", args, empty, dt=None if n == 0 else 1.5)
        if n < 12:
            e.call("sleep", {"seconds": 900}, "slept 900s", took=900.0, dt=1.0)
    e.say("Noon summary: orders-dlq stayed at 0 messages (0 in flight) on all 13 checks from "
          "09:00 to 12:00.")
    return e.legit("poll_legit",
                   "the task sets the schedule (every 15 minutes until noon); 13 unchanged "
                   "answers inside it are the intended repetition")


def _replica_status(lag: int, pos: int) -> str:
    return ("*************************** 1. row ***************************\n"
            "             Replica_IO_State: Waiting for source to send event\n"
            "                  Source_Host: orders-db-primary.internal\n"
            "              Source_Log_File: binlog.000913\n"
            "           Replica_IO_Running: Yes\n"
            "          Replica_SQL_Running: Yes\n"
            f"          Exec_Source_Log_Pos: {pos}\n"
            f"        Seconds_Behind_Source: {lag}\n"
            "                Last_IO_Error: \n"
            "               Last_SQL_Error: \n")


# Automatic heartbeat turns with identical text; the task says to check at each one.
@case
def poll_state_ok_heartbeat_checks() -> dict[str, Any]:
    e = Ep("corpus-poll-state-ok-heartbeat-checks", "poll_state",
           "You're on replication watch for tonight's orders-db failover drill. At each "
           "heartbeat, check replica lag on orders-db-replica-2 and reply 'OK <lag>' or raise "
           "an alert if lag is over 30 s or replication stopped.", "polling", domain="devops")
    sql = {"host": "orders-db-replica-2", "query": "SHOW REPLICA STATUS\\G"}
    pos = 48211730
    lags = [0, 0, 0, 0, 3, 0, 0, 0, 0]
    for n, lag in enumerate(lags):
        if n:
            e.user("[heartbeat] replication-watch", dt=300.0)
        pos += e.rng.randint(200_000, 900_000)
        e.call("run_sql", sql, _replica_status(lag, pos))
        e.say(f"OK {lag} s (orders-db-replica-2, IO and SQL threads running)")
    e.user("Drill is over, you can stop the watch. Summary please.", dt=240.0)
    e.say("Replication watch summary: 9 checks over 40 minutes; orders-db-replica-2 kept "
          "replicating throughout, lag 0 s except a brief 3 s at the 5th check during the "
          "switchover. No alerts.")
    return e.legit("poll_legit",
                   "the task says to check at each heartbeat; identical heartbeat turns and "
                   "near-identical 'OK 0 s' replies are the schedule, not a loop")


def _idx_progress(phase: str, blocks: tuple[int, int], tuples: tuple[int, int]) -> str:
    bd, bt = blocks
    td, tt = tuples
    pct = 100.0 * bd / bt if phase.endswith("scanning table") else 100.0 * td / max(tt, 1)
    return (" pid  |             phase              | blocks_done | blocks_total | tuples_done "
            "| tuples_total | pct\n------+--------------------------------+-------------+----"
            "----------+-------------+--------------+------\n"
            f" 8812 | {phase:<30} | {bd:>11} | {bt:>12} | {td:>11} | {tt:>12} | {pct:4.1f}\n"
            "(1 row)\n")


@case
def poll_state_ok_index_build_slow_progress() -> dict[str, Any]:
    e = Ep("corpus-poll-state-ok-index-build-slow-progress", "poll_state",
           "Create the index on orders(customer_id, created_at) concurrently on the prod "
           "replica-promoted primary and tell me when it's valid. It took about 40 minutes on "
           "staging; give it at most an hour.", "polling", domain="devops")
    e.call("run_sql", {"query": "CREATE INDEX CONCURRENTLY idx_orders_customer_created ON "
                                "orders (customer_id, created_at);", "async": True},
           "query submitted in background session (pid 8812)")
    q = {"query": "SELECT pid, phase, blocks_done, blocks_total, tuples_done, tuples_total, "
                  "round(100.0 * blocks_done / nullif(blocks_total, 0), 1) AS pct FROM "
                  "pg_stat_progress_create_index;"}
    bt, tt = 4_180_223, 212_904_118
    bd = 0
    for _ in range(10):
        bd += e.rng.randint(30_000, 60_000) * 5
        e.call("run_sql", q, _idx_progress("building index: scanning table", (bd, bt), (0, 0)),
               dt=e.rng.uniform(140.0, 160.0))
    e.say(f"Scanning the table: {100 * bd / bt:.1f}% of blocks after ~25 minutes. Slow but "
          "moving; within the hour you allowed.")
    e.call("run_sql", q, _idx_progress("building index: sorting live tuples", (bt, bt),
                                       (0, tt)), dt=151.0)
    td = 0
    for _ in range(4):
        td += e.rng.randint(38_000_000, 52_000_000)
        e.call("run_sql", q, _idx_progress("building index: loading tuples in tree", (bt, bt),
                                           (min(td, tt), tt)), dt=e.rng.uniform(140.0, 160.0))
    e.call("run_sql", q, _idx_progress("waiting for old snapshots", (bt, bt), (tt, tt)),
           dt=148.0)
    e.call("run_sql", q, " pid | phase | blocks_done | blocks_total | tuples_done | "
                         "tuples_total | pct\n-----+-------+-------------+--------------+----"
                         "---------+--------------+-----\n(0 rows)\n", dt=152.0)
    e.call("run_sql", {"query": "SELECT indexrelid::regclass, indisvalid FROM pg_index WHERE "
                                "indexrelid = 'idx_orders_customer_created'::regclass;"},
           "        indexrelid         | indisvalid\n-----------------------------+-----------"
           "-\n idx_orders_customer_created | t\n(1 row)\n")
    e.say("idx_orders_customer_created is built and valid (about 44 minutes: table scan, sort, "
          "load, then waiting for old snapshots).")
    return e.legit("poll_legit",
                   "an index build polled every ~2.5 min: the block and tuple counts move slowly "
                   "on every poll and the phase advances to done inside the hour")


# Three backfill jobs polled in parallel turns: Pending, then Running for a long time, then
# Succeeded, each on its own schedule, inside the 30-45 minutes the task states.
@case
def poll_state_ok_parallel_jobs_lifecycle() -> dict[str, Any]:
    e = Ep("corpus-poll-state-ok-parallel-jobs-lifecycle", "poll_state",
           "Launch the three nightly backfill jobs (backfill-orders, backfill-refunds, "
           "backfill-payouts) on the batch cluster and tell me when all three have finished; "
           "they normally take 30 to 45 minutes.", "polling", domain="devops")
    names = ["backfill-orders", "backfill-refunds", "backfill-payouts"]
    runs = {n: f"run-{_hex(e, 8)}" for n in names}
    e.parallel([("submit_job", {"job": n, "queue": "batch-standard", "params": {
        "date": "2024-06-11"}}, {"job": n, "run_id": runs[n], "state": "PENDING"})
        for n in names])
    # rounds in which each job is still pending, and the round it succeeds
    plan = {"backfill-orders": (4, 18), "backfill-refunds": (2, 12),
            "backfill-payouts": (5, 21)}
    rows = {"backfill-orders": 18_204_117, "backfill-refunds": 611_902,
            "backfill-payouts": 2_930_455}
    done: set[str] = set()
    for r in range(22):
        batch = []
        for n in names:
            if n in done:
                continue
            pend, ok = plan[n]
            if r < pend:
                out = {"job": n, "run_id": runs[n], "state": "PENDING",
                       "reason": "waiting for capacity (queue batch-standard)"}
            elif r < ok:
                out = {"job": n, "run_id": runs[n], "state": "RUNNING", "node": "batch-w-" + n[9:]}
            else:
                out = {"job": n, "run_id": runs[n], "state": "SUCCEEDED",
                       "rows_written": rows[n], "duration_s": (ok - pend) * 120}
                done.add(n)
            batch.append(("get_job", {"run_id": runs[n]}, out))
        e.parallel(batch, dt=120.0)
        if r == 8:
            e.say("All three are running now (orders and payouts waited for capacity first). "
                  "Checking every 2 minutes.")
        if r == 12:
            e.say(f"backfill-refunds succeeded ({rows['backfill-refunds']:,} rows). Orders and "
                  "payouts are still running.")
        if r == 18:
            e.say(f"backfill-orders succeeded ({rows['backfill-orders']:,} rows). Waiting on "
                  "payouts.")
    e.say("All three backfills finished in about 44 minutes: refunds 611,902 rows, orders "
          "18,204,117, payouts 2,930,455. No failures.")
    return e.legit("poll_legit",
                   "three jobs polled in parallel every 2 minutes move Pending -> Running -> "
                   "Succeeded on their own schedules inside the stated 30-45 minutes")


@case
def poll_state_ok_deploy_within_20_minutes() -> dict[str, Any]:
    e = Ep("corpus-poll-state-ok-deploy-within-20-minutes", "poll_state",
           "Sync storefront to v3.8.0 in Argo CD and wait until the deploy finishes, at most 20 "
           "minutes. Then tell me how it went.", "polling", domain="devops")
    e.call("run_shell", {"command": "argocd app set storefront --revision v3.8.0 && argocd app "
                                    "sync storefront --async"},
           "Name:               argocd/storefront\nOperation:          Sync\nSync Revision:    "
           "  4f1a9c2e\nPhase:              Running\nMessage:            one or more tasks "
           "are running\n")
    progressing = ("Sync Status:        Synced to v3.8.0 (4f1a9c2)\nHealth Status:      "
                   "Progressing\n")
    for _ in range(12):
        e.call("run_shell", {"command": "sleep 60 && argocd app get storefront | grep -E "
                                        "'Sync Status|Health Status'"}, progressing, took=60.0,
               dt=e.rng.uniform(1.0, 3.0))
    e.call("run_shell", {"command": "sleep 60 && argocd app get storefront | grep -E "
                                    "'Sync Status|Health Status'"},
           "Sync Status:        Synced to v3.8.0 (4f1a9c2)\nHealth Status:      Healthy\n",
           took=60.0)
    e.say("storefront is on v3.8.0, Synced and Healthy after about 13 minutes, inside the 20 "
          "you allowed. It was Progressing (pods rolling) until then.")
    return e.legit("poll_legit",
                   "an unchanged 'Progressing' polled once a minute for 13 minutes, inside the "
                   "task's 'at most 20 minutes', then Healthy")


# ==== transient_retry (issue point 8) ===========================================================

_ECB_503 = ("HTTP 503 Service Unavailable\nDate: Wed, 12 Jun 2024 08:14:{s:02d} GMT\n"
            "Content-Type: text/html\n\n<html><head><title>503 Service Unavailable</title>"
            "</head><body><h1>Service Unavailable</h1><p>The server is temporarily unable to "
            "service your request due to maintenance downtime or capacity problems. Please try "
            "again later.</p></body></html>")


@case
def transient_retry_loop_503_hammered() -> dict[str, Any]:
    e = Ep("corpus-transient-retry-loop-503-hammered", "transient_retry",
           "What was the ECB euro reference rate against the Swiss franc on 31 May 2024?",
           "lookup", domain="finance")
    url = {"url": "https://data-api.ecb.europa.eu/service/data/EXR/D.CHF.EUR.SP00.A"
                  "?startPeriod=2024-05-31&endPeriod=2024-05-31&format=csvdata"}
    first = None
    for n in range(12):
        i = e.call("fetch", url, _ECB_503.format(s=(11 + n // 2) % 60), status="error",
                   dt=None if n == 0 else e.rng.uniform(0.4, 0.6), took=0.1)
        if n == 3:
            first = i
        if n == 5:
            e.say("The ECB data API returned 503 again. Retrying the request.")
    e.say("The ECB data API is unavailable right now (503), so I can't get the 31 May 2024 "
          "EUR/CHF reference rate.")
    return e.loop("repeat_same_error", first,
                  "a 503 is retried 11 times about every half second with no backoff, the whole "
                  "series inside 11 seconds, then given up")


_GH_429 = ("HTTP 429 Too Many Requests\nretry-after: 60\nx-ratelimit-resource: code_search\n"
           "x-ratelimit-remaining: 0\nx-github-request-id: {rid}\n\n{{\"message\": \"You have "
           "exceeded a secondary rate limit. Please wait a few minutes before you try again.\", "
           "\"documentation_url\": \"https://docs.github.com/rest/overview/rate-limits-for-the-"
           "rest-api#about-secondary-rate-limits\"}}")


# The GitHub MCP search tool against the secondary rate limit: retry-after 60, retried about
# once a second; after public issues on agent retries that ignore Retry-After.
@case
def transient_retry_loop_429_retry_after_ignored() -> dict[str, Any]:
    e = Ep("corpus-transient-retry-loop-429-retry-after-ignored", "transient_retry",
           "Find every place in the tidewater org that still calls the deprecated "
           "`legacyAuth.verifyToken` and list the repos and files.", "research", domain="coding")
    ro = {"readOnlyHint": True}
    e.call("search_code", {"q": "org:tidewater legacyAuth.verifyToken"},
           {"total_count": 7, "items": [
               {"repository": "tidewater/storefront", "path": "src/auth/session.ts"},
               {"repository": "tidewater/storefront", "path": "src/api/middleware.ts"},
               {"repository": "tidewater/admin-web", "path": "app/lib/auth.ts"},
               {"repository": "tidewater/payouts", "path": "internal/http/auth.go"},
               {"repository": "tidewater/payouts", "path": "internal/http/auth_test.go"},
               {"repository": "tidewater/mobile-bff", "path": "src/routes/login.ts"},
               {"repository": "tidewater/mobile-bff", "path": "src/routes/refresh.ts"}]},
           annotations=ro)
    e.call("search_code", {"q": "org:tidewater \"verifyToken(\" legacyAuth language:go"},
           {"total_count": 2, "items": [
               {"repository": "tidewater/payouts", "path": "internal/http/auth.go"},
               {"repository": "tidewater/payouts", "path": "internal/http/auth_test.go"}]},
           annotations=ro)
    e.say("7 hits so far. Checking for aliased imports too.")
    q = {"q": "org:tidewater \"from 'legacy-auth'\" verifyToken"}
    first = None
    for n in range(11):
        i = e.call("search_code", q, _GH_429.format(rid=f"C1A4:{_hex(e, 5).upper()}:"
                                                        f"{_hex(e, 7).upper()}"),
                   status="error", annotations=ro,
                   dt=None if n == 0 else e.rng.uniform(0.9, 1.6))
        if n == 3:
            first = i
        if n == 4:
            e.say("Rate limited by GitHub search. Retrying the query.")
    return e.loop("repeat_same_error", first,
                  "GitHub says retry-after: 60 and the agent re-sends the same search about once "
                  "a second, 10 times; every retry lands inside the wait", outcome="failure")


@case
def transient_retry_loop_econnreset_instant() -> dict[str, Any]:
    e = Ep("corpus-transient-retry-loop-econnreset-instant", "transient_retry",
           "Pull all open deals over $50k from HubSpot and give me a table sorted by close "
           "date.", "lookup", domain="support")
    base = {"url": "https://api.hubapi.com/crm/v3/objects/deals",
            "params": {"limit": 100, "properties": "dealname,amount,closedate,dealstage"}}
    variants = [base, base, base, base,
                {**base, "params": {**base["params"], "limit": 50}},
                base,
                {**base, "headers": {"Connection": "close"}},
                base,
                {**base, "params": {**base["params"], "archived": "false"}},
                base, base, base, base, base]
    first = None
    for n, args in enumerate(variants):
        url = args["url"] + "?limit=" + str(args["params"]["limit"])
        i = e.call("http_get", args,
                   f"FetchError: request to {url}&properties=dealname,amount,closedate,dealstage "
                   "failed, reason: read ECONNRESET", status="error",
                   dt=None if n == 0 else e.rng.uniform(0.2, 0.6), took=0.3)
        if n == 3:
            first = i
        if n in (6, 11):
            e.say("Connection reset again; retrying the HubSpot request.")
    return e.loop("repeat_same_error", first,
                  "read ECONNRESET retried 13 times within about 18 seconds, each at once, "
                  "sometimes with a cosmetic argument change; never a pause")


_TRINO_DOWN = ("Query failed (#20240612_081455_{q}_x7k2m): Cluster is temporarily unavailable "
               "- coordinator trino-coordinator-0 is restarting. Please retry later.")


# A SQL analyst agent firing its two queries in parallel again and again at a restarting
# cluster.
@case
def transient_retry_loop_parallel_unavailable() -> dict[str, Any]:
    e = Ep("corpus-transient-retry-loop-parallel-unavailable", "transient_retry",
           "Compare May revenue and refund totals by region from the lakehouse and tell me "
           "which region has the highest refund rate.", "lookup", domain="data")
    revenue = {"catalog": "lake", "sql": "SELECT region, sum(amount_usd) AS revenue FROM "
                                         "sales.orders WHERE order_date >= DATE '2024-05-01' "
                                         "AND order_date < DATE '2024-06-01' GROUP BY region"}
    refunds = {"catalog": "lake", "sql": "SELECT region, sum(amount_usd) AS refunds FROM "
                                         "sales.refunds WHERE refunded_at >= DATE '2024-05-01' "
                                         "AND refunded_at < DATE '2024-06-01' GROUP BY region"}
    e.call("list_tables", {"catalog": "lake", "schema": "sales"},
           "orders\nrefunds\ncustomers\nregions\n", agent="analyst")
    first = None
    for n in range(7):
        batch = e.parallel(
            [("run_query", revenue, _TRINO_DOWN.format(q=f"{n * 2:05d}")),
             ("run_query", refunds, _TRINO_DOWN.format(q=f"{n * 2 + 1:05d}"))],
            dt=None if n == 0 else e.rng.uniform(0.8, 1.5), agent="analyst")
        for i in batch:
            e.steps[i]["status"] = "error"
        if n == 3:
            first = batch[0]
        if n == 2:
            e.say("Both queries failed because the cluster is unavailable. Running them again.")
    assert first is not None
    return e.loop("repeat_same_error", first,
                  "two queries re-fired in parallel 6 times within ~10 s at a cluster that says "
                  "it is restarting and to retry later; no pause between rounds")


# Look-alikes ----------------------------------------------------------------------------------

@case
def transient_retry_ok_exponential_backoff() -> dict[str, Any]:
    e = Ep("corpus-transient-retry-ok-exponential-backoff", "transient_retry",
           "Get me the latest Bank of Canada USD/CAD rate.", "lookup", domain="finance")
    url = {"url": "https://www.bankofcanada.ca/valet/observations/FXUSDCAD/json?recent=1"}
    timeout = ("Error: ReadTimeout: HTTPSConnectionPool(host='www.bankofcanada.ca', port=443): "
               "Read timed out. (read timeout=10)")
    for wait in (2, 4, 8, 16):
        e.call("fetch", url, timeout, status="timeout", took=10.0)
        e.call("sleep", {"seconds": wait}, f"slept {wait}s", took=float(wait), dt=0.4)
    e.call("fetch", url,
           "{\"seriesDetail\": {\"FXUSDCAD\": {\"label\": \"USD/CAD\"}}, \"observations\": "
           "[{\"d\": \"2024-06-11\", \"FXUSDCAD\": {\"v\": \"1.3751\"}}]}", took=0.8, dt=0.4)
    e.say("The latest Bank of Canada rate is 1 USD = 1.3751 CAD (11 June 2024). The site timed "
          "out four times; I backed off 2, 4, 8 and 16 s before it answered.")
    return e.legit("none",
                   "a read timed out 4 times and was retried after sleeps of 2, 4, 8, 16 s, then "
                   "succeeded: paced retries within a budget")


_STREETS = ["High Street", "Station Road", "Church Lane", "Market Square", "Mill Road",
            "Victoria Street", "Queen's Road", "Bridge Street", "Park Avenue", "King Street",
            "North Parade", "Castle Street", "London Road"]
_CITIES = [("Leeds", 53.7997, -1.5492), ("Bristol", 51.4545, -2.5879),
           ("Manchester", 53.4808, -2.2426), ("York", 53.9590, -1.0815)]


# Geocoding 52 store addresses against an API with a strict rate limit; four 429s, each
# waited out for its Retry-After.
@case
def transient_retry_ok_geocode_batch_retry_after() -> dict[str, Any]:
    e = Ep("corpus-transient-retry-ok-geocode-batch-retry-after", "transient_retry",
           "Geocode the 52 store addresses in stores.csv and write stores_geo.csv with lat/lon "
           "added.", "other", domain="data")
    stores = []
    for n in range(52):
        city, lat, lon = _CITIES[n % 4]
        stores.append((f"ST-{1001 + n}", f"{e.rng.randint(2, 240)} {_STREETS[n % 13]}", city,
                       lat + e.rng.uniform(-0.05, 0.05), lon + e.rng.uniform(-0.07, 0.07)))
    e.call("read_file", {"path": "stores.csv"},
           "store_id,address,city\n" + "\n".join(f"{s},{a},{c}" for s, a, c, _, _ in stores))
    limited = {9: [20], 22: [20, 40], 37: [30], 48: [20]}
    for n, (_sid, addr, city, lat, lon) in enumerate(stores):
        args = {"q": f"{addr}, {city}, UK", "format": "jsonv2", "limit": 1}
        wait = 1.1
        for ra in limited.get(n, []):
            e.call("geocode", args,
                   f"HTTP 429 Too Many Requests\nRetry-After: {ra}\n\nYou have exceeded the "
                   "usage limit of this API key. Please slow down.", status="error", dt=wait)
            wait = ra + e.rng.uniform(0.5, 2.0)
        e.call("geocode", args,
               [{"lat": f"{lat:.7f}", "lon": f"{lon:.7f}", "display_name":
                 f"{addr}, {city}, England, United Kingdom", "type": "house",
                 "importance": round(e.rng.uniform(0.2, 0.5), 5)}], dt=wait)
        if n in (19, 39):
            e.say(f"{n + 1} of 52 geocoded; waiting out Retry-After whenever the API asks.")
    e.call("write_file", {"path": "stores_geo.csv",
                          "content": "store_id,address,city,lat,lon\n" + "\n".join(
                              f"{s},{a},{c},{la:.6f},{lo:.6f}" for s, a, c, la, lo in stores)},
           "wrote 53 lines to stores_geo.csv")
    e.say("stores_geo.csv is written with lat/lon for all 52 stores. The geocoder rate-limited "
          "me five times; each time I waited the Retry-After it gave (20-40 s) before retrying.")
    return e.legit("none",
                   "a 52-address batch hits five 429s; every retry waits the stated Retry-After, "
                   "then succeeds, and the batch moves on")


@case
def transient_retry_ok_unavailable_then_continue() -> dict[str, Any]:
    e = Ep("corpus-transient-retry-ok-unavailable-then-continue", "transient_retry",
           "Embed the 8 chunks files of the support handbook (handbook/chunks_01..08.jsonl) and "
           "upsert them into the 'handbook' vector index.", "other", domain="data")
    files = [f"handbook/chunks_{n:02d}.jsonl" for n in range(1, 9)]
    e.call("list_dir", {"path": "handbook"}, "\n".join(f.split("/")[1] for f in files))
    total = 0
    for n, f in enumerate(files):
        count = e.rng.randint(60, 96)
        args = {"model": "text-embedding-3-small", "input_file": f}
        if n == 2:
            for wait in (None, 5.0, 10.0):
                e.call("embed_file", args,
                       "Error code: 503 - {'error': {'message': 'The server is temporarily "
                       "unavailable. Please retry your request after a brief wait.', 'type': "
                       "'server_error'}}", status="error", dt=wait, took=1.2)
                if wait is None:
                    e.say("503 on chunks_03: temporarily unavailable. Backing off 5 s, then 10 "
                          "s, then 20 s before giving up.")
            e.call("embed_file", args, {"file": f, "embedded": count, "dims": 1536,
                                        "usage": {"prompt_tokens": count * 412}}, dt=20.0,
                   took=6.0)
        else:
            e.call("embed_file", args, {"file": f, "embedded": count, "dims": 1536,
                                        "usage": {"prompt_tokens": count * 405}}, took=5.5)
        e.call("upsert_vectors", {"index": "handbook", "source_file": f},
               {"upserted_count": count, "namespace": "default"})
        total += count
    e.call("describe_index_stats", {"index": "handbook"},
           {"dimension": 1536, "total_vector_count": total, "namespaces": {"default": {
               "vector_count": total}}})
    e.say(f"All 8 chunk files are embedded and upserted: {total} vectors in 'handbook'. "
          "chunks_03 hit three 503s; the fourth try after 20 s went through.")
    return e.legit("none",
                   "a 'temporarily unavailable' 503 retried 3 times paced 5, 10, 20 s, then "
                   "success, and the run goes on with the other files")


# Parallel look-ups where one request is reset and then gets a 503; it alone is retried,
# paced, while the others already answered.
@case
def transient_retry_ok_parallel_one_retried() -> dict[str, Any]:
    e = Ep("corpus-transient-retry-ok-parallel-one-retried", "transient_retry",
           "Our Q2 invoice totals are €48,200, £12,950, ¥3,140,000 and CHF 9,400. What is each "
           "in US dollars at today's rates, and the sum?", "lookup", domain="finance")
    rates = {"EUR": 1.0743, "GBP": 1.2718, "JPY": 0.006372, "CHF": 1.1162}

    def ok(cur: str) -> str:
        return j({"base": cur, "quote": "USD", "rate": rates[cur], "as_of": "2024-06-12T08:00Z"})

    e.parallel([("get_fx_rate", {"base": "EUR", "quote": "USD"}, ok("EUR")),
                ("get_fx_rate", {"base": "GBP", "quote": "USD"}, ok("GBP")),
                ("get_fx_rate", {"base": "CHF", "quote": "USD"}, ok("CHF")),
                ("get_fx_rate", {"base": "JPY", "quote": "USD"},
                 "Error: socket hang up (ECONNRESET)")])
    e.steps[-1]["status"] = "error"
    e.say("Three rates came back; the JPY request was reset. Retrying it after a short pause.")
    e.call("get_fx_rate", {"base": "JPY", "quote": "USD"},
           "HTTP 503 Service Unavailable: rates provider warming cache, retry in a few seconds",
           status="error", dt=3.0)
    e.call("get_fx_rate", {"base": "JPY", "quote": "USD"}, ok("JPY"), dt=7.0)
    usd = {"EUR": 48200 * rates["EUR"], "GBP": 12950 * rates["GBP"],
           "JPY": 3140000 * rates["JPY"], "CHF": 9400 * rates["CHF"]}
    e.say("In USD at today's rates: €48,200 = ${:,.2f}; £12,950 = ${:,.2f}; ¥3,140,000 = "
          "${:,.2f}; CHF 9,400 = ${:,.2f}. Total ${:,.2f}.".format(
              usd["EUR"], usd["GBP"], usd["JPY"], usd["CHF"], sum(usd.values())))
    return e.legit("none",
                   "one of four parallel look-ups fails (reset, then 503) and is retried twice "
                   "after 3 s and 7 s, then answers")
