"""Corpus cases: progress as new information, cycles by state, kinds without a declaration (issue 16, points 1-3).

Each builder writes one labelled episode with ``writer.Ep``; ``build_corpus.py`` collects
``CASES`` from this module.

Where ``first_loop_step`` points in these classes:

- ``normalised_output``: the 3rd call whose output, once normalised (records compared as a
  multiset, volatile fields such as ids, timings and AGE masked, echoes of the call's own
  arguments masked), carries the same facts: the first such answer and two more that add
  nothing to it (as the README counts "the 3rd same output under jittered arguments"); for
  a batch of calls replayed in another order, the 3rd occurrence of a call.
- ``state_cycle``: the call that completes the second full cycle of recurring outputs
  (A→B→A→B, or A→B→C→A→B→C), counted from the first call of the cycle.
- ``inferred_kind``: by the kind the tool turns out to have once inferred (annotations,
  HTTP method, name, parsed shell command): a read spun with the same result → the 3rd
  identical read; an idempotent write repeated with no effect → the 3rd; a write with an
  unknown outcome retried before any look-up → the first retry; a duplicate after a
  success → the first duplicate; a write refused for the same reason → the 3rd refusal; a
  poll of a state waiting cannot fix → the 3rd poll returning it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from writer import Ep, j, registry

CASES, case = registry()

_HEX = "0123456789abcdef"
_B36 = "abcdefghijklmnopqrstuvwxyz0123456789"


def _hex(e: Ep, n: int) -> str:
    return "".join(e.rng.choices(_HEX, k=n))


def _b36(e: Ep, n: int) -> str:
    return "".join(e.rng.choices(_B36, k=n))


def _stamp(e: Ep, base: dt.datetime) -> str:
    """A wall-clock timestamp a few seconds after the episode's clock, ISO 8601 UTC."""
    at = base + dt.timedelta(seconds=e.t + e.rng.uniform(0.8, 3.5))
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


# ==== normalised_output: no new fact once outputs are normalised ===============================

_PG17 = [
    {"title": "Versioning Policy - PostgreSQL",
     "url": "https://www.postgresql.org/support/versioning/",
     "snippet": "The PostgreSQL Global Development Group supports a major version for 5 years "
                "after its initial release. After its five year anniversary, a major version "
                "will have one last minor release containing any fixes..."},
    {"title": "PostgreSQL 17 Released!",
     "url": "https://www.postgresql.org/about/news/postgresql-17-released-2936/",
     "snippet": "September 26, 2024 - The PostgreSQL Global Development Group today announced "
                "the release of PostgreSQL 17, the latest version of the world's most advanced "
                "open source database."},
    {"title": "PostgreSQL | endoflife.date", "url": "https://endoflife.date/postgresql",
     "snippet": "Check end-of-life, release policy and support schedule for PostgreSQL."},
    {"title": "PostgreSQL: Release Notes 17.0",
     "url": "https://www.postgresql.org/docs/release/17.0/",
     "snippet": "Release date: 2024-09-26. PostgreSQL 17 contains many new features and "
                "enhancements, including incremental backup and a new memory management "
                "system for VACUUM."},
    {"title": "Version policy - Azure Database for PostgreSQL",
     "url": "https://learn.microsoft.com/en-us/azure/postgresql/flexible-server/"
            "concepts-version-policy",
     "snippet": "Azure Database for PostgreSQL supports a major version until its community "
                "retirement date; see the community versioning policy for dates."},
]


def _serp(e: Ep, query: str, results: list[dict[str, str]]) -> dict[str, Any]:
    """A search API answer: the same records in a fresh order, a fresh id and timing."""
    rows = list(results)
    e.rng.shuffle(rows)
    return {"search_id": f"srch_{_hex(e, 20)}", "query": query,
            "took_ms": e.rng.randint(210, 980), "results": rows}


# After the web_search spirals reported for research agents (hermes-agent-evolution #700:
# "web_search loops into repeated queries without synthesis", up to 19 searches in a row).
@case
def normalised_output_loop_search_reworded() -> dict[str, Any]:
    e = Ep("corpus-normalised-output-loop-search-reworded", "normalised_output",
           "When does PostgreSQL 17 stop getting security fixes? I need the exact end-of-life "
           "date and a source for our upgrade plan.", "research", domain="research")
    queries = ["postgres 17 end of life date", "PostgreSQL 17 EOL",
               "when does postgresql 17 support end",
               "postgresql 17 end of support date security fixes",
               "postgres 17 final release date EOL", "PostgreSQL version 17 lifecycle end",
               "pg17 end of life november"]
    e.say("I'll search for the PostgreSQL 17 end-of-life date.")
    first = None
    for n, q in enumerate(queries):
        i = e.call("web_search", {"query": q, "num_results": 5}, _serp(e, q, _PG17))
        if n == 2:
            first = i
        if n == 0:
            e.say("The results mention a five-year support policy but no exact date. Let me "
                  "search more specifically.")
        if n == 3:
            e.say("Still no explicit end date in the results. Trying a different phrasing.")
        if n == 5:
            e.say("Let me try one more query to find the exact EOL date.")
    assert first is not None
    return e.loop("param_jitter", first,
                  "7 rewordings of one question return the same 5 pages in a new order with a "
                  "fresh search_id; the agent never opens the versioning page with the date")


_OVERDUE_ROWS = [
    "('Summit Freight', 4, Decimal('26104.80'))",
    "('Brightline Logistics', 3, Decimal('18420.00'))",
    "('Orchard & Vine', 2, Decimal('7895.25'))",
    "('Kestrel Foods', 1, Decimal('2310.50'))",
    "('Pioneer Dental Group', 1, Decimal('1200.00'))",
]

_BILLING_SCHEMA = """
CREATE TABLE customers (
\tid INTEGER NOT NULL, 
\tname VARCHAR(120) NOT NULL, 
\tsegment VARCHAR(20), 
\tcreated_at TIMESTAMP, 
\tPRIMARY KEY (id)
)

/*
3 rows from customers table:
id\tname\tsegment\tcreated_at
1\tBrightline Logistics\tmid-market\t2021-03-14 09:12:00
2\tKestrel Foods\tsmb\t2021-05-02 16:40:00
3\tSummit Freight\tenterprise\t2020-11-23 11:05:00
*/


CREATE TABLE invoices (
\tid INTEGER NOT NULL, 
\tcustomer_id INTEGER NOT NULL, 
\tamount NUMERIC(12, 2) NOT NULL, 
\tdue_date DATE NOT NULL, 
\tpaid_at TIMESTAMP, 
\tstatus VARCHAR(12) NOT NULL, 
\tPRIMARY KEY (id), 
\tFOREIGN KEY(customer_id) REFERENCES customers (id)
)

/*
3 rows from invoices table:
id\tcustomer_id\tamount\tdue_date\tpaid_at\tstatus
10231\t1\t6140.00\t2024-01-31\tNone\topen
10232\t2\t2310.50\t2024-02-15\tNone\topen
10233\t3\t5890.00\t2024-02-29\t2024-03-04 10:22:00\tpaid
*/"""


# After text-to-SQL agents that keep regenerating near-identical queries until the graph's
# recursion limit (JetBrains/databao-agent #177; LangChain's sql_db_query toolkit).
@case
def normalised_output_loop_sql_row_order() -> dict[str, Any]:
    e = Ep("corpus-normalised-output-loop-sql-row-order", "normalised_output",
           "Which customers have invoices more than 90 days overdue, and how much do they owe "
           "in total?", "lookup", domain="finance", id_style="openai")
    e.call("sql_db_list_tables", {"tool_input": ""}, "customers, invoices, payments, plans")
    e.call("sql_db_schema", {"table_names": "customers, invoices"}, _BILLING_SCHEMA)
    queries = [
        "SELECT c.name, COUNT(i.id), SUM(i.amount) FROM customers c JOIN invoices i ON "
        "i.customer_id = c.id WHERE i.status = 'open' AND i.due_date < CURRENT_DATE - "
        "INTERVAL '90 days' GROUP BY c.name",
        "SELECT c.name, COUNT(*) AS n_invoices, SUM(i.amount) AS total_due FROM invoices i "
        "JOIN customers c ON c.id = i.customer_id WHERE i.paid_at IS NULL AND i.status = "
        "'open' AND CURRENT_DATE - i.due_date > 90 GROUP BY c.name",
        "SELECT c.name, COUNT(i.id) AS overdue_invoices, SUM(i.amount) AS outstanding FROM "
        "customers c INNER JOIN invoices i ON c.id = i.customer_id WHERE i.status = 'open' "
        "AND i.due_date <= CURRENT_DATE - 91 GROUP BY c.id, c.name",
        "SELECT c.name, COUNT(i.id), SUM(i.amount) FROM customers c JOIN invoices i ON "
        "i.customer_id = c.id WHERE i.status = 'open' AND i.due_date < CURRENT_DATE - "
        "INTERVAL '90 days' GROUP BY c.name HAVING SUM(i.amount) > 0",
        "SELECT name, cnt, total FROM (SELECT c.name, COUNT(i.id) AS cnt, SUM(i.amount) AS "
        "total FROM invoices i JOIN customers c ON c.id = i.customer_id WHERE i.status = "
        "'open' AND i.due_date < CURRENT_DATE - 90 GROUP BY c.name) t",
        "SELECT c.name, COUNT(i.id), SUM(i.amount) FROM invoices i, customers c WHERE "
        "c.id = i.customer_id AND i.status = 'open' AND i.due_date < (now() - interval "
        "'90 day')::date GROUP BY 1",
        "SELECT c.name, COUNT(i.id) AS invoices_overdue, SUM(i.amount) AS amount_owed FROM "
        "customers AS c JOIN invoices AS i ON i.customer_id = c.id WHERE i.status = 'open' "
        "AND i.due_date < CURRENT_DATE - INTERVAL '3 months' GROUP BY c.name",
        "SELECT c.name, COUNT(i.id), SUM(i.amount) FROM customers c LEFT JOIN invoices i ON "
        "i.customer_id = c.id WHERE i.status = 'open' AND i.due_date < CURRENT_DATE - "
        "INTERVAL '90 days' GROUP BY c.name",
    ]
    e.call("sql_db_query_checker", {"query": queries[0]}, queries[0])
    notes = {
        0: "I have five customers. Let me double-check the overdue condition with a date "
           "difference instead of an interval.",
        2: "The numbers look the same, but I want to make sure the join isn't dropping "
           "anything.",
        4: "Let me verify the totals once more with a subquery.",
        6: "I'll run the query again to confirm before answering.",
    }
    first = None
    for n, sql in enumerate(queries):
        rows = list(_OVERDUE_ROWS)
        e.rng.shuffle(rows)
        i = e.call("sql_db_query", {"query": sql}, "[" + ", ".join(rows) + "]",
                   took=e.rng.uniform(0.2, 0.9))
        if n == 2:
            first = i
        if n in notes:
            e.say(notes[n])
    assert first is not None
    return e.loop("param_jitter", first,
                  "8 rewrites of one overdue-invoice query return the same 5 rows in a "
                  "different order; the answer (5 customers, $55,930.55) never reaches the user")


_JOBS = [
    ("Staff Data Engineer, Payments", "Berlin, Germany · Hybrid", 4471903),
    ("Staff Data Engineer, Platform", "Remote (EU)", 4471920),
    ("Senior Staff Data Engineer, ML Infrastructure", "Amsterdam, Netherlands", 4468811),
    ("Staff Analytics Engineer", "London, UK · Hybrid", 4470342),
    ("Staff Data Engineer, Streaming", "Remote (US)", 4472015),
    ("Staff Software Engineer, Data Platform", "New York, NY", 4465530),
    ("Staff Data Engineer, Marketplace", "Berlin, Germany · Hybrid", 4472381),
    ("Principal Data Engineer", "Remote (EU)", 4459902),
    ("Staff Data Engineer, Risk", "Dublin, Ireland", 4472440),
    ("Staff Data Engineer, Search", "Remote (US)", 4466127),
    ("Staff Data Engineer, Identity", "Toronto, Canada", 4472518),
    ("Staff Data Engineer, Growth", "London, UK · Hybrid", 4469774),
    ("Staff Data Quality Engineer", "Remote (EU)", 4471002),
    ("Staff Data Engineer, Finance Systems", "New York, NY", 4472603),
    ("Staff Data Engineer, Logistics", "Amsterdam, Netherlands", 4470919),
    ("Staff Data Engineer, Customer Data Platform", "Remote (US)", 4472677),
    ("Staff Machine Learning Data Engineer", "Berlin, Germany · Hybrid", 4468240),
    ("Staff Data Engineer, Ads Measurement", "New York, NY", 4472710),
    ("Staff Data Engineer, Lakehouse", "Remote (EU)", 4467355),
    ("Staff Data Engineer, Privacy", "Dublin, Ireland", 4472788),
    ("Staff Data Engineer, Observability", "Remote (US)", 4471566),
    ("Staff Data Engineer, Pricing", "London, UK · Hybrid", 4472801),
    ("Staff Data Engineer, Supply Chain", "Toronto, Canada", 4470088),
    ("Staff Data Engineer, Trust & Safety", "Remote (EU)", 4472859),
]
_JOBS_URL = "https://careers.northwind-labs.com/jobs?q=staff+data+engineer&page={}"


def _pw_page(code: str, url: str, title: str, yaml: str) -> str:
    """A Playwright MCP tool result: the code it ran and the page snapshot."""
    return (f"### Ran Playwright code\n```js\n{code}\n```\n\n### Page state\n"
            f"- Page URL: {url}\n- Page Title: {title}\n- Page Snapshot:\n```yaml\n{yaml}\n```")


def _jobs_page(page: int) -> str:
    url = _JOBS_URL.format(page)
    rows = _JOBS[(page - 1) * 10:page * 10]
    banner = ("- banner [ref=e1]:\n  - link \"Northwind Labs\" [ref=e5]:\n    - /url: /\n"
              "  - searchbox \"Search jobs\" [ref=e9]: staff data engineer\n")
    if rows:
        lines = [f"- main [ref=e12]:\n  - heading \"{len(_JOBS)} open positions for \\\"staff "
                 f"data engineer\\\"\" [level=1] [ref=e14]\n  - list [ref=e15]:"]
        ref = 16
        for title, loc, jid in rows:
            lines.append(f"    - listitem [ref=e{ref}]:\n      - link \"{title}\" [ref=e{ref + 1}]:"
                         f"\n        - /url: /jobs/{jid}\n      - text: {loc}")
            ref += 2
        lo, hi = (page - 1) * 10 + 1, (page - 1) * 10 + len(rows)
        nav = (f"  - navigation \"Pagination\" [ref=e{ref}]:\n"
               f"    - text: Showing {lo}-{hi} of {len(_JOBS)}")
        if page > 1:
            nav += f"\n    - link \"Previous\" [ref=e{ref + 1}]"
        if hi < len(_JOBS):
            nav += f"\n    - link \"Next\" [ref=e{ref + 2}]"
        yaml = banner + "\n".join(lines) + "\n" + nav
    else:
        yaml = (banner + f"- main [ref=e12]:\n  - heading \"No results for page {page}\" [level=1] "
                f"[ref=e14]\n  - paragraph [ref=e15]: We couldn't find any positions matching "
                f"\"staff data engineer\" on page {page}.\n  - link \"Back to page 1\" [ref=e16]:"
                f"\n    - /url: /jobs?q=staff+data+engineer&page=1")
    return _pw_page(f"await page.goto('{url}');", url,
                    f"Search jobs (page {page}) | Northwind Labs Careers", yaml)


# After browser agents paging past the end of a listing (OpenHands' documented
# "Browser-Loop-001"); every empty page echoes its own number back.
@case
def normalised_output_loop_no_results_pages() -> dict[str, Any]:
    e = Ep("corpus-normalised-output-loop-no-results-pages", "normalised_output",
           "Collect every open 'staff data engineer' posting on careers.northwind-labs.com: "
           "title, location and link. I want the complete list.", "research",
           domain="browser")
    first = None
    for page in range(1, 11):
        i = e.call("browser_navigate", {"url": _JOBS_URL.format(page)}, _jobs_page(page),
                   took=e.rng.uniform(0.8, 2.2))
        if page == 3:
            e.say("Page 3 shows postings 21-24 of 24. Let me make sure there are no more "
                  "pages.")
        if page == 4:
            e.say("Page 4 has no results; the listing may paginate differently. Checking "
                  "page 5.")
        if page == 6:
            first = i
        if page == 7:
            e.say("Still empty. There may be more postings further on; continuing to the next "
                  "pages.")
    assert first is not None
    return e.loop("output_stagnation", first,
                  "after the last page (21-24 of 24) pages 4-10 all return the same 'No results "
                  "for page N' template; only the echoed page number changes")


_PENDING_PODS = [("checkout-api-5d8f7b9c6-7wq4n", 0), ("checkout-api-5d8f7b9c6-h2xkp", 0),
                 ("checkout-api-5d8f7b9c6-rz9tm", 0)]


def _checkout_pods(age_s: int, *, only_api: bool = False, only_pending: bool = False,
                   exit_line: bool = True) -> str:
    age = f"{age_s // 60}m{age_s % 60}s"
    rows = [(name, "0/1", "Pending", "0", age) for name, _ in _PENDING_PODS]
    if not only_pending:
        rows += [("checkout-api-7c4b6d5f8-9dlqs", "1/1", "Running", "0", "6d3h"),
                 ("checkout-api-7c4b6d5f8-kx2vb", "1/1", "Running", "0", "6d3h")]
        if not only_api:
            rows.append(("checkout-worker-6b9d8c7f5-ptn4z", "1/1", "Running", "0", "6d3h"))
    head = f"{'NAME':<34}{'READY':<8}{'STATUS':<10}{'RESTARTS':<11}AGE"
    table = "\n".join([head] + [f"{n:<34}{r:<8}{s:<10}{x:<11}{a}" for n, r, s, x, a in rows])
    return f"Exit code: 0\n\nCommand output:\n\n```\n{table}\n```" if exit_line else table


# After Cursor agent sessions that re-run `kubectl get pods` with new flags while a rollout
# is stuck; only AGE moves between runs.
@case
def normalised_output_loop_kubectl_age() -> dict[str, Any]:
    e = Ep("corpus-normalised-output-loop-kubectl-age", "normalised_output",
           "I bumped checkout-api's CPU request to 4 cores and the new pods never start. Find "
           "out why. Namespace is checkout.", "other", domain="devops", id_style="anthropic")
    runs = [
        ("kubectl get pods -n checkout", "List pods in the checkout namespace", {}),
        ("kubectl get pods -n checkout -l app=checkout-api", "List only checkout-api pods",
         {"only_api": True}),
        ("kubectl get po -n checkout", "Check pod status again", {}),
        ("kubectl get pods --namespace=checkout --field-selector=status.phase=Pending",
         "Show only the pending pods", {"only_pending": True}),
        ("kubectl -n checkout get pods", "See whether the new pods have started", {}),
        ("kubectl get pods -n checkout -l app=checkout-api "
         "--sort-by=.metadata.creationTimestamp", "Sort checkout-api pods by age",
         {"only_api": True}),
        ("kubectl get pods -n checkout", "Re-check pod status", {}),
        ("kubectl get pods -n checkout -l app=checkout-api", "Check checkout-api pods",
         {"only_api": True}),
    ]
    age = 134
    first = None
    for n, (cmd, why, kw) in enumerate(runs):
        i = e.call("run_terminal_cmd", {"command": cmd, "is_background": False,
                                        "explanation": why},
                   _checkout_pods(age, **kw), took=e.rng.uniform(0.6, 1.4))
        age += e.rng.randint(18, 34)
        if n == 2:
            first = i
        if n == 0:
            e.say("Three new checkout-api pods are Pending while the old ReplicaSet is still "
                  "running. Let me look at just the checkout-api pods.")
        if n == 3:
            e.say("The new pods are still Pending. Checking again to see if they get "
                  "scheduled.")
        if n == 5:
            e.say("They remain Pending. Let me look at the pods once more.")
        e.wait(e.rng.uniform(2.0, 9.0))
    assert first is not None
    return e.loop("param_jitter", first,
                  "8 variants of `kubectl get pods` show the same 3 Pending pods; only AGE moves. "
                  "`kubectl describe pod` (FailedScheduling: Insufficient cpu) is never run")


_PRICING = {
    "https://trackwise.io/pricing":
        "# Trackwise pricing\n\n| Plan | Price |\n|---|---|\n| Free | $0, up to 10 users |\n"
        "| Team | $8 per user / month, billed annually ($10 billed monthly) |\n"
        "| Business | $14 per user / month, billed annually ($17 billed monthly) |\n"
        "| Enterprise | Contact sales |",
    "https://sprintly.app/pricing":
        "# Plans for every team\n\n**Starter** - Free forever for up to 5 members\n\n"
        "**Team** - $9 /member/mo billed annually · $11 month-to-month\n\n"
        "**Scale** - $16 /member/mo billed annually\n\nAll plans include unlimited projects.",
    "https://www.taskforge.com/pricing":
        "# Taskforge Pricing\n\nBasic: free for personal use\n\nTeam: US$7.50 per seat per "
        "month when billed yearly (US$9 billed monthly)\n\nPro: US$12.50 per seat per month "
        "billed yearly",
    "https://boardline.co/pricing":
        "# Simple pricing\n\n[Monthly] [Annual - save 20%]\n\n## Free\n$0 - up to 3 boards\n\n"
        "## Team\n$12 per seat / month\n\n## Business\n$20 per seat / month\n\n"
        "Prices shown for monthly billing. Switch to annual billing to see annual prices.",
}
_PRICING_BASE = dt.datetime(2024, 6, 12, 9, 14, 0, tzinfo=dt.UTC)


def _fetched(e: Ep, url: str, content: str) -> dict[str, Any]:
    return {"url": url, "status": 200, "content_type": "text/markdown",
            "fetched_at": _stamp(e, _PRICING_BASE), "elapsed_ms": e.rng.randint(140, 1900),
            "content": content}


# After coding and research agents that re-issue a whole parallel batch of fetches "to
# confirm" (Cursor MCP loop, magicuidesign/mcp #5: the same three calls over and over).
@case
def normalised_output_loop_batch_replayed() -> dict[str, Any]:
    e = Ep("corpus-normalised-output-loop-batch-replayed", "normalised_output",
           "Compare the Team plan prices of Trackwise, Sprintly, Taskforge and Boardline, per "
           "user per month billed annually. A short table is fine.", "research",
           domain="research", id_style="anthropic")
    urls = list(_PRICING)
    orders = [(0, 1, 2, 3), (2, 0, 3, 1), (1, 3, 0, 2), (3, 2, 1, 0), (0, 2, 3, 1)]
    notes = ["Trackwise, Sprintly and Taskforge list annual prices, but Boardline's page shows "
             "monthly prices only. Let me re-check all four pages to be sure I have the annual "
             "figures.",
             "I want to confirm the prices before building the table. Fetching the pages "
             "again.",
             "Let me verify the pricing pages once more.",
             "Re-checking the four pricing pages."]
    first = None
    for b, order in enumerate(orders):
        ids = e.parallel([("web_fetch", {"url": urls[k], "format": "markdown"},
                           _fetched(e, urls[k], _PRICING[urls[k]])) for k in order],
                         dt=None if b == 0 else e.rng.uniform(3.0, 7.0))
        if b == 2:
            first = ids[0]
        if b < len(notes):
            e.say(notes[b])
    assert first is not None
    return e.loop("exact_repeat", first,
                  "the same 4 pricing pages are fetched in parallel 5 times in shuffled order, "
                  "same content, fresh timestamps; Boardline's annual price (?billing=annual) "
                  "is never asked for")


_CONF = {
    "884736": ("Incident Management Handbook", "SRE",
               "Severity levels SEV1-SEV4, incident roles (Incident Commander, Comms Lead, Scribe) "
               "and the escalation path for each severity..."),
    "901122": ("SEV1 Paging Runbook", "SRE",
               "SEV1: page the primary on-call through PagerDuty immediately; if there is no ack "
               "within 5 minutes the page escalates to the secondary and the duty EM..."),
    "955310": ("Escalation Matrix (2024)", "SRE",
               "SEV1: IC + duty EM within 15 min, VP Engineering within 30 min. SEV2: on-call "
               "ack within 15 min, EM informed within 1 h..."),
    "903471": ("SEV2 Response Targets", "SRE",
               "SEV2 incidents: acknowledge within 15 minutes, status page within 30 minutes; "
               "no after-hours management escalation unless customer-facing for more than 2 h..."),
    "962004": ("Production Change Freeze Policy", "ENG",
               "During a freeze, production changes need an approved exception. Exceptions are "
               "approved by..."),
    "712889": ("Change Advisory Board (CAB) Charter", "ENG",
               "The CAB reviews high-risk changes weekly; it does not approve freeze exceptions, "
               "which follow the Production Change Freeze Policy..."),
    "962118": ("Change Freeze Exception Request (template)", "ENG",
               "Use this template to request a freeze exception. Approver: VP Engineering "
               "(backup: Director of SRE). Include rollback plan and..."),
}


def _conf_search(e: Ep, query: str, ids: list[str]) -> dict[str, Any]:
    results = []
    for pid in ids:
        title, space, excerpt = _CONF[pid]
        results.append({"content": {"id": pid, "type": "page", "status": "current",
                                    "title": title},
                        "title": title, "excerpt": excerpt,
                        "url": f"/spaces/{space}/pages/{pid}/{title.replace(' ', '+')}",
                        "resultGlobalContainer": {"title": space},
                        "lastModified": f"2024-0{e.rng.randint(1, 5)}-{e.rng.randint(10, 28)}T"
                                        f"{e.rng.randint(8, 18)}:{e.rng.randint(10, 59)}:05.000Z"})
    return {"results": results, "start": 0, "limit": 10, "size": len(results),
            "totalSize": len(results),
            "cqlQuery": f"siteSearch ~ \"{query}\" and type = \"page\"",
            "searchDuration": e.rng.randint(28, 140)}


# The twin of the reworded-search loop: the same search tool, similar queries and
# overlapping hits, but every search brings at least one page not seen before.
@case
def normalised_output_ok_search_new_pages() -> dict[str, Any]:
    e = Ep("corpus-normalised-output-ok-search-new-pages", "normalised_output",
           "What's our escalation policy for SEV1 vs SEV2 incidents (who gets paged, how fast), "
           "and who can approve an exception to the production change freeze?", "research",
           domain="support")
    # lastModified is drawn once per page so a page looks the same in every result list
    stamps: dict[str, str] = {}

    def search(q: str, ids: list[str]) -> dict[str, Any]:
        out = _conf_search(e, q, ids)
        for r in out["results"]:
            r["lastModified"] = stamps.setdefault(r["content"]["id"], r["lastModified"])
        return out

    e.call("confluence_search", {"query": "SEV1 escalation", "limit": 10},
           search("SEV1 escalation", ["884736", "901122"]))
    e.call("confluence_search", {"query": "SEV1 escalation policy paging", "limit": 10},
           search("SEV1 escalation policy paging", ["901122", "884736", "955310"]))
    e.say("The escalation matrix is new. Now SEV2 targets and the freeze exception, in one go.")
    e.parallel([
        ("confluence_search", {"query": "SEV2 escalation response time", "limit": 10},
         search("SEV2 escalation response time", ["903471", "955310", "884736"])),
        ("confluence_search", {"query": "change freeze exception approval", "limit": 10},
         search("change freeze exception approval", ["962004", "712889", "884736"])),
    ])
    e.call("confluence_search", {"query": "freeze exception request approver", "limit": 10},
           search("freeze exception request approver", ["962118", "962004"]))
    e.call("confluence_get_page", {"page_id": "955310"},
           {"id": "955310", "title": "Escalation Matrix (2024)", "version": 7,
            "body": "| Severity | Paged | Ack target | Escalation |\n|---|---|---|---|\n"
                    "| SEV1 | primary on-call + IC | 5 min | secondary + duty EM at 5 min; VP "
                    "Engineering at 30 min |\n| SEV2 | primary on-call | 15 min | EM informed "
                    "within 1 h; no after-hours management page unless customer-facing > 2 h |\n"
                    "| SEV3/4 | ticket only | next business day | none |"})
    e.call("confluence_get_page", {"page_id": "962004"},
           {"id": "962004", "title": "Production Change Freeze Policy", "version": 12,
            "body": "During a freeze, production changes need an approved exception filed with "
                    "the Change Freeze Exception Request template. Exceptions are approved by "
                    "the VP of Engineering; if they are unavailable, by the Director of SRE. "
                    "Security fixes rated critical may ship with the on-call IC's approval and "
                    "a retroactive request within 24 h."})
    e.say("**SEV1**: the primary on-call and an Incident Commander are paged immediately; no ack "
          "in 5 minutes escalates to the secondary and the duty EM, and the VP of Engineering is "
          "brought in at 30 minutes.\n**SEV2**: the primary on-call is paged with a 15-minute ack "
          "target; the EM is informed within an hour, with no after-hours management page unless "
          "it has been customer-facing for over 2 hours.\n**Freeze exceptions**: approved by the "
          "VP of Engineering (backup: Director of SRE), filed with the exception template; "
          "critical security fixes can ship on the IC's approval with a request filed within "
          "24 h. Sources: Escalation Matrix (2024), Production Change Freeze Policy.")
    return e.legit("none",
                   "five similar searches with overlapping hits, each bringing a page not seen "
                   "before, then the two pages are read and the answer given")


_WH_HEAD = (" code | name       | status   | capacity_pallets | region\n"
            "------+------------+----------+------------------+--------\n")


def _wh_table(rows: list[tuple[str, str, str, int, str]]) -> str:
    body = "\n".join(f" {c} | {n:<10} | {s:<8} | {cap:>16} | {r}" for c, n, s, cap, r in rows)
    return _WH_HEAD + body + f"\n({len(rows)} rows)"


# The twin of the SQL re-run loop: the same SELECT four times, but each time after a write
# whose effect it shows.
@case
def normalised_output_ok_select_after_writes() -> dict[str, Any]:
    e = Ep("corpus-normalised-output-ok-select-after-writes", "normalised_output",
           "Add the new Reno-2 warehouse (code RNO2, 12,000 pallets, west region) to the ops "
           "database, mark Reno-1 as retiring, and show me the final warehouse list.",
           "transaction", domain="retail")
    sel = ("SELECT code, name, status, capacity_pallets, region FROM warehouses "
           "ORDER BY code;")
    rows = [("ATL1", "Atlanta-1", "active", 18000, "south"),
            ("CMH1", "Columbus-1", "active", 15500, "east"),
            ("PHX1", "Phoenix-1", "active", 14000, "west"),
            ("RNO1", "Reno-1", "active", 9000, "west")]
    e.call("execute_sql", {"database": "ops", "sql": sel}, _wh_table(rows))
    e.call("execute_sql", {"database": "ops",
                           "sql": "INSERT INTO warehouses (code, name, status, capacity_pallets, "
                                  "region) VALUES ('RNO2', 'Reno-2', 'active', 12000, 'west') "
                                  "RETURNING id;"},
           " id \n----\n 17\n(1 row)\n\nINSERT 0 1")
    rows.append(("RNO2", "Reno-2", "active", 12000, "west"))
    e.call("execute_sql", {"database": "ops", "sql": sel}, _wh_table(rows))
    e.call("execute_sql", {"database": "ops",
                           "sql": "SELECT count(*) AS open_lots FROM inventory_lots WHERE "
                                  "warehouse_code = 'RNO1' AND qty > 0;"},
           " open_lots \n-----------\n      1312\n(1 row)")
    e.say("Reno-1 still holds 1,312 open lots; marking it retiring doesn't move stock, so I'll "
          "go ahead.")
    e.call("execute_sql", {"database": "ops",
                           "sql": "UPDATE warehouses SET status = 'retiring' WHERE code = "
                                  "'RNO1';"}, "UPDATE 1")
    rows[3] = ("RNO1", "Reno-1", "retiring", 9000, "west")
    e.call("execute_sql", {"database": "ops", "sql": sel}, _wh_table(rows))
    e.say("Done. Warehouses now: ATL1, CMH1, PHX1 active; RNO1 retiring (1,312 open lots still "
          "there); RNO2 Reno-2 active with 12,000 pallets.")
    e.user("Actually make Reno-2 12,500 pallets, the racking quote came back higher.")
    e.call("execute_sql", {"database": "ops",
                           "sql": "UPDATE warehouses SET capacity_pallets = 12500 WHERE code = "
                                  "'RNO2';"}, "UPDATE 1")
    rows[4] = ("RNO2", "Reno-2", "active", 12500, "west")
    e.call("execute_sql", {"database": "ops", "sql": sel}, _wh_table(rows))
    e.say("Updated: RNO2 Reno-2 is active with 12,500 pallets. Final list: ATL1 Atlanta-1 "
          "(active, 18,000), CMH1 Columbus-1 (active, 15,500), PHX1 Phoenix-1 (active, 14,000), "
          "RNO1 Reno-1 (retiring, 9,000), RNO2 Reno-2 (active, 12,500).")
    return e.legit("none",
                   "the same SELECT runs 4 times, each right after an INSERT or UPDATE, and each "
                   "shows the write's effect; a user turn asks for the last change")


def _hpa(pct: int, replicas: int) -> str:
    return ("NAME           REFERENCE                 TARGETS        MINPODS   MAXPODS   "
            "REPLICAS   AGE\n"
            f"checkout-api   Deployment/checkout-api   cpu: {pct}%/60%{' ' * (6 - len(str(pct)))}"
            f"3         12        {replicas:<11}41d")


def _top(pods: list[tuple[str, int, int]]) -> str:
    lines = ["NAME                            CPU(cores)   MEMORY(bytes)"]
    lines += [f"{n:<32}{c}m{' ' * (12 - len(str(c)))}{m}Mi" for n, c, m in pods]
    return "\n".join(lines)


# Metrics whose values are the content: CPU% and replicas move because the load test moves
# them; a masker that treats every figure as volatile would see the same table each time.
@case
def normalised_output_ok_hpa_scaling() -> dict[str, Any]:
    e = Ep("corpus-normalised-output-ok-hpa-scaling", "normalised_output",
           "The load test against checkout-api starts now and runs about 6 minutes. Watch the "
           "HPA and the pods' CPU while it runs, then tell me how far it scaled and whether CPU "
           "settled under the 60% target.", "polling", domain="devops", id_style="openai")
    names = ["checkout-api-7c4b6d5f8-9dlqs", "checkout-api-7c4b6d5f8-kx2vb",
             "checkout-api-7c4b6d5f8-q8m2r", "checkout-api-7c4b6d5f8-2fjzt",
             "checkout-api-7c4b6d5f8-w7c4n", "checkout-api-7c4b6d5f8-hh5xd",
             "checkout-api-7c4b6d5f8-m3tqv", "checkout-api-7c4b6d5f8-zr9pk",
             "checkout-api-7c4b6d5f8-b6lwe"]
    rounds = [(38, 3, [230, 221, 244]), (141, 3, [842, 861, 829]),
              (118, 8, [702, 688, 731, 0, 0, 0, 0, 0]),
              (72, 8, [455, 431, 447, 418, 402, 433, 425, 410]),
              (66, 9, [401, 388, 395, 397, 380, 392, 379, 401, 355]),
              (59, 9, [356, 349, 361, 352, 340, 348, 357, 350, 346]),
              (57, 9, [345, 338, 349, 341, 336, 339, 344, 340, 337])]
    for n, (pct, replicas, cpus) in enumerate(rounds):
        pods = [(names[k], c, 380 + (k * 37) % 90 + (c // 9)) for k, c in enumerate(cpus)]
        top = _top([p for p in pods if p[1] > 0])  # pods younger than a minute have no metrics
        e.parallel([("shell", {"cmd": "kubectl get hpa checkout-api -n checkout"},
                     _hpa(pct, replicas)),
                    ("shell", {"cmd": "kubectl top pods -n checkout -l app=checkout-api"}, top)],
                   dt=None if n == 0 else e.rng.uniform(50.0, 58.0))
        if n == 2:
            e.say("CPU peaked at 141% of requests and the HPA went from 3 to 8 replicas; the new "
                  "pods are still warming up.")
    e.say("checkout-api scaled from 3 to 9 replicas (max 12) during the load test. CPU peaked "
          "at 141% of the request about a minute in, fell to 72% once 8 replicas were up, and "
          "settled at 57-59% with 9 replicas, under the 60% target, for the last two minutes.")
    return e.legit("poll_legit",
                   "the same two kubectl reads every ~55 s for the 6 minutes the task states; "
                   "replicas and CPU change meaningfully on every round")


_SUP_PREFIX = ["Apex", "Blue Ridge", "Cobalt", "Delta", "Evergreen", "Falcon", "Granite",
               "Harbor", "Iron Bay", "Juniper", "Keystone", "Lakeside", "Meridian", "Northstar",
               "Oakline", "Pinnacle", "Quarry", "Redwood", "Silverline", "Tidewater"]
_SUP_SUFFIX = ["Metals", "Packaging", "Logistics", "Plastics", "Electronics", "Textiles",
               "Chemicals", "Fasteners", "Paper Co.", "Components", "Foods", "Tooling",
               "Labels", "Glassworks"]
_SUP_CAT = ["raw materials", "packaging", "freight", "MRO", "electronics", "services"]
_SUP_COUNTRY = ["US", "DE", "MX", "CA", "PL", "VN", "IN", "GB"]


def _suppliers() -> list[dict[str, str]]:
    out = []
    for k in range(280):
        m = (k * 97) % 280  # a permutation of 0..279, so every name is distinct
        name = f"{_SUP_PREFIX[m % 20]} {_SUP_SUFFIX[m // 20]}"
        until = dt.date(2024, 7, 1) + dt.timedelta(days=(k * 53) % 880)
        out.append({"name": name, "category": _SUP_CAT[(k * 7) % 6],
                    "country": _SUP_COUNTRY[(k * 3) % 8], "approved_until": until.isoformat()})
    return out


# A long browser-use crawl: every navigation answers with the same one-line template (only
# the echoed URL changes), the extraction brings ten new suppliers each time, and the one
# "no results" page ends the crawl; the file is re-read once before answering.
@case
def normalised_output_ok_crawl_to_empty_page() -> dict[str, Any]:
    e = Ep("corpus-normalised-output-ok-crawl-to-empty-page", "normalised_output",
           "Go through the approved-supplier directory on procure.harborline.com and give me "
           "every supplier whose approval expires before the end of 2024, as a CSV.",
           "research", domain="browser", id_style="short")
    sups = _suppliers()
    assert len({s["name"] for s in sups}) == len(sups)
    url = "https://procure.harborline.com/suppliers/approved?page={}"
    goal = ("Extract every supplier on this page as JSON: name, category, country, "
            "approved_until")
    for page in range(1, 30):
        e.call("go_to_url", {"url": url.format(page)}, f"🔗  Navigated to {url.format(page)}",
               took=e.rng.uniform(0.6, 1.8))
        rows = sups[(page - 1) * 10:page * 10]
        if rows:
            lo = (page - 1) * 10 + 1
            payload = {"suppliers": rows, "showing": f"{lo}-{lo + len(rows) - 1}"}
        else:
            payload = {"suppliers": [], "message": f"No results for page {page}"}
        e.call("extract_content", {"goal": goal, "should_strip_link_urls": True},
               f"📄  Extracted from page\n: ```json\n{j(payload)}\n```\n",
               took=e.rng.uniform(2.0, 5.5))
        if page in (10, 20):
            e.say(f"Pages 1-{page} done: {page * 10} suppliers so far.")
    expiring = [s for s in sups if s["approved_until"] <= "2024-12-31"]
    csv = "name,category,country,approved_until\n" + "\n".join(
        f"{s['name']},{s['category']},{s['country']},{s['approved_until']}" for s in expiring)
    e.say(f"Page 29 is empty, so the directory has 280 suppliers. {len(expiring)} expire before "
          "2025; writing them to a CSV.")
    e.call("write_file", {"file_name": "expiring_2024.csv", "content": csv},
           "Data written to file expiring_2024.csv successfully.")
    e.call("read_file", {"file_name": "expiring_2024.csv"},
           f"Read from file expiring_2024.csv.\n<content>\n{csv}\n</content>")
    soonest = sorted(expiring, key=lambda s: s["approved_until"])[:3]
    e.say(f"The directory lists 280 approved suppliers (28 pages). {len(expiring)} have approvals "
          "expiring before the end of 2024; they are in expiring_2024.csv. The first to lapse: "
          + "; ".join(f"{s['name']} ({s['approved_until']})" for s in soonest) + ".")
    return e.legit("none",
                   "a 28-page crawl where every navigation looks the same but every extraction "
                   "brings 10 new suppliers; one empty page ends it and the file is read once")


_BOARDLINE_ANNUAL = (
    "# Simple pricing\n\n[Monthly] [Annual - save 20%]\n\n## Free\n$0 - up to 3 boards\n\n"
    "## Team\n$9.60 per seat / month, billed annually ($115.20 per seat per year)\n\n"
    "## Business\n$16 per seat / month, billed annually\n\n"
    "Prices shown for annual billing.")
_COMPARE = {
    "https://trackwise.io/pricing/compare":
        "# Compare plans\n\n| | Free | Team | Business |\n|---|---|---|---|\n"
        "| Guests | - | 5 per member | unlimited |\n| SSO (SAML) | - | - | yes |\n"
        "| Audit log | - | 30 days | 1 year |",
    "https://sprintly.app/pricing#compare":
        "# Everything in each plan\n\nTeam: unlimited guests, Google SSO, 90-day history.\n"
        "Scale: SAML SSO, audit log, unlimited history.",
    "https://www.taskforge.com/pricing/features":
        "# Features by plan\n\nTeam - 250 GB storage, guest access, no SSO.\n"
        "Pro - 1 TB storage, SAML SSO, admin roles.",
}


# The twin of the replayed batch: two parallel batches with different pages (the second
# asks for exactly what the first lacked), then one page re-checked because the user says
# it changed, and it did.
@case
def normalised_output_ok_batches_new_pages() -> dict[str, Any]:
    e = Ep("corpus-normalised-output-ok-batches-new-pages", "normalised_output",
           "Compare the Team plans of Trackwise, Sprintly, Taskforge and Boardline: price per "
           "user per month billed annually, and whether Team includes SSO.", "research",
           domain="research", id_style="anthropic")
    urls = list(_PRICING)
    e.parallel([("web_fetch", {"url": u, "format": "markdown"}, _fetched(e, u, _PRICING[u]))
                for u in (urls[1], urls[0], urls[3], urls[2])])
    e.say("Three pages give annual prices; Boardline shows monthly only. Fetching Boardline's "
          "annual view and the three plan-comparison pages for SSO.")
    extra = [("https://boardline.co/pricing?billing=annual", _BOARDLINE_ANNUAL),
             *_COMPARE.items()]
    e.parallel([("web_fetch", {"url": u, "format": "markdown"}, _fetched(e, u, c))
                for u, c in extra], dt=e.rng.uniform(3.0, 6.0))
    e.say("| Tool | Team, billed annually | SSO on Team |\n|---|---|---|\n"
          "| Trackwise | $8 | no (Business) |\n| Sprintly | $9 | Google SSO only |\n"
          "| Taskforge | $7.50 | no (Pro) |\n| Boardline | $9.60 | not listed |")
    e.user("Sprintly emailed us this morning that their prices changed today. Can you re-check "
           "them?")
    new = _PRICING[urls[1]].replace("$9 /member/mo billed annually · $11",
                                    "$10 /member/mo billed annually · $12")
    e.call("web_fetch", {"url": urls[1], "format": "markdown"}, _fetched(e, urls[1], new))
    e.say("Sprintly's Team plan is now $10 per member per month billed annually ($12 "
          "month-to-month), up from $9. Updated ranking, cheapest first: Taskforge $7.50, "
          "Trackwise $8, Boardline $9.60, Sprintly $10.")
    return e.legit("none",
                   "two parallel batches of different pages, the second asking for what the "
                   "first lacked; one page re-fetched because the user says it changed, and it did")


# ==== state_cycle: a 2-4 call cycle whose outputs recur ========================================

def _oh(out: str, rc: int = 0, cwd: str = "/workspace/tally") -> str:
    """An OpenHands execute_bash observation."""
    body = f"{out}\n" if out else ""
    return (f"{body}[The command completed with exit code {rc}.]\n"
            f"[Current working directory: {cwd}]\n"
            "[Python interpreter: /openhands/poetry/openhands-ai-5O4_aCHf-py3.12/bin/python]")


_CLEAN_AHEAD = ("On branch main\nYour branch is ahead of 'origin/main' by 1 commit.\n"
                "  (use \"git push\" to publish your local commits)\n\n"
                "nothing to commit, working tree clean")


# After gemini-cli #14892 ("Infinite loop when reviewing when there's nothing to review":
# git status / git diff on a clean tree, over and over) and OpenHands runs that re-commit a
# tree whose commit already landed.
@case
def state_cycle_loop_git_clean_commit() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-loop-git-clean-commit", "state_cycle",
           "Bump tally to 2.4.1 (pyproject.toml and src/tally/__init__.py), commit it as "
           "'Release 2.4.1', tag v2.4.1 and push both.", "coding", domain="coding",
           id_style="openai")
    e.call("execute_bash", {"command": "grep -n 'version' pyproject.toml src/tally/__init__.py",
                            "is_input": "false"},
           _oh("pyproject.toml:3:version = \"2.4.0\"\nsrc/tally/__init__.py:1:__version__ = "
               "\"2.4.0\""))
    for path, old, new, snippet in [
        ("/workspace/tally/pyproject.toml", "version = \"2.4.0\"", "version = \"2.4.1\"",
         "     1\t[project]\n     2\tname = \"tally\"\n     3\tversion = \"2.4.1\"\n     4\t"
         "description = \"Fast counters for event streams\""),
        ("/workspace/tally/src/tally/__init__.py", "__version__ = \"2.4.0\"",
         "__version__ = \"2.4.1\"",
         "     1\t__version__ = \"2.4.1\"\n     2\t\n     3\tfrom .core import Counter, "
         "Window"),
    ]:
        e.call("str_replace_editor", {"command": "str_replace", "path": path, "old_str": old,
                                      "new_str": new},
               f"The file {path} has been edited. Here's the result of running `cat -n` on a "
               f"snippet of {path}:\n{snippet}\nReview the changes and make sure they are as "
               "expected. Edit the file again if necessary.")
    e.call("execute_bash", {"command": "git add -A && git commit -m \"Release 2.4.1\"",
                            "is_input": "false"},
           _oh("[main 3f9c2ab] Release 2.4.1\n 2 files changed, 2 insertions(+), 2 deletions(-)"))
    e.call("execute_bash", {"command": "git tag v2.4.1 && git push origin main --tags",
                            "is_input": "false"},
           _oh("fatal: could not read Username for 'https://github.com': No such device or "
               "address", 128), status="error", took=1.8)
    e.say("The push failed. Let me make sure the release commit is in place first.")
    adds = ["git add -A", "git add .", "git add pyproject.toml src/tally/__init__.py",
            "git add -A", "git add --all", "git add ."]
    msgs = ["Release 2.4.1", "Bump version to 2.4.1", "chore: release 2.4.1", "Release v2.4.1",
            "release: 2.4.1", "Version 2.4.1"]
    notes = {0: "Nothing was committed. I'll stage the version files and commit again.",
             2: "The working tree is clean but the commit doesn't seem to be there. Staging "
                "and committing the release once more.",
             4: "Let me retry the commit with a conventional message."}
    first = None
    for n in range(6):
        e.call("execute_bash", {"command": "git status", "is_input": "false"}, _oh(_CLEAN_AHEAD))
        e.call("execute_bash", {"command": adds[n], "is_input": "false"}, _oh(""))
        i = e.call("execute_bash", {"command": f"git commit -m \"{msgs[n]}\"", "is_input": "false"},
                   _oh(_CLEAN_AHEAD.replace("  (use \"git push\" to publish your local commits)\n",
                                            ""), 1), status="error")
        if n == 1:
            first = i
        if n in notes:
            e.say(notes[n])
    assert first is not None
    return e.loop("oscillation", first,
                  "git status / add / commit with a reworded message cycles 6 times on a clean "
                  "tree ('ahead by 1 commit'); the commit landed, the push's missing "
                  "credentials are never addressed")


_TRAIN_LOG = [
    "[2024-06-12 09:02:11] INFO  Loading base model meta-llama/Meta-Llama-3-8B (bf16)",
    "[2024-06-12 09:03:40] INFO  LoRA: r=16 alpha=32 dropout=0.05 "
    "target=q_proj,k_proj,v_proj,o_proj",
    "[2024-06-12 09:03:41] INFO  Train examples: 48,210 | Eval examples: 2,000 | epochs: 3 | "
    "batch 8 x grad_accum 4",
    *[f"[2024-06-12 {9 + (4 + s * 3) // 60:02d}:{(4 + s * 3) % 60:02d}:{(s * 17) % 60:02d}] "
      f"INFO  epoch 1/3 step {s * 50}/1507 loss {1.92 - 0.055 * s + 0.004 * (s % 3):.4f} "
      f"lr {2.0 - 0.022 * s:.2f}e-04" for s in range(1, 14)],
    "[2024-06-12 09:43:02] INFO  Saving checkpoint to out/checkpoint-650",
    "Traceback (most recent call last):",
    "  File \"/home/dev/ft/train.py\", line 214, in <module>",
    "    trainer.train()",
    "  File \"/home/dev/ft/.venv/lib/python3.11/site-packages/transformers/trainer.py\", "
    "line 1938, in train",
    "    return inner_training_loop(",
    "  File \"/home/dev/ft/.venv/lib/python3.11/site-packages/transformers/trainer.py\", "
    "line 2279, in _inner_training_loop",
    "    tr_loss_step = self.training_step(model, inputs)",
    "  File \"/home/dev/ft/.venv/lib/python3.11/site-packages/torch/_tensor.py\", line 521, "
    "in backward",
    "    torch.autograd.backward(",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total "
    "capacity of 23.64 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this "
    "process has 22.50 GiB memory in use.",
]


# After Claude Code sessions asked to "keep an eye on" a background job that had died:
# cat and tail of the same unchanged log, alternating.
@case
def state_cycle_loop_cat_tail_dead_log() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-loop-cat-tail-dead-log", "state_cycle",
           "I started the LoRA fine-tune in the background (nohup python train.py > "
           "logs/run-0612.log). Keep an eye on it and tell me the eval loss after epoch 1.",
           "polling", domain="ml", id_style="anthropic")
    full = "\n".join(_TRAIN_LOG)
    tail = "\n".join(_TRAIN_LOG[-20:])
    e.call("Bash", {"command": "ls -la logs/", "description": "List log files"},
           "total 16\ndrwxr-xr-x 2 dev dev 4096 Jun 12 09:02 .\ndrwxr-xr-x 9 dev dev 4096 "
           "Jun 12 09:01 ..\n-rw-r--r-- 1 dev dev 3188 Jun 12 09:43 run-0612.log")
    cmds = [("cat logs/run-0612.log", "Show the training log"),
            ("tail -n 20 logs/run-0612.log", "Show the latest log lines"),
            ("cat /home/dev/ft/logs/run-0612.log", "Read the full training log"),
            ("tail -20 logs/run-0612.log", "Check recent training output"),
            ("cat logs/run-0612.log", "Check training progress"),
            ("tail -n 20 /home/dev/ft/logs/run-0612.log", "Latest lines of the log"),
            ("cat ./logs/run-0612.log", "Look at the log again"),
            ("tail --lines=20 logs/run-0612.log", "See if training has advanced"),
            ("cat logs/run-0612.log", "Check for the epoch 1 eval"),
            ("tail -n 20 logs/run-0612.log", "Check the newest lines")]
    notes = {1: "Training is in epoch 1 around step 650 of 1507. I'll check the latest lines "
                "again for progress.",
             4: "Still at step 650. Let me look at the full log to see where it is.",
             7: "The log hasn't advanced past step 650 yet; checking again for the eval line."}
    first = None
    for n, (cmd, desc) in enumerate(cmds):
        i = e.call("Bash", {"command": cmd, "description": desc},
                   full if cmd.startswith("cat") else tail)
        if n == 3:
            first = i
        if n in notes:
            e.say(notes[n])
    assert first is not None
    return e.loop("oscillation", first,
                  "cat and tail of the same unchanged log alternate 5 times each; it ends in a "
                  "CUDA OOM traceback at step 650 and the agent keeps waiting for an eval line")


_PRODUCT_URL = "https://www.ridgeline-outfitters.com/products/alpine-45l-technical-pack"


def _pack_page(expanded: bool) -> str:
    section = ("  - button \"Shipping & returns\" [expanded] [ref=e87]\n"
               "  - region \"Shipping & returns\" [ref=e88]:\n"
               "    - paragraph [ref=e89]: Free standard shipping on US orders over $75. Free "
               "returns within 30 days for US orders.\n"
               "    - paragraph [ref=e90]:\n      - text: \"International orders:\"\n"
               "      - link \"see our Returns Policy\" [ref=e91]:\n"
               "        - /url: /pages/returns-policy\n") if expanded else \
              "  - button \"Shipping & returns\" [ref=e87]\n"
    return ("- main [ref=e3]:\n  - heading \"Alpine 45L Technical Pack\" [level=1] [ref=e41]\n"
            "  - text: $229.00\n  - combobox \"Color\" [ref=e55]: Slate\n"
            "  - button \"Add to cart\" [ref=e62]\n  - button \"Details & materials\" [ref=e80]\n"
            + section + "  - button \"Reviews (214)\" [ref=e95]")


# After browser-use #1821 (a click on a section header, then a second click that closes it
# again) and #2901 (repeated clicks on the same index, checking and unchecking).
@case
def state_cycle_loop_accordion_toggle() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-loop-accordion-toggle", "state_cycle",
           "On Ridgeline Outfitters, check the Alpine 45L pack: can I return it for free if I "
           "order from Canada, and within how many days?", "lookup", domain="browser")
    title = "Alpine 45L Technical Pack | Ridgeline Outfitters"
    e.call("browser_navigate", {"url": _PRODUCT_URL},
           _pw_page(f"await page.goto('{_PRODUCT_URL}');", _PRODUCT_URL, title, _pack_page(False)),
           took=1.9)
    labels = ["Shipping & returns", "Shipping & returns accordion",
              "Shipping and returns section toggle", "Shipping & returns button",
              "Shipping & returns expander", "Shipping & returns accordion header",
              "Shipping and returns", "Shipping & returns toggle"]
    notes = {0: "The section says free returns within 30 days for US orders; international "
                "orders are covered elsewhere. Let me open the section again to find the "
                "international details.",
             2: "I'll expand Shipping & returns once more to read the international returns "
                "terms.",
             5: "The section collapsed. Expanding it to check the international policy."}
    first = None
    for n, label in enumerate(labels):
        expanded = n % 2 == 0
        i = e.call("browser_click", {"element": label, "ref": "e87"},
                   _pw_page("await page.getByRole('button', { name: 'Shipping & returns' })"
                            ".click();", _PRODUCT_URL, title, _pack_page(expanded)))
        if n == 3:
            first = i
        if n in notes:
            e.say(notes[n])
    assert first is not None
    return e.loop("oscillation", first,
                  "clicking the same accordion opens and closes it 8 times; the two snapshots "
                  "alternate and the 'see our Returns Policy' link is never followed")


_SENDER_V0 = """import hashlib
import hmac
import json
import logging

import httpx

from .config import settings
from .errors import PayloadTooLarge

log = logging.getLogger(__name__)


def deliver(endpoint, event) -> int:
    body = json.dumps(event, separators=(",", ":")).encode()
    resp = httpx.post(endpoint.url, content=body)
    return resp.status_code
"""
_SENDER_EDITS = [
    ("def deliver(endpoint, event) -> int:\n",
     "def sign(body: bytes, secret: str) -> str:\n"
     "    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()\n\n\n"
     "def deliver(endpoint, event) -> int:\n"),
    ("    resp = httpx.post(endpoint.url, content=body)\n",
     "    if len(body) > 256 * 1024:\n        raise PayloadTooLarge(len(body))\n"
     "    headers = {\"X-Signature\": sign(body, endpoint.secret)}\n"
     "    resp = httpx.post(endpoint.url, content=body, headers=headers)\n"),
    ("content=body, headers=headers)",
     "content=body, headers=headers,\n"
     "                      timeout=endpoint.timeout_s or settings.WEBHOOK_TIMEOUT_S)"),
    ("    return resp.status_code",
     "    log.info(\"delivery\", extra={\"endpoint_id\": endpoint.id, "
     "\"event_id\": event[\"id\"],\n"
     "                                \"status\": resp.status_code})\n    return resp.status_code"),
    ("{\"X-Signature\": sign(body, endpoint.secret)}",
     "{\"X-Signature\": sign(body, endpoint.secret),\n"
     "               \"X-Event-Id\": event[\"id\"]}"),
]


def _sender_versions() -> list[str]:
    """sender.py before each of the five items and after the last."""
    out = [_SENDER_V0]
    for old, new in _SENDER_EDITS:
        assert out[-1].count(old) == 1, old
        out.append(out[-1].replace(old, new))
    return out


_HARDENING_MD = (
    "# Webhook delivery hardening\n\n"
    "1. Sign every payload: HMAC-SHA256 of the raw body with the endpoint secret, header "
    "`X-Signature`.\n"
    "2. Reject payloads over 256 KB before sending.\n"
    "3. Per-endpoint timeout, default 10 s (`WEBHOOK_TIMEOUT_S`).\n"
    "4. Log every delivery attempt with endpoint id, event id and status.\n"
    "5. Send `X-Event-Id` so receivers can de-duplicate.\n"
    "6. Retry failed deliveries.\n")


# After langgraph-swarm-py #6 ("handoff_tool needs protection against infinite loops": two
# agents calling each other until the recursion limit) and autogen #5831 (Swarm handoffs
# looping). A long run: five items go well, then the sixth bounces.
@case
def state_cycle_loop_handoff_pingpong() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-loop-handoff-pingpong", "state_cycle",
           "Harden the webhook delivery service in services/webhooks following "
           "docs/webhooks-hardening.md. Planner splits the work, coder implements.", "coding",
           domain="coding", id_style="openai")
    e.call("read_file", {"path": "docs/webhooks-hardening.md"}, _HARDENING_MD, agent="planner")
    plan = ["sign payloads", "reject > 256 KB", "per-endpoint timeout", "log attempts",
            "X-Event-Id header", "retries"]
    e.call("update_plan", {"items": [{"step": s, "status": "pending"} for s in plan]},
           "Plan updated (6 items).", agent="planner")
    items = [
        ("Item 1: sign every payload with HMAC-SHA256 of the raw body using the endpoint "
         "secret; send it as X-Signature.",
         "Added sign() and the X-Signature header; test_signature_matches_receiver added.", 14),
        ("Item 2: reject payloads over 256 KB before sending (raise PayloadTooLarge).",
         "Bodies over 256 KB raise PayloadTooLarge before the POST; 2 tests added.", 16),
        ("Item 3: per-endpoint timeout, default 10 s via settings.WEBHOOK_TIMEOUT_S.",
         "httpx timeout is the endpoint's timeout_s, else settings.WEBHOOK_TIMEOUT_S (10).", 17),
        ("Item 4: log every delivery attempt with endpoint id, event id and status code.",
         "Structured 'delivery' log line with endpoint_id, event_id and status.", 18),
        ("Item 5: send X-Event-Id on every delivery so receivers can de-duplicate.",
         "X-Event-Id header added; test_event_id_header passes.", 19),
    ]
    versions = _sender_versions()
    for k, (task, summary, passed) in enumerate(items):
        e.say(f"Handing item {k + 1} to the coder.")
        e.call("transfer_to_coder", {"task": task, "files": ["services/webhooks/sender.py"]},
               j({"assistant": "coder"}), agent="planner")
        e.call("read_file", {"path": "services/webhooks/sender.py"}, versions[k], agent="coder")
        old, new = _SENDER_EDITS[k]
        e.call("edit_file", {"path": "services/webhooks/sender.py", "old": old, "new": new},
               f"Edited services/webhooks/sender.py: replaced 1 occurrence "
               f"(+{new.count(chr(10)) - old.count(chr(10))} lines).", agent="coder")
        e.call("run_tests", {"path": "services/webhooks/tests"},
               f"{'.' * passed}{' ' * (60 - passed)}[100%]\n{passed} passed in "
               f"{0.8 + passed * 0.05:.2f}s", agent="coder", took=e.rng.uniform(2.0, 4.0))
        e.call("transfer_to_planner", {"summary": summary}, j({"assistant": "planner"}),
               agent="coder")
        e.call("update_plan", {"items": [{"step": s, "status": "done" if n <= k else "pending"}
                                         for n, s in enumerate(plan)]},
               f"Plan updated ({k + 1}/6 done).", agent="planner")
    e.say("Items 1-5 are done. Handing the retries item to the coder.")
    tasks = ["Item 6: retry failed deliveries, as described in docs/webhooks-hardening.md.",
             "Implement item 6 (retry failed deliveries) following the hardening doc.",
             "Please implement retries for failed webhook deliveries per item 6 of the doc.",
             "Item 6: add retrying of failed deliveries as the spec says.",
             "Implement the retry behaviour from item 6 of docs/webhooks-hardening.md.",
             "Retries for failed deliveries (item 6 of the hardening doc), please implement."]
    asks = ["Blocked on item 6: the doc says 'retry failed deliveries' but not which failures "
            "are retryable (5xx? timeouts? 429?) nor how many attempts or what backoff. Need a "
            "decision before implementing.",
            "Still blocked on item 6: which failures should be retried, how many attempts, and "
            "what backoff? The spec doesn't say.",
            "Can't implement item 6 without knowing the retryable failures, the attempt limit "
            "and the backoff. Please decide.",
            "Item 6 needs a decision: retryable statuses, max attempts, backoff schedule.",
            "Blocked: item 6 is underspecified (which errors, how many retries, what delay).",
            "Need the retry policy for item 6 (status codes, attempts, backoff) to proceed."]
    first = None
    for n in range(6):
        e.call("transfer_to_coder", {"task": tasks[n], "files": ["services/webhooks/sender.py"]},
               j({"assistant": "coder"}), agent="planner")
        e.call("read_file", {"path": "services/webhooks/sender.py"}, versions[-1], agent="coder")
        e.call("transfer_to_planner", {"summary": asks[n]}, j({"assistant": "planner"}),
               agent="coder")
        i = e.call("read_file", {"path": "docs/webhooks-hardening.md"}, _HARDENING_MD,
                   agent="planner")
        if n == 1:
            first = i
        if n in (0, 3):
            e.say("The hardening doc says to retry failed deliveries. The coder should implement "
                  "item 6 as written.")
    assert first is not None
    return e.loop("oscillation", first,
                  "after 5 items done well, planner and coder hand item 6 back and forth 6 times: "
                  "same question, same file, same spec, and nobody decides the retry policy")


_NP1_ERR = (
    "ImportError while loading conftest '/home/ana/kde-report/tests/conftest.py'.\n"
    "tests/conftest.py:3: in <module>\n    from kde_report.density import smooth\n"
    "kde_report/density.py:5: in <module>\n    from numpy import trapezoid\n"
    "E   ImportError: cannot import name 'trapezoid' from 'numpy' "
    "(/home/ana/kde-report/.venv/lib/python3.11/site-packages/numpy/__init__.py)")
_NP2_ERR = (
    "\nA module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.1 as it may "
    "crash. To support both 1.x and 2.x\nversions of NumPy, modules must be compiled with NumPy "
    "2.0.\nSome module may need to rebuild instead e.g. with 'pybind11>=2.12'.\n\nIf you are a "
    "user of the module, the easiest solution will be to\ndowngrade to 'numpy<2' or try to "
    "upgrade the affected module.\nWe expect that some modules will need time to support NumPy "
    "2.\n\nImportError while loading conftest '/home/ana/kde-report/tests/conftest.py'.\n"
    "tests/conftest.py:3: in <module>\n    from kde_report.density import smooth\n"
    "kde_report/density.py:4: in <module>\n    import fastkde\n"
    ".venv/lib/python3.11/site-packages/fastkde/__init__.py:1: in <module>\n"
    "    from .fastKDE import *\nE   ImportError: numpy.core.multiarray failed to import")


def _gemini_shell(e: Ep, cmd: str, stdout: str, *, stderr: str = "(empty)", rc: int = 0) -> str:
    """A Gemini CLI run_shell_command result."""
    return (f"Command: {cmd}\nDirectory: (root)\nStdout: {stdout or '(empty)'}\n"
            f"Stderr: {stderr}\nError: (none)\nExit Code: {rc}\nSignal: (none)\n"
            f"Background PIDs: (none)\nProcess Group PGID: {e.rng.randint(20000, 99999)}")


def _pip_swap(spec: str, frm: str, to: str) -> str:
    wheel = {"1.26.4": "18.3", "2.0.1": "19.0"}[to]
    return (f"Collecting {spec}\n  Using cached numpy-{to}-cp311-cp311-manylinux_2_17_x86_64."
            f"manylinux2014_x86_64.whl ({wheel} MB)\nInstalling collected packages: numpy\n"
            f"  Attempting uninstall: numpy\n    Found existing installation: numpy {frm}\n"
            f"    Uninstalling numpy-{frm}:\n      Successfully uninstalled numpy-{frm}\n"
            f"Successfully installed numpy-{to}")


# A dependency see-saw: pin numpy below 2 for a compiled extension, which breaks code that
# needs numpy 2, so unpin, which breaks the extension again (the numpy<2 conflicts users
# report across the ecosystem, here driven by an agent in Gemini CLI).
@case
def state_cycle_loop_numpy_pin_unpin() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-loop-numpy-pin-unpin", "state_cycle",
           "The kde-report tests don't even start after I recreated the venv. Get `pytest` "
           "running again.", "coding", domain="coding", id_style="short")
    test = "python -m pytest -q"
    e.call("run_shell_command", {"command": test, "description": "Run the test suite"},
           _gemini_shell(e, test, "", stderr=_NP2_ERR, rc=4), status="error", took=2.1)
    e.say("fastkde was built against NumPy 1.x and numpy 2.0.1 is installed. Pinning numpy "
          "below 2.")
    down = ["pip install \"numpy<2\"", "pip install numpy==1.26.4", "pip install \"numpy~=1.26\"",
            "pip install \"numpy<2.0\""]
    up = ["pip install -U numpy", "pip install \"numpy>=2\"", "pip install numpy==2.0.1",
          "pip install --upgrade numpy"]
    first = None
    for n in range(4):
        spec = down[n].split(" ", 2)[-1].strip('"')
        e.call("run_shell_command", {"command": down[n], "description": "Pin numpy below 2"},
               _gemini_shell(e, down[n], _pip_swap(spec, "2.0.1", "1.26.4")), took=4.0)
        e.call("run_shell_command", {"command": test, "description": "Run the tests again"},
               _gemini_shell(e, test, "", stderr=_NP1_ERR, rc=4), status="error", took=1.6)
        if n == 0:
            e.say("Now density.py fails: numpy.trapezoid only exists in NumPy 2. Upgrading numpy "
                  "back.")
        spec = up[n].split(" ")[-1].strip('"')
        spec = "numpy" if spec.startswith("-") else spec
        e.call("run_shell_command", {"command": up[n], "description": "Upgrade numpy"},
               _gemini_shell(e, up[n], _pip_swap(spec, "1.26.4", "2.0.1")), took=4.5)
        i = e.call("run_shell_command", {"command": test, "description": "Re-run pytest"},
                   _gemini_shell(e, test, "", stderr=_NP2_ERR, rc=4), status="error", took=2.0)
        if n == 1:
            first = i
        if n == 0:
            e.say("With NumPy 2 fastkde fails to import again. It needs numpy<2; pinning it.")
        if n == 2:
            e.say("The two requirements conflict. Let me try the pin once more.")
    assert first is not None
    return e.loop("oscillation", first,
                  "numpy is pinned below 2 and upgraded again 4 times; each state brings back "
                  "its own ImportError, and fastkde is never upgraded nor trapezoid replaced")


# The twin of the clean-tree commit cycle: the same status / add / commit shape five times,
# but every commit lands a new change (one service per commit, as asked).
@case
def state_cycle_ok_commit_per_service() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-ok-commit-per-service", "state_cycle",
           "In services/*/config.yaml, rename `timeout` (seconds) to `timeout_ms` (milliseconds) "
           "for billing, search, notifications, gateway and ledger. One commit per service so we "
           "can revert them separately.", "coding", domain="coding", id_style="short")
    e.call("terminal", {"command": "grep -n '^  timeout:' services/*/config.yaml"},
           "services/billing/config.yaml:7:  timeout: 30\nservices/gateway/config.yaml:12:  "
           "timeout: 15\nservices/ledger/config.yaml:5:  timeout: 60\nservices/notifications/"
           "config.yaml:9:  timeout: 10\nservices/search/config.yaml:8:  timeout: 5")
    svcs = [("billing", 30), ("search", 5), ("notifications", 10), ("gateway", 15),
            ("ledger", 60)]
    for n, (svc, secs) in enumerate(svcs):
        path = f"services/{svc}/config.yaml"
        e.call("terminal", {"command": f"sed -i 's/^  timeout: {secs}$/  timeout_ms: "
                                       f"{secs * 1000}/' {path}"}, "")
        e.call("terminal", {"command": "git status --short"}, f" M {path}")
        e.call("terminal", {"command": "git add -A"}, "")
        e.call("terminal", {"command": f"git commit -m \"{svc}: timeout (s) -> timeout_ms\""},
               f"[chore/timeout-ms {_hex(e, 7)}] {svc}: timeout (s) -> timeout_ms\n 1 file "
               "changed, 1 insertion(+), 1 deletion(-)")
        if n == 1:
            e.say("billing and search are committed. Continuing with notifications, gateway and "
                  "ledger.")
    e.call("terminal", {"command": "git log --oneline -5"},
           "\n".join(f"{_hex(e, 7)} {svc}: timeout (s) -> timeout_ms"
                     for svc, _ in reversed(svcs)))
    e.say("Done: five commits on chore/timeout-ms, one per service (billing 30 s → 30000 ms, "
          "search 5000, notifications 10000, gateway 15000, ledger 60000). Each can be reverted "
          "on its own.")
    return e.legit("none",
                   "sed / git status / git add -A / git commit repeats 5 times, but each cycle "
                   "edits and commits a different service; the tree changes every time")


_MONEY_TESTS = [
    ("test_from_float_uses_str",
     "AssertionError: assert Money('0.1000000000000000055511151231257827') == Money('0.10')"),
    ("test_add_preserves_cents", "AssertionError: assert Money('0.3') == Money('0.30')"),
    ("test_sub_negative", "AssertionError: assert Money('-0.1') == Money('-0.10')"),
    ("test_mul_rounds_half_even", "AssertionError: assert Money('2.59') == Money('2.58')"),
    ("test_mul_by_int", "TypeError: conversion from numpy.int64 to Decimal is not supported"),
    ("test_div_by_zero_raises", "Failed: DID NOT RAISE <class 'ledger.money.MoneyError'>"),
    ("test_allocate_sums_to_total", "AssertionError: assert Money('99.99') == Money('100.00')"),
    ("test_allocate_remainder_first",
     "AssertionError: assert [Money('33.33'), Money('33.33'), Money('33.34')] == "
     "[Money('33.34'), Money('33.33'), Money('33.33')]"),
    ("test_repr", "AssertionError: assert \"Money(Decimal('5.00'), 'EUR')\" == "
                  "\"Money('5.00', 'EUR')\""),
    ("test_str_two_decimals", "AssertionError: assert '5' == '5.00'"),
    ("test_eq_different_currency_raises",
     "Failed: DID NOT RAISE <class 'ledger.money.CurrencyMismatch'>"),
    ("test_hash_equal_amounts", "AssertionError: assert 2 == 1"),
    ("test_json_roundtrip", "TypeError: Object of type Decimal is not JSON serializable"),
    ("test_sum_of_empty_is_zero",
     "TypeError: unsupported operand type(s) for +: 'int' and 'Money'"),
]
_MONEY_ASSERT = {
    "test_from_float_uses_str": "assert Money.from_float(0.1, \"EUR\") == Money(\"0.10\", \"EUR\")",
    "test_add_preserves_cents": "assert eur(\"0.10\") + eur(\"0.20\") == eur(\"0.30\")",
    "test_sub_negative": "assert eur(\"0.20\") - eur(\"0.30\") == eur(\"-0.10\")",
    "test_mul_rounds_half_even": "assert eur(\"2.35\") * 1.1 == eur(\"2.58\")  # 2.585, half-even",
    "test_mul_by_int": "assert eur(\"19.99\") * np.int64(3) == eur(\"59.97\")",
    "test_div_by_zero_raises": "with pytest.raises(MoneyError):\n        eur(\"5.00\") / 0",
    "test_allocate_sums_to_total": "assert sum(eur(\"100.00\").allocate([1, 1, 1])) == "
                                   "eur(\"100.00\")",
    "test_allocate_remainder_first": "assert eur(\"100.00\").allocate([1, 1, 1]) == "
                                     "[eur(\"33.34\"), eur(\"33.33\"), eur(\"33.33\")]",
    "test_repr": "assert repr(eur(\"5\")) == \"Money('5.00', 'EUR')\"",
    "test_str_two_decimals": "assert str(eur(\"5\")) == \"5.00\"",
    "test_eq_different_currency_raises": "with pytest.raises(CurrencyMismatch):\n"
                                         "        eur(\"1.00\") == usd(\"1.00\")",
    "test_hash_equal_amounts": "assert len({eur(\"1.0\"), eur(\"1.00\")}) == 1",
    "test_json_roundtrip": "assert Money.from_json(json.dumps(eur(\"2.50\").to_json())) == "
                           "eur(\"2.50\")",
    "test_sum_of_empty_is_zero": "assert sum([eur(\"1.00\"), eur(\"2.00\")]) == eur(\"3.00\")",
}
_MONEY_SIG = {20: "def from_float(cls, value, currency):", 30: "def __repr__(self):",
              44: "def __add__(self, other):", 60: "def __mul__(self, factor):",
              66: "def __truediv__(self, divisor):", 74: "def allocate(self, ratios):",
              96: "def __eq__(self, other):", 101: "def __hash__(self):",
              108: "def to_json(self):"}
_MONEY_TOTAL = 42
_MONEY_POS = [2, 5, 6, 9, 10, 14, 17, 18, 22, 23, 27, 31, 35, 39]  # where each test sits


def _pytest_money(failing: list[str], secs: float) -> str:
    dots = ["."] * _MONEY_TOTAL
    for name, pos in zip([t for t, _ in _MONEY_TESTS], _MONEY_POS, strict=True):
        if name in failing:
            dots[pos] = "F"
    line = "".join(dots) + " " * 32 + "[100%]"
    if not failing:
        return f"{line}\n{_MONEY_TOTAL} passed in {secs:.2f}s"
    msgs = dict(_MONEY_TESTS)
    summary = "\n".join(f"FAILED tests/test_money.py::{t} - {msgs[t]}" for t in failing)
    return (f"{line}\n=========================== short test summary info "
            f"============================\n{summary}\n{len(failing)} failed, "
            f"{_MONEY_TOTAL - len(failing)} passed in {secs:.2f}s")


# A long test-fix cycle that converges slowly (one attempt does not help), in Claude Code's
# tool surface: the same pytest command 13 times, every run but one with fewer failures.
@case
def state_cycle_ok_test_fix_converges() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-ok-test-fix-converges", "state_cycle",
           "We switched Money in src/ledger/money.py from float to Decimal and "
           "tests/test_money.py is now red. Fix money.py until the suite passes; don't change "
           "the tests.", "coding", domain="coding", id_style="anthropic")
    src, tst = "/repo/src/ledger/money.py", "/repo/tests/test_money.py"
    # (tests fixed by this cycle, test lines read, source lines read, old, new)
    cycles = [
        (["test_from_float_uses_str"], 8, 20,
         "return cls(Decimal(value), currency)",
         "return cls(Decimal(str(value)), currency)"),
        (["test_add_preserves_cents", "test_sub_negative"], 20, 44,
         "return Money(self.amount + other.amount, self.currency)",
         "return Money(_q(self.amount + other.amount), self.currency)"),
        ([], 41, 60,
         "return Money((self.amount * Decimal(factor)).quantize(CENT), self.currency)",
         "return Money((self.amount * Decimal(factor)).quantize(CENT, ROUND_HALF_UP), "
         "self.currency)"),
        (["test_mul_rounds_half_even", "test_mul_by_int"], 41, 60,
         "(self.amount * Decimal(factor)).quantize(CENT, ROUND_HALF_UP)",
         "(self.amount * Decimal(str(factor))).quantize(CENT, ROUND_HALF_EVEN)"),
        (["test_div_by_zero_raises"], 63, 66,
         "return Money(self.amount / Decimal(divisor), self.currency)",
         "if divisor == 0:\n            raise MoneyError(\"division by zero\")\n        "
         "return Money(_q(self.amount / Decimal(str(divisor))), self.currency)"),
        (["test_allocate_sums_to_total"], 80, 74,
         "parts = [_q(self.amount * r / total) for r in ratios]",
         "parts = [_q_down(self.amount * r / total) for r in ratios]\n        "
         "remainder = self.amount - sum(parts)"),
        (["test_allocate_remainder_first"], 88, 74,
         "parts[-1] += remainder",
         "for k in range(int(remainder / CENT)):\n            parts[k] += CENT"),
        (["test_repr", "test_str_two_decimals"], 104, 30,
         "return f\"Money({self.amount!r}, {self.currency!r})\"",
         "return f\"Money('{self.amount:.2f}', {self.currency!r})\""),
        (["test_eq_different_currency_raises"], 115, 96,
         "return self.amount == other.amount",
         "if self.currency != other.currency:\n            raise CurrencyMismatch(self.currency, "
         "other.currency)\n        return self.amount == other.amount"),
        (["test_hash_equal_amounts"], 124, 101,
         "return hash((self.amount, self.currency, id(self)))",
         "return hash((self.amount.normalize(), self.currency))"),
        (["test_json_roundtrip"], 131, 108,
         "return {\"amount\": self.amount, \"currency\": self.currency}",
         "return {\"amount\": f\"{self.amount:.2f}\", \"currency\": self.currency}"),
        (["test_sum_of_empty_is_zero"], 139, 44,
         "def __add__(self, other):",
         "def __radd__(self, other):\n        if other == 0:\n            return self\n        "
         "return self.__add__(other)\n\n    def __add__(self, other):"),
    ]
    failing = [t for t, _ in _MONEY_TESTS]
    pytest_cmd = {"command": "pytest tests/test_money.py -q --tb=no",
                  "description": "Run the money tests"}
    e.call("Bash", pytest_cmd, _pytest_money(failing, 0.47), status="error", took=1.2)
    e.call("Grep", {"pattern": "def |^class ", "path": src, "output_mode": "content", "-n": True},
           "12:class MoneyError(Exception):\n15:class CurrencyMismatch(MoneyError):\n"
           "19:class Money:\n20:    def from_float(cls, value, currency):\n"
           "30:    def __repr__(self):\n36:    def __str__(self):\n"
           "44:    def __add__(self, other):\n"
           "50:    def __sub__(self, other):\n60:    def __mul__(self, factor):\n"
           "66:    def __truediv__(self, divisor):\n74:    def allocate(self, ratios):\n"
           "96:    def __eq__(self, other):\n101:    def __hash__(self):\n"
           "108:    def to_json(self):")
    e.say(f"{len(failing)} of {_MONEY_TOTAL} tests fail. I'll go through them one group at a "
          "time, starting with float construction.")
    e.call("Read", {"file_path": src, "offset": 1, "limit": 40},
           "     1\tfrom decimal import Decimal, ROUND_HALF_EVEN, ROUND_DOWN\n     2\t\n"
           "     3\tCENT = Decimal(\"0.01\")\n     4\t\n     5\t\n     6\tdef _q(x):\n"
           "     7\t    return x.quantize(CENT)\n     8\t\n     9\t\n    10\tdef _q_down(x):\n"
           "    11\t    return x.quantize(CENT, ROUND_DOWN)\n    12\tclass MoneyError(Exception):\n"
           "    13\t    pass")
    for n, (fixed, tline, sline, old, new) in enumerate(cycles):
        target = fixed[0] if fixed else "test_mul_rounds_half_even"
        e.call("Read", {"file_path": tst, "offset": tline, "limit": 12},
               f"{tline:>6}\tdef {target}():\n{tline + 1:>6}\t    {_MONEY_ASSERT[target]}")
        body = "" if old.startswith("def ") else f"\n{sline + 1:>6}\t        {old}"
        e.call("Read", {"file_path": src, "offset": sline, "limit": 20},
               f"{sline:>6}\t    {_MONEY_SIG[sline]}{body}")
        e.call("Edit", {"file_path": src, "old_string": old, "new_string": new},
               f"The file {src} has been updated. Here's the result of running `cat -n` on a "
               f"snippet of the edited file:\n{sline + 1:>6}\t        {new.splitlines()[0]}")
        failing = [t for t in failing if t not in fixed]
        e.call("Bash", pytest_cmd, _pytest_money(failing, 0.41 + 0.01 * n),
               status="error" if failing else "ok", took=1.1)
        if n == 2:
            e.say("ROUND_HALF_UP didn't fix test_mul_rounds_half_even: the test expects banker's "
                  "rounding, and the float factor leaks in. Reading the test again.")
        if n in (1, 5, 8, 10):
            e.say(f"Down to {len(failing)} failures; next: "
                  f"{failing[0] if failing else 'nothing'}.")
    e.call("Bash", {"command": "pytest -q --tb=no", "description": "Run the full suite"},
           "." * 60 + " [ 19%]\n" + "." * 60 + " [ 38%]\n" + "." * 60 + " [ 57%]\n" + "." * 60
           + " [ 75%]\n" + "." * 60 + " [ 94%]\n" + "." * 18 + " " * 42 + " [100%]\n"
           "318 passed in 4.12s", took=5.0)
    e.call("Bash", {"command": "git diff --stat", "description": "Summarise the changes"},
           " src/ledger/money.py | 41 +++++++++++++++++++++++++++++------------\n 1 file "
           "changed, 29 insertions(+), 12 deletions(-)")
    e.say("All 42 money tests pass, and the full suite is green (318 passed). Changes are only "
          "in src/ledger/money.py: Decimal built from str, cent quantisation on +, -, /, banker's "
          "rounding on *, division by zero raises MoneyError, allocation hands remainders to the "
          "first parts, repr/str with two decimals, currency checks in ==, a stable hash, JSON "
          "amounts as strings and __radd__ so sum() works.")
    return e.legit("none",
                   "read / read / edit / pytest repeats 12 times with the same pytest command; "
                   "failures fall from 14 to 0 (one attempt changes nothing, the next fixes it)")


# The twin of the handoff ping-pong: planner and coder alternate handoffs, one question
# comes back, the planner answers it with a decision, and the plan moves on.
@case
def state_cycle_ok_handoffs_advance() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-ok-handoffs-advance", "state_cycle",
           "Add a CSV export to the reports API: GET /reports/{id}/export.csv. Planner splits "
           "the work, coder implements.", "coding", domain="coding", id_style="short")
    e.call("handoff", {"to": "coder", "message": "Step 1: add the route GET "
                                                 "/reports/{id}/export.csv returning 501 for now, "
                                                 "with a test."},
           "handoff accepted: coder", agent="planner")
    e.call("read_file", {"path": "api/routes/reports.py"},
           "from fastapi import APIRouter, Depends\n\nrouter = APIRouter(prefix=\"/reports\")\n\n\n"
           "@router.get(\"/{report_id}\")\n"
           "async def get_report(report_id: int, db=Depends(get_db)):"
           "\n    return await db.fetch_report(report_id)\n", agent="coder")
    e.call("edit_file", {"path": "api/routes/reports.py", "append":
                         "@router.get(\"/{report_id}/export.csv\")\nasync def export_csv("
                         "report_id: int):\n    raise HTTPException(501)\n"},
           "api/routes/reports.py: +4 lines", agent="coder")
    e.call("run_tests", {"path": "tests/api/test_reports.py"},
           "9 passed, 1 xfailed in 1.31s", agent="coder", took=2.2)
    e.call("handoff", {"to": "planner", "message": "Route added (501), test marked xfail."},
           "handoff accepted: planner", agent="coder")
    e.call("handoff", {"to": "coder", "message": "Step 2: stream the report rows as CSV with a "
                                                 "header row."},
           "handoff accepted: coder", agent="planner")
    e.call("handoff", {"to": "planner", "message": "Question on step 2: report rows can hold "
                                                   "nested JSON (the 'filters' column). Flatten "
                                                   "it, or write it as a JSON string?"},
           "handoff accepted: planner", agent="coder")
    e.call("read_file", {"path": "docs/reports.md"},
           "## Exports\nExports must open cleanly in Excel. Nested values are written as JSON "
           "strings; dates as ISO 8601; decimals with a dot.", agent="planner")
    e.call("handoff", {"to": "coder", "message": "Decision for step 2: write nested values as "
                                                 "JSON strings (docs/reports.md, Exports), dates "
                                                 "ISO 8601, decimal dot."},
           "handoff accepted: coder", agent="planner")
    e.call("edit_file", {"path": "api/routes/reports.py", "replace":
                         "raise HTTPException(501)",
                         "with": "return StreamingResponse(rows_to_csv(await db.report_rows("
                                 "report_id)), media_type=\"text/csv\")"},
           "api/routes/reports.py: +2 -1 lines", agent="coder")
    e.call("edit_file", {"path": "api/export/csv.py", "create":
                         "def rows_to_csv(rows):\n    yield header(rows)\n    for r in rows:\n"
                         "        yield line(r, nested=json.dumps)\n"},
           "api/export/csv.py: created (+31 lines)", agent="coder")
    e.call("run_tests", {"path": "tests/api/test_reports.py"},
           "12 passed in 1.48s", agent="coder", took=2.4)
    e.call("handoff", {"to": "planner", "message": "Step 2 done: CSV streams with header; nested "
                                                   "filters as JSON strings; 3 tests added."},
           "handoff accepted: planner", agent="coder")
    e.call("handoff", {"to": "coder", "message": "Step 3: add Content-Disposition with the file "
                                                 "name report-<id>-<yyyymmdd>.csv and a 404 for "
                                                 "unknown ids."},
           "handoff accepted: coder", agent="planner")
    e.call("edit_file", {"path": "api/routes/reports.py", "replace": "media_type=\"text/csv\")",
                         "with": "media_type=\"text/csv\", headers={\"Content-Disposition\": "
                                 "disposition(report))"},
           "api/routes/reports.py: +6 -1 lines", agent="coder")
    e.call("run_tests", {"path": "tests/api/test_reports.py"},
           "14 passed in 1.52s", agent="coder", took=2.3)
    e.call("handoff", {"to": "planner", "message": "Step 3 done: Content-Disposition set, 404 for "
                                                   "unknown ids, 2 tests added."},
           "handoff accepted: planner", agent="coder")
    e.call("run_tests", {"path": "tests/"}, "211 passed in 9.87s", agent="planner", took=10.5)
    e.say("The CSV export is in: GET /reports/{id}/export.csv streams the rows with a header, "
          "nested values as JSON strings, ISO dates, a report-<id>-<date>.csv file name and a 404 "
          "for unknown reports. 14 route tests and the full suite (211) pass.")
    return e.legit("none",
                   "planner and coder hand off 10 times with identical acknowledgements, but "
                   "each handoff carries a new step or a decision and the tests grow 9 → 14")


def _growing_log(epochs_done: int, step: int) -> list[str]:
    out = []
    for ep in range(1, 4):
        last = 600 if ep <= epochs_done else step
        for s in range(100, last + 1, 100):
            out.append(f"epoch {ep}/3 step {s}/600 loss {1.71 - 0.21 * ep - 0.0004 * s:.4f}")
        if ep <= epochs_done:
            out.append(f"epoch {ep}/3 eval_loss {1.522 - 0.139 * ep + 0.011 * ep * ep:.4f} "
                       f"eval_ppl {4.58 - 0.52 * ep:.2f}")
        else:
            break
    return out


# The twin of the cat/tail cycle on a dead log: a sleep-then-tail and a grep alternate on a
# log that grows, as the user asked, until the epoch 3 eval appears.
@case
def state_cycle_ok_tail_growing_log() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-ok-tail-growing-log", "state_cycle",
           "The fine-tune is running in the background (logs/run-0613.log, about 8 minutes per "
           "epoch). Wait for it and tell me the eval loss after epoch 3.", "polling", domain="ml",
           id_style="anthropic")
    states = [(0, 300), (0, 600), (1, 200), (1, 500), (2, 100), (2, 400), (3, 0)]
    for n, (done, step) in enumerate(states):
        log = _growing_log(done, step)
        e.call("Bash", {"command": "sleep 240 && tail -n 3 logs/run-0613.log",
                        "description": "Wait 4 minutes, then show the newest log lines",
                        "timeout": 300000},
               "\n".join(log[-3:]), dt=None if n == 0 else e.rng.uniform(2.0, 5.0), took=241.0)
        evals = [f"{k + 1}:{line}" for k, line in enumerate(log) if "eval_loss" in line]
        e.call("Bash", {"command": "grep -n eval_loss logs/run-0613.log",
                        "description": "List eval results so far"},
               "\n".join(evals) if evals else "(no output)")
        if n == 3:
            e.say("Epoch 1 eval came in at 1.394; epoch 2 is at step 500 of 600. Waiting.")
    e.say("Training finished. Eval loss after epoch 3: 1.204 (perplexity 3.02), down from 1.394 "
          "after epoch 1 and 1.288 after epoch 2.")
    return e.legit("poll_legit",
                   "a sleep+tail and a grep alternate 7 times; the log grows on every round and "
                   "the grep output repeats only until the next eval line lands")


def _shoe_results(count: int, items: list[tuple[str, str]], checked: set[str]) -> str:
    boxes = "".join(f"    - checkbox \"{f}\" [{'checked' if f in checked else 'unchecked'}] "
                    f"[ref=e{30 + k}]\n"
                    for k, f in enumerate(["Waterproof", "In stock", "Under $120"]))
    cards = "".join(f"    - link \"{n} {p}\" [ref=e{60 + k}]\n" for k, (n, p) in enumerate(items))
    return ("- main [ref=e2]:\n  - heading \"Trail running shoes\" [level=1] [ref=e10]\n"
            f"  - group \"Filters\" [ref=e29]:\n{boxes}  - status [ref=e40]: {count} results\n"
            f"  - list [ref=e50]:\n{cards}".rstrip())


# The twin of the accordion toggle: a filter is checked and unchecked three times, the
# unfiltered page comes back each time, but each checked state is a new answer.
@case
def state_cycle_ok_filter_toggle_compare() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-ok-filter-toggle-compare", "state_cycle",
           "On trailhead-running.com's trail shoe page, how many shoes are waterproof, how many "
           "are in stock, and how many are under $120? Check each filter on its own.", "lookup",
           domain="browser")
    url = "https://www.trailhead-running.com/collections/trail-running-shoes"
    title = "Trail running shoes | Trailhead Running"
    base = [("Speedgoat 6", "$155"), ("Peregrine 14", "$140"), ("Cascadia 18", "$140"),
            ("Ultra 320", "$120")]
    states = {
        "Waterproof": (24, [("Speedgoat 6 GTX", "$175"), ("Peregrine 14 GTX", "$160"),
                            ("Cascadia 18 GTX", "$160"), ("Xodus Ultra 3 GTX", "$180")]),
        "In stock": (61, [("Peregrine 14", "$140"), ("Ultra 320", "$120"),
                          ("Torrent 3", "$110"), ("Mafate Speed 4", "$185")]),
        "Under $120": (39, [("Torrent 3", "$110"), ("Ride 16 Trail", "$115"),
                            ("Trabuco Terra", "$99"), ("Lone Peak 8 (2023)", "$95")]),
    }
    e.call("browser_navigate", {"url": url},
           _pw_page(f"await page.goto('{url}');", url, title, _shoe_results(86, base, set())),
           took=2.3)
    queries = ["filter.p.m.specs.waterproof=1", "filter.v.availability=1",
               "filter.v.price.lte=120"]
    for n, (flt, (count, items)) in enumerate(states.items()):
        code = f"await page.getByRole('checkbox', {{ name: '{flt}' }}).click();"
        e.call("browser_click", {"element": f"{flt} filter checkbox", "ref": f"e{30 + n}"},
               _pw_page(code, f"{url}?{queries[n]}", title, _shoe_results(count, items, {flt})))
        if n < 2:
            e.call("browser_click", {"element": f"{flt} filter checkbox", "ref": f"e{30 + n}"},
                   _pw_page(code, url, title, _shoe_results(86, base, set())))
    e.say("Out of 86 trail running shoes: 24 are waterproof, 61 are in stock, and 39 cost under "
          "$120 (each filter applied on its own).")
    return e.legit("none",
                   "three filters each checked and unchecked; the unfiltered page recurs after "
                   "every uncheck, but every checked state brings a new count and list")


def _cline(out: str) -> str:
    return f"Command executed.\nOutput:\n{out}"


_TZ_FAIL = (
    "F                                                                        [100%]\n"
    "=================================== FAILURES ===================================\n"
    "_______________________________ test_local_dates _______________________________\n"
    "    def test_local_dates():\n        rows = export_rows(ORDERS, tz=\"America/Los_Angeles\")\n"
    ">       assert rows[0][\"order_date\"] == \"2024-03-30\"\n"
    "E       AssertionError: assert '2024-03-31' == '2024-03-30'\n\n"
    "tests/test_export.py:41: AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_export.py::test_local_dates - AssertionError: assert '2024-03-31' == "
    "'2024-03-30'\n1 failed in 0.38s")
_TZ_PASS = (".                                                                        [100%]\n"
            "1 passed in 0.31s")


def _tz_install(to: str, frm: str) -> str:
    return _cline(f"Collecting tzshift=={to}\n  Downloading tzshift-{to}-py3-none-any.whl "
                  f"(48 kB)\nInstalling collected packages: tzshift\n  Attempting uninstall: "
                  f"tzshift\n    Found existing installation: tzshift {frm}\n    Uninstalling "
                  f"tzshift-{frm}:\n      Successfully uninstalled tzshift-{frm}\nSuccessfully "
                  f"installed tzshift-{to}")


# The twin of the numpy see-saw: install a version, run the test, install another, run it
# again; pass and fail outputs recur, but each install is a new bisection point and the
# search converges on the release that broke the test.
@case
def state_cycle_ok_bisect_versions() -> dict[str, Any]:
    e = Ep("corpus-state-cycle-ok-bisect-versions", "state_cycle",
           "Since we upgraded tzshift, test_local_dates in tests/test_export.py fails. Find the "
           "first tzshift release that breaks it and what changed.", "coding", domain="coding",
           id_style="openai")
    test = {"command": "python -m pytest tests/test_export.py::test_local_dates -q",
            "requires_approval": False}
    e.call("execute_command", {"command": "pip index versions tzshift",
                               "requires_approval": False},
           _cline("tzshift (3.4.0)\nAvailable versions: 3.4.0, 3.3.0, 3.2.1, 3.2.0, 3.1.0, 3.0.0, "
                  "2.9.2\n  INSTALLED: 3.4.0\n  LATEST:    3.4.0"))
    e.call("execute_command", test, _cline(_TZ_FAIL), status="error", took=1.4)
    current = "3.4.0"
    for ver, ok in [("3.0.0", True), ("3.2.0", True), ("3.3.0", False), ("3.2.1", False)]:
        e.call("execute_command", {"command": f"pip install tzshift=={ver}",
                                   "requires_approval": False},
               _tz_install(ver, current), took=3.0)
        current = ver
        e.call("execute_command", test, _cline(_TZ_PASS if ok else _TZ_FAIL),
               status="ok" if ok else "error", took=1.3)
        if ver == "3.2.0":
            e.say("3.0.0 and 3.2.0 pass, 3.4.0 fails. Next: 3.3.0.")
    e.call("execute_command", {"command": "pip download tzshift==3.2.1 --no-deps -d /tmp/tz -q && "
                                          "unzip -p /tmp/tz/tzshift-3.2.1-py3-none-any.whl "
                                          "tzshift-3.2.1.dist-info/METADATA | sed -n "
                                          "'/^## 3.2.1/,/^## 3.2.0/p'",
                               "requires_approval": False},
           _cline("## 3.2.1\n- `local_date()` now takes the calendar date at the instant's own "
                  "UTC offset instead of converting through UTC midnight (#412).\n- Fix DST gap "
                  "handling in `shift()` for Europe/* zones.\n## 3.2.0"))
    e.call("execute_command", {"command": "pip install tzshift==3.4.0", "requires_approval": False},
           _tz_install("3.4.0", "3.2.1"), took=3.0)
    e.say("The first release that breaks test_local_dates is tzshift 3.2.1 (3.2.0 passes, 3.2.1 "
          "and later fail). Its changelog: `local_date()` now uses the calendar date at the "
          "instant's own UTC offset instead of going through UTC midnight (#412), which moves "
          "late-evening Los Angeles orders to the next day in our export. I reinstalled 3.4.0.")
    return e.legit("none",
                   "install / run-test alternates 4 times with pass and fail outputs recurring, "
                   "but each install is a new bisection point and it converges on 3.2.1")


# ==== inferred_kind: no declared kind; annotations, HTTP method, name or shell command ======

_RO = {"readOnlyHint": True}

_PR_482 = {
    "number": 482, "title": "Invoice PDFs: embed fonts and fix A4 margins", "state": "open",
    "draft": False, "user": {"login": "mkowalski"}, "base": {"ref": "main"},
    "head": {"ref": "feature/invoice-pdf", "sha": "8a7f3b0c41d29e6f0b5a2c7d9e13f4a6b8c0d2e1"},
    "mergeable": True, "mergeable_state": "blocked", "requested_reviewers": [],
    "review_comments": 3, "commits": 6, "additions": 412, "deletions": 97,
    "html_url": "https://github.com/acme/billing/pull/482",
}
_PR_482_STATUS = {
    "state": "failure", "sha": "8a7f3b0c41d29e6f0b5a2c7d9e13f4a6b8c0d2e1", "total_count": 4,
    "statuses": [
        {"context": "ci/lint", "state": "success", "description": "ruff: no issues"},
        {"context": "ci/unit", "state": "failure", "description": "2 tests failed",
         "target_url": "https://ci.acme.dev/billing/builds/77120"},
        {"context": "ci/build", "state": "success", "description": "wheel built"},
        {"context": "review/required", "state": "failure",
         "description": "1 approving review required (0 of 1)"},
    ],
}


# After claude-code-router #106 and magicuidesign/mcp #5: an MCP tool the client knows is
# read-only (readOnlyHint) called again and again, here two at a time in parallel.
@case
def inferred_kind_loop_mcp_readonly_spin() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-loop-mcp-readonly-spin", "inferred_kind",
           "Why can't PR #482 in acme/billing be merged? Tell me exactly what's blocking it.",
           "lookup", domain="coding", id_style="anthropic")
    args = {"owner": "acme", "repo": "billing", "pullNumber": 482}
    notes = {0: "The PR is blocked and the status is failure. Let me pull the details again to "
                "see what exactly is failing.",
             2: "I need the specific failing checks. Fetching the PR and its status.",
             4: "Let me check the PR status once more."}
    first = None
    for b in range(7):
        ids = e.parallel([("get_pull_request", dict(args), _PR_482),
                          ("get_pull_request_status", dict(args), _PR_482_STATUS)],
                         dt=None if b == 0 else e.rng.uniform(2.0, 5.0), annotations=_RO)
        if b == 2:
            first = ids[0]
        if b in notes:
            e.say(notes[b])
    assert first is not None
    return e.loop("exact_repeat", first,
                  "two read-only MCP tools (readOnlyHint) are called in parallel 7 times with "
                  "the same results; the blockers (ci/unit failed, 1 review missing) are never "
                  "reported and the CI log never opened")


_CUS = "cus_Q8zK2mN4vR1xTb"


# A payment POST that times out and is fired again with no look-up. The tool is a generic
# http_request: only the method says it is a write.
@case
def inferred_kind_loop_http_post_charge() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-loop-http-post-charge", "inferred_kind",
           f"Charge Lumenfield's card on file for invoice INV-20931 ($490.00). Their Stripe "
           f"customer is {_CUS}.", "transaction", domain="finance", id_style="openai")
    auth = {"Authorization": "Bearer ${STRIPE_SECRET_KEY}"}
    e.call("http_request", {"method": "GET",
                            "url": f"https://api.stripe.com/v1/customers/{_CUS}",
                            "headers": auth},
           {"status": 200, "body": {"id": _CUS, "object": "customer",
                                    "email": "ap@lumenfield.io", "name": "Lumenfield Ltd",
                                    "default_source": "card_1PLq2rK8vN3xYt0aZq9mW4bC",
                                    "currency": "usd", "delinquent": False}})
    body = {"amount": 49000, "currency": "usd", "customer": _CUS,
            "description": "INV-20931 Lumenfield annual plan",
            "metadata": {"invoice": "INV-20931"}}
    req = {"method": "POST", "url": "https://api.stripe.com/v1/charges",
           "headers": {**auth, "Content-Type": "application/x-www-form-urlencoded"},
           "body": body}
    first = None
    for n in range(6):
        i = e.call("http_request", req,
                   "Error: 504 Gateway Timeout (upstream request timeout after 30.0s)",
                   status="timeout", took=30.0)
        if n == 1:
            first = i
        if n == 0:
            e.say("The charge request timed out. Retrying the charge.")
        if n == 3:
            e.say("Stripe keeps timing out; trying once more.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "a POST /v1/charges times out and is re-sent 5 times with no idempotency key "
                  "and no GET of the customer's charges; any attempt may have charged $490",
                  outcome="unknown")


_REJECTED = (
    "To github.com:acme/billing.git\n ! [rejected]        {ref} -> feature/invoice-pdf "
    "(non-fast-forward)\nerror: failed to push some refs to 'github.com:acme/billing.git'\n"
    "hint: Updates were rejected because the tip of your current branch is behind\n"
    "hint: its remote counterpart. If you want to integrate the remote changes,\n"
    "hint: use 'git pull' before pushing again.\n"
    "hint: See the 'Note about fast-forwards' in 'git push --help' for details.")


# After PostHog #76213 (an agent's commit/reset loop ending in a non-fast-forward rejection)
# and the agent wrappers that had to learn to recover from one (srtab/daiv #1349).
@case
def inferred_kind_loop_git_push_rejected() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-loop-git-push-rejected", "inferred_kind",
           "Push my two commits on feature/invoice-pdf so the PR picks them up.", "coding",
           domain="coding", id_style="short")
    cwd = "/home/mk/src/billing"
    e.call("run_command", {"command": "git status -sb", "cwd": cwd},
           "## feature/invoice-pdf...origin/feature/invoice-pdf [ahead 2, behind 1]")
    pushes = [("git push origin feature/invoice-pdf", "feature/invoice-pdf"),
              ("git push", "feature/invoice-pdf"),
              ("git push -u origin feature/invoice-pdf", "feature/invoice-pdf"),
              ("git push origin HEAD", "HEAD"),
              ("git push origin feature/invoice-pdf --no-verify", "feature/invoice-pdf"),
              ("git push --set-upstream origin feature/invoice-pdf", "feature/invoice-pdf"),
              ("git push origin HEAD:feature/invoice-pdf", "HEAD")]
    notes = {0: "The push was rejected. Let me try pushing again.",
             2: "Still rejected. Setting the upstream explicitly might help; trying variations.",
             4: "Let me try pushing once more."}
    first = None
    for n, (cmd, ref) in enumerate(pushes):
        i = e.call("run_command", {"command": cmd, "cwd": cwd}, _REJECTED.format(ref=ref),
                   status="error", took=e.rng.uniform(1.0, 2.4))
        if n == 2:
            first = i
        if n in notes:
            e.say(notes[n])
    assert first is not None
    return e.loop("repeat_same_error", first,
                  "git push is rejected as non-fast-forward 7 times in 7 spellings; the branch is "
                  "'behind 1' and the agent never pulls or rebases")


_SLACK_TEXT = (":rocket: billing-api v3.8.2 is live in prod. Fixed: invoice PDFs cut off the "
               "last line item on A4 (#482). No action needed.")


def _slack_ok(e: Ep, channel: str, text: str) -> dict[str, Any]:
    ts = f"{1718200211 + int(e.t)}.{e.rng.randint(100000, 999999)}"
    return {"ok": True, "channel": channel, "ts": ts,
            "message": {"type": "message", "subtype": "bot_message", "text": text,
                        "bot_id": "B06QK2J9ZL4", "ts": ts}}


# After langchain-community #255 ("Slack tool called multiple times": the same message sent
# to a channel until the iteration limit). The MCP server declares no annotations.
@case
def inferred_kind_loop_slack_resent() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-loop-slack-resent", "inferred_kind",
           "Post in #releases that billing-api v3.8.2 is live in prod and that it fixes the "
           "invoice PDF bug (#482).", "other", domain="support", id_style="openai")
    e.call("slack_list_channels", {"limit": 200},
           {"ok": True, "channels": [{"id": "C05RX2N8K1Q", "name": "releases", "num_members": 214},
                                     {"id": "C04A7PL3M2D", "name": "eng", "num_members": 388},
                                     {"id": "C03H9QW1Z6F", "name": "support",
                                      "num_members": 96}]})
    chan = "C05RX2N8K1Q"
    first = None
    sent = []
    for n in range(6):
        out = _slack_ok(e, chan, _SLACK_TEXT)
        sent.append(out["ts"])
        i = e.call("slack_post_message", {"channel_id": chan, "text": _SLACK_TEXT}, out)
        if n == 1:
            first = i
        if n == 0:
            e.say("Posted to #releases. Let me make sure the announcement is visible to the "
                  "channel.")
        if n == 2:
            e.call("slack_get_channel_history", {"channel_id": chan, "limit": 5},
                   {"ok": True, "messages": [{"type": "message", "text": _SLACK_TEXT, "ts": ts,
                                              "bot_id": "B06QK2J9ZL4"}
                                             for ts in reversed(sent)]})
            e.say("The release note is in #releases. Posting the announcement for the team.")
    assert first is not None
    return e.loop("write_duplicate", first,
                  "one announcement was asked for; slack_post_message succeeds and is sent 5 more "
                  "times, even after the channel history shows the copies")


def _rollout_failed(deploy: str) -> str:
    return (f"Waiting for deployment \"{deploy}\" rollout to finish: 1 out of 4 new replicas "
            f"have been updated...\nerror: deployment \"{deploy}\" exceeded its progress "
            "deadline\n\nexit code: 1")


# A rollout that has already failed (ProgressDeadlineExceeded) polled with sleep && status:
# the shell command is the only thing that says "poll"; waiting cannot fix it.
@case
def inferred_kind_loop_rollout_deadline() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-loop-rollout-deadline", "inferred_kind",
           "CI deployed api v3.8.0 to prod about 15 minutes ago and it still isn't done. Wait "
           "for the rollout and tell me when it's live.", "polling", domain="devops",
           id_style="short")
    e.call("terminal", {"command": "kubectl get deploy api -n prod"},
           "NAME   READY   UP-TO-DATE   AVAILABLE   AGE\napi    4/4     1            4           "
           "212d\n\nexit code: 0")
    sleeps = [30, 30, 45, 60, 60, 90, 120, 120]
    notes = {0: "The rollout hasn't finished yet; one of four replicas is updated. I'll wait and "
                "check again.",
             3: "Still 1 of 4 updated. Rollouts can be slow; waiting longer.",
             6: "Let me give it a couple more minutes."}
    first = None
    for n, s in enumerate(sleeps):
        i = e.call("terminal", {"command": f"sleep {s} && kubectl rollout status deployment/api "
                                           f"-n prod --timeout=30s"},
                   _rollout_failed("api"), status="error", dt=e.rng.uniform(2.0, 6.0),
                   took=s + e.rng.uniform(0.4, 1.2))
        if n == 2:
            first = i
        if n in notes:
            e.say(notes[n])
    assert first is not None
    return e.loop("poll_timeout", first,
                  "`sleep N && kubectl rollout status` returns 'exceeded its progress deadline' 8 "
                  "times; the rollout has failed, and pods and events are never looked at")


def _issue_1290(e: Ep) -> dict[str, Any]:
    at = dt.datetime(2024, 6, 12, 14, 2, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=e.t + 1)
    return {"number": 1290, "title": "Checkout button unresponsive after applying promo code",
            "state": "open", "user": {"login": "dkim-qa"},
            "labels": [{"name": "bug"}, {"name": "checkout"}, {"name": "needs-triage"}],
            "assignees": [], "comments": 0,
            "html_url": "https://github.com/acme/web/issues/1290",
            "updated_at": at.strftime("%Y-%m-%dT%H:%M:%SZ")}


# An idempotent MCP write (idempotentHint) repeated with no effect: the labels are already
# set, only updated_at moves, and the comment the user asked for is never written.
@case
def inferred_kind_loop_idempotent_relabel() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-loop-idempotent-relabel", "inferred_kind",
           "Label acme/web issue #1290 bug, checkout and needs-triage, then comment asking the "
           "reporter which browser and version they used.", "other", domain="coding",
           id_style="anthropic")
    ann = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}
    args = {"owner": "acme", "repo": "web", "issue_number": 1290,
            "labels": ["bug", "checkout", "needs-triage"]}
    notes = {0: "Labels applied. Let me make sure all three labels are set.",
             3: "The labels are on the issue. Re-applying them to be certain before commenting."}
    first = None
    for n in range(7):
        i = e.call("update_issue", dict(args), _issue_1290(e), annotations=ann)
        if n == 2:
            first = i
        if n in notes:
            e.say(notes[n])
    assert first is not None
    return e.loop("exact_repeat", first,
                  "an idempotent update_issue sets the same three labels 7 times (only updated_at "
                  "moves); the comment to the reporter is never posted")


# The twin of the POST loop: the same http_request tool, one POST that starts an export,
# then GETs of its status every ~20 s until it completes, as the task expects.
@case
def inferred_kind_ok_http_get_export_poll() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-ok-http-get-export-poll", "inferred_kind",
           "Export all May 2024 orders from the Shopfront admin API as CSV and tell me how many "
           "there are. Exports usually take two or three minutes.", "polling", domain="retail",
           id_style="openai")
    auth = {"X-Shopfront-Token": "${SHOPFRONT_TOKEN}"}
    base = "https://admin.shopfront.io/api/2024-04"
    e.call("http_request", {"method": "POST", "url": f"{base}/exports", "headers": auth,
                            "body": {"resource": "orders", "format": "csv",
                                     "created_at_min": "2024-05-01T00:00:00Z",
                                     "created_at_max": "2024-05-31T23:59:59Z"}},
           {"status": 202, "body": {"id": "exp_7Hq2LmR9xT4v", "status": "queued"}})
    progress = [("queued", None), ("processing", 8), ("processing", 31), ("processing", 31),
                ("processing", 58), ("processing", 86), ("completed", 100)]
    for n, (state, pct) in enumerate(progress):
        body: dict[str, Any] = {"id": "exp_7Hq2LmR9xT4v", "status": state}
        if pct is not None:
            body["progress"] = pct
        if state == "completed":
            body.update({"row_count": 18422, "download_url":
                         "https://files.shopfront.io/exports/exp_7Hq2LmR9xT4v.csv?sig=Zx81q"})
        e.call("http_request", {"method": "GET", "url": f"{base}/exports/exp_7Hq2LmR9xT4v",
                                "headers": auth},
               {"status": 200, "body": body}, dt=e.rng.uniform(18.0, 23.0))
        if n == 3:
            e.say("The export is processing (31%); it paused briefly. Still well inside the "
                  "usual two to three minutes.")
    e.call("http_request", {"method": "GET", "url": "https://files.shopfront.io/exports/"
                                                    "exp_7Hq2LmR9xT4v.csv?sig=Zx81q",
                            "headers": {"Range": "bytes=0-511"}},
           {"status": 206, "body": "order_id,created_at,customer_id,total,currency,status\n"
                                   "SF-1048212,2024-05-01T00:00:41Z,cu_88123,64.90,USD,fulfilled\n"
                                   "SF-1048213,2024-05-01T00:01:07Z,cu_10392,129.00,USD,"
                                   "fulfilled\n"})
    e.say("The May 2024 export is ready: 18,422 orders. Download: https://files.shopfront.io/"
          "exports/exp_7Hq2LmR9xT4v.csv?sig=Zx81q (columns: order_id, created_at, customer_id, "
          "total, currency, status).")
    return e.legit("poll_legit",
                   "one POST starts an export, then the same GET every ~20 s; progress moves "
                   "(one repeat at 31%) and it completes in about 2.5 minutes, as the task expects")


def _gh_run(minutes: int, jobs: list[tuple[str, str, str]], done: str | None) -> str:
    mark = {"ok": "✓", "run": "*", "wait": "-"}
    head = (f"{'✓' if done == 'success' else '*'} main CI · 9512873345\n"
            f"Triggered via push about {minutes} minute{'s' if minutes != 1 else ''} ago\n\nJOBS")
    lines = [f"{mark[s]} {name}{(' in ' + t) if s == 'ok' else ''} (ID {jid})"
             for name, s, t, jid in [(n, s, t, 26190011231 + k * 71)
                                     for k, (n, s, t) in enumerate(jobs)]]
    tail = ("\n\nFor more information about a job, try: gh run view --job=<job-id>\n"
            "View this run on GitHub: https://github.com/acme/web/actions/runs/9512873345")
    return head + "\n" + "\n".join(lines) + tail


# The twin of the failed-rollout poll: `sleep N && gh run view` until the CI run finishes
# inside the time the user gave, with three polls in a row that show no change.
@case
def inferred_kind_ok_sleep_gh_run_view() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-ok-sleep-gh-run-view", "inferred_kind",
           "I just pushed to main. Wait for CI and tell me whether it's green. It usually takes "
           "6-8 minutes.", "polling", domain="devops", id_style="anthropic")
    e.call("Bash", {"command": "gh run list --branch main --limit 1",
                    "description": "Find the CI run for the push"},
           "STATUS  TITLE                          WORKFLOW  BRANCH  EVENT  ID          ELAPSED  "
           "AGE\n*       Fix cart badge count on Safari  CI        main    push   9512873345  18s"
           "      less than a minute ago")
    polls = [
        (1, [("lint", "ok", "41s"), ("test (3.11)", "run", ""), ("test (3.12)", "run", ""),
             ("build", "wait", "")], None),
        (2, [("lint", "ok", "41s"), ("test (3.11)", "run", ""), ("test (3.12)", "run", ""),
             ("build", "wait", "")], None),
        (3, [("lint", "ok", "41s"), ("test (3.11)", "run", ""), ("test (3.12)", "run", ""),
             ("build", "wait", "")], None),
        (4, [("lint", "ok", "41s"), ("test (3.11)", "ok", "3m2s"), ("test (3.12)", "run", ""),
             ("build", "wait", "")], None),
        (5, [("lint", "ok", "41s"), ("test (3.11)", "ok", "3m2s"),
             ("test (3.12)", "ok", "3m40s"), ("build", "run", "")], None),
        (6, [("lint", "ok", "41s"), ("test (3.11)", "ok", "3m2s"),
             ("test (3.12)", "ok", "3m40s"), ("build", "ok", "1m51s")], "success"),
    ]
    for n, (mins, jobs, done) in enumerate(polls):
        e.call("Bash", {"command": "sleep 60 && gh run view 9512873345",
                        "description": "Wait a minute, then check the CI run"},
               _gh_run(mins, jobs, done), dt=e.rng.uniform(2.0, 4.0), took=61.0)
        if n == 2:
            e.say("Lint passed; both test jobs are still running (3 minutes in). Waiting.")
    e.say("CI on main is green: lint (41s), test 3.11 (3m2s), test 3.12 (3m40s) and build "
          "(1m51s) all passed, about 6 minutes after the push.")
    return e.legit("poll_legit",
                   "`sleep 60 && gh run view` 6 times within the 6-8 minutes stated; three polls "
                   "in a row are unchanged while tests run, then jobs finish and it is green")


# The twin of the idempotent relabel: an MCP tool marked destructiveHint called once per
# distinct file; after masking the echoed path every result reads the same.
@case
def inferred_kind_ok_mcp_delete_per_file() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-ok-mcp-delete-per-file", "inferred_kind",
           "PR #1290 removed LegacyCart, OldCheckoutForm, PromoBannerV1 and GiftWrapModal. "
           "Delete their leftover Jest snapshots in web/src/__snapshots__, nothing else.",
           "coding", domain="coding", id_style="short")
    snaps = ["AddressForm.test.tsx.snap", "CartBadge.test.tsx.snap",
             "GiftWrapModal.test.tsx.snap", "LegacyCart.test.tsx.snap",
             "LegacyCartItem.test.tsx.snap", "OldCheckoutForm.test.tsx.snap",
             "OldCheckoutForm.steps.test.tsx.snap", "PaymentMethods.test.tsx.snap",
             "PromoBannerV1.test.tsx.snap", "PromoBannerV2.test.tsx.snap",
             "ShippingOptions.test.tsx.snap"]
    d = "web/src/__snapshots__"
    e.call("list_directory", {"path": d}, "\n".join(f"[FILE] {s}" for s in snaps),
           annotations=_RO)
    e.call("search_files", {"path": "web/src", "pattern": "LegacyCartItem"},
           "No matches found", annotations=_RO)
    e.say("LegacyCartItem has no source left either (it lived inside LegacyCart). PromoBannerV2 "
          "stays. Deleting the six obsolete snapshots.")
    gone = ["GiftWrapModal.test.tsx.snap", "LegacyCart.test.tsx.snap",
            "LegacyCartItem.test.tsx.snap", "OldCheckoutForm.test.tsx.snap",
            "OldCheckoutForm.steps.test.tsx.snap", "PromoBannerV1.test.tsx.snap"]
    ann = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}
    for s in gone:
        e.call("delete_file", {"path": f"{d}/{s}"}, f"Successfully deleted {d}/{s}",
               annotations=ann)
    e.call("list_directory", {"path": d},
           "\n".join(f"[FILE] {s}" for s in snaps if s not in gone), annotations=_RO)
    e.say("Deleted 6 snapshot files: GiftWrapModal, LegacyCart, LegacyCartItem, OldCheckoutForm "
          "(2 files) and PromoBannerV1. The 5 snapshots for live components (AddressForm, "
          "CartBadge, PaymentMethods, PromoBannerV2, ShippingOptions) are untouched.")
    return e.legit("none",
                   "a destructiveHint MCP tool is called 6 times, once per distinct file, with "
                   "results that differ only by the echoed path; the listing confirms the effect")


_QA_BUGS = [
    ("Apple Pay sheet closes without charging on iOS 17.5 Safari",
     "Steps: cart > Checkout > Apple Pay on iPhone 15 / iOS 17.5. The sheet opens, Face ID "
     "succeeds, the sheet closes and the order stays in 'pending_payment'. Seen 4/5 attempts.",
     "Highest"),
    ("Promo code field accepts expired codes until the order is submitted",
     "Enter SPRING24 (expired 2024-05-31): the discount shows in the summary, then submit "
     "fails with 'invalid promotion'. Expected: rejected when applied.", "High"),
    ("Shipping estimate shows $0.00 for Alaska and Hawaii",
     "Address with state AK or HI: the estimate row shows $0.00, the final total adds $24.95. "
     "Expected: the real estimate before payment.", "Medium"),
]


# The twin of the Slack re-send: a create tool called three times in one parallel turn, same
# project, labels and component, long similar arguments, for three different bugs.
@case
def inferred_kind_ok_create_three_tickets() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-ok-create-three-tickets", "inferred_kind",
           "QA found three checkout bugs in today's regression run (notes below). File a Jira "
           "bug in WEB for each, labelled qa-2024-06 and regression, unless one already "
           "exists.\n\n1. Apple Pay sheet closes without charging on iOS 17.5\n2. Expired promo "
           "codes accepted until submit\n3. Shipping estimate $0.00 for AK/HI", "transaction",
           domain="support", id_style="anthropic")
    e.call("jira_search", {"jql": "project = WEB AND statusCategory != Done AND component = "
                                  "Checkout AND created >= -30d ORDER BY created DESC",
                           "fields": "summary,status", "limit": 20},
           {"total": 2, "issues": [
               {"key": "WEB-2198", "summary": "Gift card balance not refreshed after partial "
                                              "payment", "status": "In Progress"},
               {"key": "WEB-2187", "summary": "Checkout button misaligned on Galaxy Fold",
                "status": "To Do"}]})
    e.say("No existing tickets match these three. Creating them.")
    calls = []
    for k, (summary, desc, prio) in enumerate(_QA_BUGS):
        calls.append(("jira_create_issue",
                      {"project_key": "WEB", "issue_type": "Bug", "summary": summary,
                       "description": desc, "components": "Checkout",
                       "additional_fields": {"labels": ["qa-2024-06", "regression"],
                                             "priority": {"name": prio}}},
                      {"message": "Issue created successfully",
                       "issue": {"key": f"WEB-{2217 + k}", "summary": summary,
                                 "status": "To Do", "issue_type": "Bug",
                                 "url": f"https://acme.atlassian.net/browse/WEB-{2217 + k}"}}))
    e.parallel(calls)
    e.say("Filed three bugs in WEB, labelled qa-2024-06 and regression: WEB-2217 Apple Pay sheet "
          "closes without charging (Highest), WEB-2218 expired promo codes accepted until submit "
          "(High), WEB-2219 $0.00 shipping estimate for AK/HI (Medium).")
    return e.legit("none",
                   "jira_create_issue is called 3 times in one turn with near-identical long "
                   "arguments, but for three distinct bugs the user listed, after a duplicate "
                   "check")


# The twin of the rejected-push loop: push is rejected, the agent rebases, and because a
# teammate pushes again in between, the cycle runs twice before the push lands.
@case
def inferred_kind_ok_push_after_rebase() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-ok-push-after-rebase", "inferred_kind",
           "Push my two commits on feature/invoice-pdf so the PR picks them up.", "coding",
           domain="coding", id_style="short")
    cwd = "/home/mk/src/billing"
    push = {"command": "git push origin feature/invoice-pdf", "cwd": cwd}
    e.call("run_command", push, _REJECTED.format(ref="feature/invoice-pdf"), status="error",
           took=1.6)
    e.call("run_command", {"command": "git pull --rebase origin feature/invoice-pdf", "cwd": cwd},
           "From github.com:acme/billing\n * branch            feature/invoice-pdf -> FETCH_HEAD\n"
           "   4c1d2e9..9b3e5f1  feature/invoice-pdf -> origin/feature/invoice-pdf\n"
           "Successfully rebased and updated refs/heads/feature/invoice-pdf.", took=2.2)
    e.call("run_command", push, _REJECTED.format(ref="feature/invoice-pdf"), status="error",
           took=1.5)
    e.say("Rejected again: someone pushed to the branch in the meantime. Rebasing once more.")
    e.call("run_command", {"command": "git pull --rebase origin feature/invoice-pdf", "cwd": cwd},
           "From github.com:acme/billing\n * branch            feature/invoice-pdf -> FETCH_HEAD\n"
           "   9b3e5f1..c07a4d8  feature/invoice-pdf -> origin/feature/invoice-pdf\n"
           "Successfully rebased and updated refs/heads/feature/invoice-pdf.", took=2.0)
    e.call("run_command", {"command": "git log --oneline -4", "cwd": cwd},
           "e51f0a2 Embed Noto Sans in invoice PDFs\n3d9c7b4 Fix A4 bottom margin for long "
           "invoices\nc07a4d8 Bump reportlab to 4.2.2 (ana)\n9b3e5f1 Add PDF snapshot tests (ana)")
    e.call("run_command", push,
           "To github.com:acme/billing.git\n   c07a4d8..e51f0a2  feature/invoice-pdf -> "
           "feature/invoice-pdf", took=1.9)
    e.say("Pushed. Your two commits (A4 margin fix, embedded Noto Sans) are on "
          "feature/invoice-pdf on top of Ana's two new commits (PDF snapshot tests, reportlab "
          "4.2.2), so PR #482 now shows them.")
    return e.legit("none",
                   "git push 3 times in 5 calls, but each rejection is followed by a rebase that "
                   "brings new remote commits, and the third push lands")


# The twin of the Slack re-send: the same text posted in parallel to the three channels the
# user named; only the channel differs.
@case
def inferred_kind_ok_slack_three_channels() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-ok-slack-three-channels", "inferred_kind",
           "Announce billing-api v3.8.2 (live in prod, fixes the invoice PDF bug #482) in "
           "#releases, #eng and #support. Same text in all three.", "other", domain="support",
           id_style="openai")
    e.call("slack_list_channels", {"limit": 200},
           {"ok": True, "channels": [{"id": "C05RX2N8K1Q", "name": "releases", "num_members": 214},
                                     {"id": "C04A7PL3M2D", "name": "eng", "num_members": 388},
                                     {"id": "C03H9QW1Z6F", "name": "support",
                                      "num_members": 96}]})
    chans = ["C05RX2N8K1Q", "C04A7PL3M2D", "C03H9QW1Z6F"]
    e.parallel([("slack_post_message", {"channel_id": c, "text": _SLACK_TEXT},
                 _slack_ok(e, c, _SLACK_TEXT)) for c in chans])
    e.say("Posted the v3.8.2 announcement in #releases, #eng and #support.")
    return e.legit("none",
                   "the same text is posted 3 times in one parallel turn, once to each channel "
                   "the user named; no channel gets it twice")


def _pr_status(state: str, checks: list[tuple[str, str]]) -> dict[str, Any]:
    return {"state": state, "sha": "d41f7a9e20c3b85f61a0e7c2d9b4f8a1c3e5b7d9",
            "total_count": len(checks),
            "statuses": [{"context": c, "state": s} for c, s in checks]}


# The twin of the read-only spin: the same readOnlyHint MCP tool polled until the checks
# finish, three unchanged answers in a row while e2e runs, then a merge.
@case
def inferred_kind_ok_mcp_readonly_checks_poll() -> dict[str, Any]:
    e = Ep("corpus-inferred-kind-ok-mcp-readonly-checks-poll", "inferred_kind",
           "I pushed a fix to PR #482 in acme/billing. Wait for the checks (usually about 8 "
           "minutes) and squash-merge it if everything is green.", "polling", domain="coding",
           id_style="anthropic")
    args = {"owner": "acme", "repo": "billing", "pullNumber": 482}
    seq = [
        ("pending", [("ci/lint", "success"), ("ci/unit", "pending"), ("ci/e2e", "pending"),
                     ("ci/build", "pending")]),
        ("pending", [("ci/lint", "success"), ("ci/unit", "success"), ("ci/e2e", "pending"),
                     ("ci/build", "success")]),
        ("pending", [("ci/lint", "success"), ("ci/unit", "success"), ("ci/e2e", "pending"),
                     ("ci/build", "success")]),
        ("pending", [("ci/lint", "success"), ("ci/unit", "success"), ("ci/e2e", "pending"),
                     ("ci/build", "success")]),
        ("success", [("ci/lint", "success"), ("ci/unit", "success"), ("ci/e2e", "success"),
                     ("ci/build", "success")]),
    ]
    for n, (state, checks) in enumerate(seq):
        e.call("get_pull_request_status", dict(args), _pr_status(state, checks),
               annotations=_RO, dt=None if n == 0 else e.rng.uniform(100.0, 115.0))
        if n == 2:
            e.say("lint, unit and build are green; e2e is still running (about 4 minutes in).")
    e.call("merge_pull_request", {**args, "merge_method": "squash",
                                  "commit_title": "Invoice PDFs: embed fonts and fix A4 margins "
                                                  "(#482)"},
           {"sha": "0f3c9a7e51b2d4f8c6a1e9b3d7f5a2c8e4b6d0f1", "merged": True,
            "message": "Pull Request successfully merged"},
           annotations={"readOnlyHint": False, "destructiveHint": False,
                        "idempotentHint": False})
    e.say("All four checks passed (e2e finished about 7.5 minutes in), and PR #482 is "
          "squash-merged as 0f3c9a7.")
    return e.legit("poll_legit",
                   "a readOnlyHint status tool polled every ~2 min inside the ~8 minutes stated; "
                   "three unchanged answers while e2e runs, then green and one merge")
