"""Corpus cases: cursors, message loops and long runs (issue 16, points 7, 9 and 10).

Each builder writes one labelled episode with ``writer.Ep``; ``build_corpus.py`` collects
``CASES`` from this module.

Where ``first_loop_step`` points in these classes:

- ``cursor_bounds``: the **3rd** fetch that returns the same page (the same records, once
  volatile fields such as request ids, timings and rotating ads are set aside), whatever the
  token, offset, bound or page number in its arguments says;
- ``message_loop``: the **3rd** near-identical assistant message (a restated plan, the same
  answer to an identical automatic nudge, the same pleasantry); for two messages that
  alternate, the message that completes the **second full cycle** (A, B, A, B); for a message
  that chants within itself, that message;
- ``long_run``: by the rule of the loop that starts after the healthy prefix: the 3rd identical
  error, the 3rd fetch of the same chunk, the call completing the second full cycle of an
  edit/test flip-flop or of a hand-off ping-pong. The healthy prefix never moves it.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

from writer import _ID_CHARS, Ep, registry

CASES, case = registry()

_HEX = "0123456789abcdef"


def _rand(e: Ep, n: int, chars: str = _ID_CHARS) -> str:
    return "".join(e.rng.choices(chars, k=n))


def _iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


# ==== cursor_bounds (point 7) ====================================================================

_VENDORLY_ITEMS = ("Team plan", "Team plan + 5 seats", "Business plan", "Overage: API calls",
                   "Business plan + SSO", "Storage add-on 500 GB")


def _vendorly_invoices(e: Ep, n: int) -> list[dict[str, Any]]:
    """n invoice emails, newest first, as Gmail's list shows them."""
    out, day = [], datetime(2024, 6, 11, 7, 12, tzinfo=UTC)
    for k in range(n):
        number = 4120 - 3 * k - e.rng.randint(0, 2)
        amount = e.rng.choice((249.0, 299.0, 349.0, 412.5, 588.0, 1190.0)) + e.rng.randint(0, 9)
        out.append({"id": _rand(e, 16, _HEX), "threadId": _rand(e, 16, _HEX),
                    "date": day.strftime("%a, %d %b %Y %H:%M:%S +0000"),
                    "subject": f"Your Vendorly invoice VND-24-{number:04d}",
                    "snippet": f"{e.rng.choice(_VENDORLY_ITEMS)} · Amount due ${amount:,.2f} · "
                               "PDF attached"})
        day -= timedelta(hours=e.rng.randint(20, 50), minutes=e.rng.randint(0, 59))
    return out


@case
def cursor_bounds_loop_token_echoed() -> dict[str, Any]:
    # Modeled on reports of MCP mail and drive servers whose list tool hands the request's own
    # page token back as nextPageToken: an agent that trusts it never leaves page 2.
    e = Ep("corpus-cursor-bounds-loop-token-echoed", "cursor_bounds",
           "Find every invoice email from billing@vendorly.io in the last 90 days and list the "
           "invoice numbers with amounts, oldest first.", "lookup", domain="email")
    ro = {"readOnlyHint": True}
    inv = _vendorly_invoices(e, 61)
    q = {"query": "from:billing@vendorly.io subject:invoice newer_than:90d", "max_results": 25}
    t1 = "".join(e.rng.choices("0123456789", k=20))
    e.say("I'll search the mailbox and page through the results.")
    e.call("gmail_search_messages", q,
           {"messages": inv[:25], "nextPageToken": t1, "resultSizeEstimate": 61,
            "request_id": _rand(e, 12, _HEX)}, annotations=ro)
    first = None
    for n in range(7):
        i = e.call("gmail_search_messages", dict(q, page_token=t1),
                   {"messages": inv[25:50], "nextPageToken": t1, "resultSizeEstimate": 61,
                    "request_id": _rand(e, 12, _HEX)}, annotations=ro)
        if n == 2:
            first = i
        if n == 0:
            e.say(f"Page 2 has 25 more invoices (VND-24-{inv[25]['subject'][-4:]} back to "
                  f"VND-24-{inv[49]['subject'][-4:]}). There's a nextPageToken, so there are "
                  "more; continuing.")
        if n == 3:
            e.say("100 invoices collected so far; resultSizeEstimate says 61, which is only an "
                  "estimate. Following nextPageToken to the next page.")
    assert first is not None
    return e.loop("cursor_stuck", first,
                  "the server returns the page_token it was sent as nextPageToken; the agent "
                  "fetches the same page 2 seven times and believes it has 100+ invoices")


_EU_CO = ("Brandt Logistik GmbH", "Vasquez Textiles SL", "Noordhoek Bouw BV", "Lindqvist Tryck AB",
          "Kowalski Meble sp. z o.o.", "Ferraro Alimentari Srl", "Dubois & Fils SARL",
          "Aalto Design Oy", "Moreira Vinhos Lda", "Hofer Maschinenbau AG", "Byrne Dairy Ltd",
          "Janssens Transport NV", "Novák Stavby s.r.o.", "Holm Fiskeri ApS", "Weber Optik GmbH",
          "Rossi Ceramiche SpA", "Garnier Cosmétiques SAS", "Van Dijk Tuinen BV",
          "Nilsson Verktyg AB", "Schmid Holzbau GmbH", "Lambert Imprimerie SARL",
          "Pereira Cortiça Lda", "Ortega Frutas SA", "Kerr Engineering Ltd")
_EU_CC = {"GmbH": "DE", "SL": "ES", "BV": "NL", "AB": "SE", "o.o.": "PL", "Srl": "IT",
          "SARL": "FR", "Oy": "FI", "Lda": "PT", "AG": "AT", "Ltd": "IE", "NV": "BE",
          "s.r.o.": "CZ", "ApS": "DK", "SpA": "IT", "SAS": "FR", "SA": "ES"}


def _eu_rows(e: Ep, n: int) -> list[str]:
    rows = []
    for k in range(n):
        name = _EU_CO[(k * 7 + 3) % len(_EU_CO)]
        if k >= len(_EU_CO):
            name = name.replace(" ", f" {chr(65 + k % 26)}. ", 1)
        cc = _EU_CC[name.split()[-1]]
        cents = e.rng.randint(12_000, 1_850_000)
        rows.append(f"({10_118 + 17 * k + e.rng.randint(0, 9)}, '{name}', '{cc}', "
                    f"Decimal('{cents / 100:.2f}'), {e.rng.randint(31, 190)})")
    return rows


@case
def cursor_bounds_loop_sql_offset_reworded() -> dict[str, Any]:
    # Modeled on text-to-SQL agent traces (LangChain's SQL toolkit) in which the model rewrites
    # its paging query every turn but keeps the same OFFSET.
    e = Ep("corpus-cursor-bounds-loop-sql-offset-reworded", "cursor_bounds",
           "Give me the full list of EU customers with an overdue balance (id, name, country, "
           "amount, days overdue) from the AR database.", "lookup", domain="finance",
           id_style="openai")
    e.call("sql_db_list_tables", {"tool_input": ""},
           "ar_invoices, ar_overdue_v, customers, payments, regions")
    e.call("sql_db_schema", {"table_names": "ar_overdue_v"},
           "CREATE VIEW ar_overdue_v (\n\tcustomer_id INTEGER, \n\tname TEXT, \n\tcountry "
           "CHAR(2), \n\tregion TEXT, \n\toverdue_eur NUMERIC(12, 2), \n\tdays_overdue INTEGER\n)"
           "\n\n/*\n3 rows from ar_overdue_v table:\ncustomer_id\tname\tcountry\tregion\t"
           "overdue_eur\tdays_overdue\n10021\tAtlas Freight Inc\tUS\tNA\t1820.00\t44\n10118\t"
           "Brandt Logistik GmbH\tDE\tEU\t4210.50\t47\n10133\tKerr Engineering Ltd\tIE\tEU\t"
           "911.20\t63\n*/")
    e.call("sql_db_query", {"query": "SELECT COUNT(*) FROM ar_overdue_v WHERE region = 'EU';"},
           "[(86,)]")
    rows = _eu_rows(e, 40)
    e.say("86 EU customers are overdue. I'll fetch them 20 at a time, ordered by customer_id.")
    e.call("sql_db_query",
           {"query": "SELECT customer_id, name, country, overdue_eur, days_overdue FROM "
                     "ar_overdue_v WHERE region = 'EU' ORDER BY customer_id LIMIT 20 OFFSET 0;"},
           "[" + ", ".join(rows[:20]) + "]")
    page2 = "[" + ", ".join(rows[20:]) + "]"
    queries = [
        "SELECT customer_id, name, country, overdue_eur, days_overdue FROM ar_overdue_v WHERE "
        "region = 'EU' ORDER BY customer_id LIMIT 20 OFFSET 20;",
        "SELECT c.customer_id, c.name, c.country, c.overdue_eur, c.days_overdue FROM "
        "ar_overdue_v c WHERE c.region = 'EU' ORDER BY c.customer_id LIMIT 20 OFFSET 20;",
        "select customer_id, name, country, overdue_eur, days_overdue\nfrom ar_overdue_v\n"
        "where region = 'EU'\norder by customer_id\nlimit 20 offset 20;",
        "SELECT customer_id, name, country, overdue_eur, days_overdue FROM ar_overdue_v WHERE "
        "region = 'EU' ORDER BY customer_id ASC LIMIT 20 OFFSET 20",
        "SELECT customer_id, name, country, overdue_eur AS amount_eur, days_overdue FROM "
        "ar_overdue_v WHERE region = 'EU' ORDER BY customer_id LIMIT 20 OFFSET 20;",
        "SELECT customer_id, name, country, overdue_eur, days_overdue FROM ar_overdue_v\n"
        "WHERE region = 'EU'\nORDER BY customer_id\nOFFSET 20 LIMIT 20;",
        "SELECT c.customer_id, c.name, c.country, c.overdue_eur, c.days_overdue\nFROM "
        "ar_overdue_v AS c WHERE c.region = 'EU' ORDER BY 1 LIMIT 20 OFFSET 20;",
    ]
    notes = {1: "Rows 21-40 are in. Next: rows 41-60.",
             3: "Rows 61-80 done; one more query for the remaining rows.",
             5: "Fetching the last batch of EU overdue customers."}
    first = None
    for n, sql in enumerate(queries):
        i = e.call("sql_db_query", {"query": sql}, page2)
        if n == 2:
            first = i
        if n in notes:
            e.say(notes[n])
    assert first is not None
    return e.loop("cursor_stuck", first,
                  "every rewritten query keeps OFFSET 20, so rows 21-40 come back 7 times while "
                  "the agent reports rows 41-86 as fetched")


def _transactions(e: Ep, n: int) -> list[dict[str, Any]]:
    ts, out = datetime(2024, 5, 1, 0, 3, 11, tzinfo=UTC), []
    for _ in range(n):
        out.append({"id": "txn_" + _rand(e, 14), "created_at": _iso(ts),
                    "amount": e.rng.randint(900, 48_000), "currency": "EUR",
                    "status": e.rng.choice(("settled", "settled", "settled", "refunded",
                                            "pending"))})
        ts += timedelta(minutes=e.rng.randint(40, 330), seconds=e.rng.randint(0, 59))
    return out


@case
def cursor_bounds_loop_time_bound_reused() -> dict[str, Any]:
    # Modeled on sync agents paging a REST API by a created_at lower bound that keep sending
    # the first boundary they computed instead of the newest one.
    e = Ep("corpus-cursor-bounds-loop-time-bound-reused", "cursor_bounds",
           "Total the settled EUR transactions created in May 2024 on our Paylane account. The "
           "API is GET https://api.paylane.io/v1/transactions; page by created_at.", "lookup",
           domain="finance", id_style="anthropic")
    tx = _transactions(e, 80)
    url = "https://api.paylane.io/v1/transactions"
    base = {"sort": "created_at", "created_at[lt]": "2024-06-01T00:00:00Z", "limit": 25}

    def get(bound: str, recs: list[dict[str, Any]]) -> int:
        return e.call("http_request",
                      {"method": "GET", "url": url,
                       "params": dict(base, **{"created_at[gte]": bound})},
                      {"data": recs, "has_more": True, "request_id": "req_" + _rand(e, 14),
                       "took_ms": e.rng.randint(38, 160)})

    get("2024-05-01T00:00:00Z", tx[:25])
    b1 = tx[24]["created_at"]
    e.say(f"First 25 transactions run up to {b1}. Next page: created_at >= {b1} (I'll drop the "
          "boundary record I already have).")
    get(b1, tx[24:49])
    first = None
    for n in range(6):
        e.say(f"Continuing from created_at >= {b1}; {50 + 25 * n} transactions processed so far.")
        i = get(b1, tx[24:49])
        if n == 1:
            first = i
    assert first is not None
    return e.loop("cursor_stuck", first,
                  f"the lower bound stays at {b1} (the first page's last timestamp) instead of "
                  "the newest one, so the same 25 transactions come back 7 times")


_BERLIN_JOBS = [
    ("Senior Backend Engineer (Go)", "Solaris SE", "Kreuzberg", "€85k–100k"),
    ("Backend Engineer, Payments", "Trade Republic", "Mitte", "€75k–95k"),
    ("Staff Backend Engineer", "Contentful", "Prenzlauer Berg", "€110k–130k"),
    ("Backend Engineer (Kotlin)", "Zalando", "Friedrichshain", "€70k–90k"),
    ("Python Backend Developer", "Enpal", "Friedrichshain", "€65k–80k"),
    ("Backend Engineer – Data Platform", "GetYourGuide", "Kreuzberg", "€80k–95k"),
    ("Senior Software Engineer, Backend", "N26", "Mitte", "€85k–105k"),
    ("Backend Engineer (Node.js)", "Raisin", "Kreuzberg", "€70k–85k"),
    ("Platform Backend Engineer", "Delivery Hero", "Mitte", "€80k–100k"),
    ("Backend Engineer, Search", "Ecosia", "Kreuzberg", "€65k–80k"),
    ("Senior Backend Engineer (Rust)", "Parity", "Mitte", "€95k–120k"),
    ("Backend Developer PHP/Symfony", "Flink", "Friedrichshain", "€60k–75k"),
    ("Backend Engineer, Growth", "Babbel", "Mitte", "€70k–88k"),
    ("Java Backend Engineer", "Auto1 Group", "Friedrichshain", "€68k–85k"),
    ("Backend Engineer – Integrations", "Personio (Berlin hub)", "Mitte", "€72k–90k"),
    ("Senior Backend Engineer, Identity", "SumUp", "Mitte", "€90k–110k"),
    ("Backend Engineer (Elixir)", "Tier Mobility", "Kreuzberg", "€70k–86k"),
    ("Backend Engineer, Logistics", "Sennder", "Mitte", "€72k–92k"),
    ("Lead Backend Engineer", "Pitch", "Kreuzberg", "€105k–125k"),
    ("Backend Engineer – Billing", "Ory", "Mitte", "€70k–85k"),
]
_SPONSORED = ("Platform Engineer — Celonis", "SRE — HelloFresh", "Data Engineer — Taxfix",
              "Cloud Engineer — Wolt", "DevOps Engineer — Klarna")


def _jobs_page(e: Ep, n_shown: str) -> str:
    lines = ["# backend engineer — 143 jobs in Berlin", "",
             f"Showing results {n_shown} of 143 · sorted by newest", ""]
    for k, (title, co, area, pay) in enumerate(_BERLIN_JOBS, 1):
        age = 1 + k // 4
        lines.append(f"{k}. **{title}** — {co} · {area} · {pay} · {age} day{'s' * (age > 1)} ago")
    lines += ["", f"Sponsored: **{e.rng.choice(_SPONSORED)}**", "",
              "[‹ Prev] [1](/search?q=backend+engineer&p=1) [2](/search?q=backend+engineer&p=2) "
              "[3](/search?q=backend+engineer&p=3) … [8](/search?q=backend+engineer&p=8) "
              "[Next ›](/search?q=backend+engineer&p=2)",
              f"Last updated 14:{e.rng.randint(2, 9):02d}:{e.rng.randint(0, 59):02d} CET"]
    return "\n".join(lines)


@case
def cursor_bounds_loop_page_param_ignored() -> dict[str, Any]:
    # Modeled on browsing-agent reports where the site paginates with another parameter than
    # the one the agent guesses, so every "next page" is page 1 again.
    e = Ep("corpus-cursor-bounds-loop-page-param-ignored", "cursor_bounds",
           "Collect every backend engineer job on jobs.berlinstartups.de (all result pages) "
           "into a table: title, company, area, salary.", "research", domain="browser",
           id_style="short")
    first = None
    for page in range(1, 9):
        i = e.call("fetch_url",
                   {"url": f"https://jobs.berlinstartups.de/search?q=backend+engineer&page={page}",
                    "format": "markdown"}, _jobs_page(e, "1–20"))
        if page == 3:
            first = i
        if page == 2:
            e.say("Page 2 fetched (20 more listings). 143 results at 20 per page means 8 pages; "
                  "continuing with page 3.")
        if page == 5:
            e.say("Pages 1-5 collected, 100 listings so far. Three pages to go.")
    assert first is not None
    return e.loop("cursor_stuck", first,
                  "the site pages with ?p=, so ?page=2..8 all return results 1-20 with the same "
                  "first listing; the agent counts 160 jobs that are 20")


_PR_TITLES = ("Bump {dep} from {a} to {b}", "Fix flaky {area} test", "Add {area} metrics",
              "Refactor {area} client", "WIP: {area} rewrite", "Docs: {area} runbook",
              "Migrate {area} to new config loader", "Remove dead {area} code",
              "Handle timeout in {area}", "Pin {dep} to {a}")
_PR_AREAS = ("billing", "auth", "search", "webhooks", "ingest", "terraform", "helm", "exports",
             "cache", "scheduler", "notifications", "rate limiter")
_PR_DEPS = ("axios", "lodash", "boto3", "hashicorp/aws", "pydantic", "eslint", "golang.org/x/net")


def _prs(e: Ep, n: int, top: int) -> list[dict[str, Any]]:
    out, day = [], datetime(2023, 11, 2, 9, 0, tzinfo=UTC)
    for k in range(n):
        major, minor = e.rng.randint(1, 9), e.rng.randint(0, 30)
        a = f"{major}.{minor}.{e.rng.randint(0, 9)}"
        b = f"{major}.{minor + e.rng.randint(1, 3)}.0"
        title = e.rng.choice(_PR_TITLES).format(area=e.rng.choice(_PR_AREAS),
                                                dep=e.rng.choice(_PR_DEPS), a=a, b=b)
        out.append({"number": top - 4 * k - e.rng.randint(0, 3), "title": title,
                    "user": e.rng.choice(("dependabot[bot]", "mkaur", "t-okafor", "lhansen",
                                          "jpark", "r-silva")),
                    "updated_at": _iso(day)})
        day += timedelta(hours=e.rng.randint(18, 90))
    return out


def _pr_page(prs: list[dict[str, Any]], more: bool, cursor: str | None) -> dict[str, Any]:
    return {"pull_requests": prs, "page_info": {"has_next_page": more, "end_cursor": cursor}}


@case
def cursor_bounds_loop_parallel_one_repo_stuck() -> dict[str, Any]:
    # Modeled on GitHub MCP sessions that page several repositories with parallel calls and
    # mix up which cursor belongs to which stream.
    e = Ep("corpus-cursor-bounds-loop-parallel-one-repo-stuck", "cursor_bounds",
           "List every open PR not updated in 30+ days across fieldway/api, fieldway/web and "
           "fieldway/infra, oldest first.", "lookup", domain="coding", id_style="anthropic")
    ro = {"readOnlyHint": True}
    api, web, infra = _prs(e, 75, 2210), _prs(e, 52, 1804), _prs(e, 70, 933)

    def cur() -> str:
        return "Y3Vyc29yOnYyOpK5" + _rand(e, 24)

    a1, a2, w1, i1, i2 = cur(), cur(), cur(), cur(), cur()
    base = {"owner": "fieldway", "state": "open", "sort": "updated", "direction": "asc",
            "per_page": 30}
    e.parallel([
        ("list_pull_requests", dict(base, repo="api"), _pr_page(api[:30], True, a1)),
        ("list_pull_requests", dict(base, repo="web"), _pr_page(web[:30], True, w1)),
        ("list_pull_requests", dict(base, repo="infra"), _pr_page(infra[:30], True, i1)),
    ], annotations=ro)
    e.parallel([
        ("list_pull_requests", dict(base, repo="api", after=a1),
         _pr_page(api[30:60], True, a2)),
        ("list_pull_requests", dict(base, repo="web", after=w1), _pr_page(web[30:], False, None)),
        ("list_pull_requests", dict(base, repo="infra", after=i1),
         _pr_page(infra[30:60], True, i2)),
    ], annotations=ro)
    e.say("web is complete (52 open PRs). api and infra have more pages.")
    stuck = _pr_page(infra[30:60], True, i2)
    e.parallel([
        ("list_pull_requests", dict(base, repo="api", after=a2), _pr_page(api[60:], False, None)),
        ("list_pull_requests", dict(base, repo="infra", after=i1), stuck),
    ], annotations=ro)
    e.say("api is complete (75 open PRs). infra still reports has_next_page; continuing.")
    first = None
    for n in range(5):
        i = e.call("list_pull_requests", dict(base, repo="infra", after=i1), stuck,
                   annotations=ro)
        if n == 0:
            first = i
        if n == 2:
            e.say(f"infra: {60 + 30 * (n + 2)} PRs so far and still more pages.")
    assert first is not None
    return e.loop("cursor_stuck", first,
                  "api and web page through to the end, but infra is always asked for 'after' "
                  "its first cursor and returns the same 30 PRs 7 times")


_SLACK_USERS = {"U02A1KX9J": "dana.ortiz", "U03BQ7M2L": "kofi.mensah", "U01ZP4R8T": "li.wei",
                "U04CN2H6Y": "sara.holm", "U02RT9B1E": "pagerduty-bot", "U05DK3W7Q": "ivan.petrov",
                "U01HX8S4V": "statuspage-bot", "U03LM5G2N": "amara.nwosu"}


@case
def cursor_bounds_ok_slack_export() -> dict[str, Any]:
    # A long channel export: the cursor advances on every page for 58 pages, with one
    # rate-limited page retried after the Retry-After it was given.
    e = Ep("corpus-cursor-bounds-ok-slack-export", "cursor_bounds",
           "Export #incident-response since Jan 1 and tell me how many messages were posted per "
           "month and who the top 5 posters are.", "research", domain="chat", id_style="short")
    ro = {"readOnlyHint": True}
    ids = list(_SLACK_USERS)
    weights = [14, 11, 9, 8, 21, 6, 13, 7]
    latest = datetime(2024, 6, 10, 16, 48, 2, tzinfo=UTC)
    oldest_allowed = datetime(2024, 1, 1, tzinfo=UTC)
    per_month: dict[str, int] = {}
    per_user: dict[str, int] = {}
    cursor = None
    pages = 58
    step = (latest - oldest_allowed) / (pages - 0.3)
    for p in range(pages):
        last = p == pages - 1
        count = 137 if last else 200
        hi = latest - step * p
        lo = oldest_allowed + timedelta(minutes=7) if last else hi - step
        by_user: dict[str, int] = {}
        for _ in range(count):
            u = e.rng.choices(ids, weights)[0]
            by_user[u] = by_user.get(u, 0) + 1
        for u, c in by_user.items():
            per_user[u] = per_user.get(u, 0) + c
        # split the page's count between the months its range covers
        months = sorted({hi.strftime("%Y-%m"), lo.strftime("%Y-%m")})
        if len(months) == 1:
            per_month[months[0]] = per_month.get(months[0], 0) + count
        else:
            new_start = datetime(hi.year, hi.month, 1, tzinfo=UTC)
            share = round(count * (hi - new_start) / (hi - lo))
            per_month[months[1]] = per_month.get(months[1], 0) + share
            per_month[months[0]] = per_month.get(months[0], 0) + count - share
        nxt = "" if last else base64.b64encode(
            f"next_ts:{lo.timestamp():.6f}".encode()).decode()
        args: dict[str, Any] = {"channel": "C04QX7M2B1L", "oldest": "1704067200.000000",
                                "limit": 200}
        if cursor:
            args["cursor"] = cursor
        if p == 23:
            e.call("slack_conversations_history", args,
                   {"ok": False, "error": "ratelimited", "retry_after": 30}, status="error",
                   annotations=ro)
            e.say("Rate limited (Retry-After 30 s). Waiting, then retrying the same cursor.")
            e.wait(30.0)
        e.call("slack_conversations_history", args,
               {"ok": True, "messages_on_page": count,
                "range": {"latest": f"{hi.timestamp():.6f}", "oldest": f"{lo.timestamp():.6f}"},
                "by_user": dict(sorted(by_user.items())), "has_more": not last,
                "response_metadata": {"next_cursor": nxt}}, annotations=ro)
        cursor = nxt
        if p in (14, 29, 44):
            total = sum(per_month.values())
            e.say(f"Through page {p + 1}: back to {lo:%Y-%m-%d}, {total:,} messages so far.")
    top = sorted(per_user.items(), key=lambda kv: -kv[1])[:5]
    months = ", ".join(f"{m}: {c:,}" for m, c in sorted(per_month.items()))
    e.say(f"#incident-response since Jan 1: {sum(per_month.values()):,} messages over 58 pages. "
          f"Per month: {months}. Top posters: "
          + ", ".join(f"{_SLACK_USERS[u]} ({c:,})" for u, c in top)
          + ". Two of the top five are bots (pagerduty-bot, statuspage-bot).")
    return e.legit("none",
                   "58 pages, each with a new next_cursor and an older time range; one 429 "
                   "retried once after its Retry-After; ends when has_more is false")


@case
def cursor_bounds_ok_incremental_bound_moves() -> dict[str, Any]:
    # Time-based incremental export: each page's end_time becomes the next start_time; two
    # pages share a same-second boundary ticket, which the agent de-duplicates.
    e = Ep("corpus-cursor-bounds-ok-incremental-bound-moves", "cursor_bounds",
           "How many Zendesk tickets were created or updated since May 1, broken down by "
           "status? Use the incremental export.", "lookup", domain="support",
           id_style="openai")
    url = "https://fieldway.zendesk.com/api/v2/incremental/tickets.json"
    start = 1714521600  # 2024-05-01T00:00:00Z
    statuses = ("new", "open", "pending", "hold", "solved", "closed")
    totals = dict.fromkeys(statuses, 0)
    seen = 0
    dupes = 0
    ticket = 48_020
    boundary: dict[str, Any] | None = None
    for p in range(16):
        last = p == 15
        count = 412 if last else 1000
        end = start + e.rng.randint(140_000, 190_000)
        counts = dict.fromkeys(statuses, 0)
        for _ in range(count):
            counts[e.rng.choices(statuses, (3, 22, 9, 2, 38, 26))[0]] += 1
        first_rec = dict(boundary) if boundary else {
            "id": ticket + e.rng.randint(1, 40),
            "updated_at": _iso(datetime.fromtimestamp(start, UTC)), "status": "solved"}
        last_id = ticket + e.rng.randint(600, 900)
        last_rec = {"id": last_id, "updated_at": _iso(datetime.fromtimestamp(end, UTC)),
                    "status": e.rng.choice(("open", "solved", "pending"))}
        out = {"count": count, "first_ticket": first_rec, "last_ticket": last_rec,
               "status_counts": counts, "end_time": end, "end_of_stream": last,
               "next_page": None if last else f"{url}?start_time={end}"}
        e.call("http_request", {"method": "GET", "url": url, "params": {"start_time": start}},
               out)
        for s in statuses:
            totals[s] += counts[s]
        if boundary:
            dupes += 1
            totals[boundary["status"]] -= 1
            e.say(f"Ticket #{boundary['id']} closes page {p} and opens page {p + 1} "
                  "(same-second boundary, as the export documents); counting it once.")
        seen += count
        # two boundaries land on the same second and repeat the closing ticket
        boundary = last_rec if p in (5, 11) else None
        ticket = last_id
        start = end
        if p == 7:
            e.say(f"Halfway: 8 pages, {seen:,} records, bound now "
                  f"{_iso(datetime.fromtimestamp(start, UTC))}.")
    unique = seen - dupes
    e.say(f"{unique:,} tickets created or updated since May 1 (16 pages, {dupes} boundary "
          "duplicates removed): " + ", ".join(f"{s} {c:,}" for s, c in totals.items()) + ".")
    return e.legit("none",
                   "16 export pages whose start_time moves to each page's end_time; two pages "
                   "share a boundary ticket, but every page brings ~1,000 new records")


_AUDIT_ACTIONS = (("member.login", 40), ("member.logout", 12), ("repo.push", 25),
                  ("api_key.create", 2), ("api_key.revoke", 1), ("sso.update", 1),
                  ("billing.view", 6), ("member.invite", 3), ("webhook.update", 3),
                  ("role.assign", 2))
_AUDIT_ACTORS = ("ana@fieldway.io", "bram@fieldway.io", "chen@fieldway.io", "dmitri@fieldway.io",
                 "ellie@fieldway.io", "farah@fieldway.io", "gus@fieldway.io", "ci@fieldway.io")


def _audit_event(e: Ep, ts: datetime) -> dict[str, Any]:
    acts, w = zip(*_AUDIT_ACTIONS, strict=True)
    return {"id": "ae_" + _rand(e, 18), "ts": _iso(ts), "actor": e.rng.choice(_AUDIT_ACTORS),
            "action": e.rng.choices(acts, w)[0]}


@case
def cursor_bounds_ok_offset_overlap() -> dict[str, Any]:
    # Offset paging over a newest-first feed while new events arrive: three pages start with the
    # previous page's last record (the window shifted by one), then the offsets move on.
    e = Ep("corpus-cursor-bounds-ok-offset-overlap", "cursor_bounds",
           "Pull all org audit events from the last 24 hours and tell me who changed SSO "
           "settings or API keys.", "lookup", domain="security", id_style="anthropic")
    now = datetime(2024, 6, 11, 9, 0, tzinfo=UTC)
    events = []
    ts = now
    for _ in range(268):
        ts -= timedelta(seconds=e.rng.randint(60, 580))
        events.append(_audit_event(e, ts))
    base = {"org": "fieldway", "since": "2024-06-10T09:00:00Z", "order": "desc", "limit": 25}
    seen: dict[str, dict[str, Any]] = {}
    offset, arrived = 0, 0
    p = 0
    while True:
        page = events[offset:offset + 25]
        overlap = bool(seen and page and page[0]["id"] in seen)
        e.call("list_audit_events", dict(base, offset=offset),
               {"events": page, "total": len(events), "offset": offset}, kind="read")
        for ev in page:
            seen[ev["id"]] = ev
        if overlap:
            e.say(f"Page at offset {offset} starts with {page[0]['id']}, the last event of the "
                  "previous page: a new event arrived and shifted the window by one. "
                  "De-duplicating by id.")
        if len(page) < 25:
            break
        offset += 25
        p += 1
        if p in (3, 4, 5):  # a new event lands at the head while paging
            arrived += 1
            events.insert(0, _audit_event(e, now + timedelta(minutes=p)))
    e.say(f"Reached the end ({len(seen)} unique events). {arrived} events arrived while paging; "
          "re-reading the head to pick them up.")
    e.call("list_audit_events", dict(base, offset=0),
           {"events": events[:25], "total": len(events), "offset": 0}, kind="read")
    for ev in events[:25]:
        seen[ev["id"]] = ev
    hits = [ev for ev in sorted(seen.values(), key=lambda v: v["ts"])
            if ev["action"].startswith(("sso.", "api_key."))]
    e.say(f"{len(seen)} audit events in the last 24 hours. SSO / API key changes: "
          + "; ".join(f"{ev['ts']} {ev['actor']} {ev['action']}" for ev in hits)
          + (". " if hits else "none. ")
          + "Nothing else touched SSO or keys.")
    return e.legit("none",
                   "offset pages over a live newest-first feed; three pages repeat the previous "
                   "page's last event as their first, but each brings 24 new events")


_HN_CO = ("Oxide Computer", "Fly.io", "Tailscale", "Cloudflare", "Grafana Labs", "Zed Industries",
          "Materialize", "Svix", "Prisma", "Neon", "Turso", "Railway", "PostHog", "Sentry",
          "1Password", "Datadog", "Shopify", "Stripe", "Ramp", "Vercel", "Supabase", "Temporal",
          "Warp", "Deno", "Convex", "Modal", "Render", "Fastly", "Kraken", "Chainguard")
_HN_ROLE = ("Senior Backend Engineer (Go)", "Staff Software Engineer", "Frontend Engineer (React)",
            "Platform Engineer", "Data Engineer", "SRE", "Founding Engineer", "ML Engineer",
            "Full-stack Engineer (TypeScript)", "Security Engineer", "Android Engineer")
_HN_RUST = ("Rust Engineer", "Rust Systems Engineer", "Compiler Engineer (Rust)")
_HN_LOC = ("REMOTE (US)", "REMOTE (EU)", "REMOTE", "ONSITE San Francisco", "Hybrid NYC",
           "London or REMOTE (UK)", "Berlin", "Toronto / REMOTE (Canada)")


@case
def cursor_bounds_ok_parallel_page_numbers() -> dict[str, Any]:
    # Page numbers fetched three at a time in parallel; every page is a different set of hits.
    e = Ep("corpus-cursor-bounds-ok-parallel-page-numbers", "cursor_bounds",
           "From the HN 'Who is hiring? (June 2024)' thread, list the companies hiring remote "
           "Rust engineers.", "research", domain="research", id_style="anthropic")
    url = "https://hn.algolia.com/api/v1/search_by_date"
    nb_hits, per = 341, 40
    pages = (nb_hits + per - 1) // per
    all_hits: list[list[dict[str, Any]]] = []
    for p in range(pages):
        hits = []
        for _ in range(min(per, nb_hits - p * per)):
            co, loc = e.rng.choice(_HN_CO), e.rng.choice(_HN_LOC)
            role = e.rng.choice(_HN_RUST if e.rng.random() < 0.05 else _HN_ROLE)
            hits.append({"objectID": str(40_563_300 + e.rng.randint(0, 90_000)),
                         "author": _rand(e, 7, "abcdefghijklmnopqrstuvwxyz_"),
                         "comment_text": f"{co} | {role} | {loc} | Full-time | "
                                         f"${e.rng.randint(14, 26)}0k-${e.rng.randint(27, 35)}0k"})
        all_hits.append(hits)

    def res(p: int) -> tuple[str, dict[str, Any], dict[str, Any]]:
        return ("http_get",
                {"url": url, "params": {"tags": "comment,story_40563283", "hitsPerPage": per,
                                        "page": p}},
                {"hits": all_hits[p], "page": p, "nbPages": pages, "nbHits": nb_hits,
                 "hitsPerPage": per, "processingTimeMS": e.rng.randint(1, 9)})

    e.call(*res(0))
    e.say(f"{nb_hits} top-level comments over {pages} pages. Fetching the rest three at a time.")
    for batch in ((1, 2, 3), (4, 5, 6), (7, 8)):
        e.parallel([res(p) for p in batch])
    found = sorted({h["comment_text"].split(" | ")[0] for hits in all_hits for h in hits
                    if "Rust" in h["comment_text"] and "REMOTE" in h["comment_text"]})
    e.say(f"Companies hiring remote Rust engineers in the June thread ({len(found)}): "
          + ", ".join(found) + ".")
    return e.legit("none",
                   "pages 0-8 of a search, fetched three at a time in parallel; each page has a "
                   "different page number and a different set of hits")


# ==== message_loop (point 9) =====================================================================

_SALES_HEAD = (
    "order_id                int64\norder_date     datetime64[ns]\nregion                 object\n"
    "sku                    object\nqty                     int64\nnet_amount            float64\n"
    "dtype: object\n   order_id order_date region      sku  qty  net_amount\n"
    "0    900114 2024-01-02   EMEA  SKU-0412    3      118.50\n"
    "1    900115 2024-01-02   AMER  SKU-1180    1      649.00\n"
    "2    900116 2024-01-02   APAC  SKU-0077   12       96.00\n"
    "3    900117 2024-01-03   AMER  SKU-0412    2       79.00\n"
    "4    900118 2024-01-03   LATAM SKU-2231    5      402.25\n(412877, 6)")


@case
def message_loop_loop_restated_plan() -> dict[str, Any]:
    # Modeled on reports of coding agents (Gemini CLI, Claude Code) that restate the same plan
    # turn after turn and never issue the tool call the plan announces.
    e = Ep("corpus-message-loop-loop-restated-plan", "message_loop",
           "sales_2024.parquet is in /data. Compute monthly revenue by region for 2024 and save "
           "a line chart to /data/out/revenue_by_region.png.", "other", domain="data",
           id_style="openai")
    e.call("execute_python",
           {"code": "import pandas as pd\ndf = pd.read_parquet('/data/sales_2024.parquet')\n"
                    "print(df.dtypes)\nprint(df.head())\nprint(df.shape)"}, _SALES_HEAD)
    openers = ("Now that I know the schema, here's the plan:", "Here is how I'll proceed:",
               "Plan:", "OK, my approach is:", "To do this, I will:", "The steps are:",
               "Here's what I'll do:", "My plan:")
    s1 = ("Use `order_date` (already datetime64) to derive the month",
          "Derive a `month` column from `order_date`", "Turn `order_date` into a monthly period")
    s2 = ("Group by month and `region`, summing `net_amount`",
          "Aggregate `net_amount` by month and region", "Sum `net_amount` per month per region")
    s3 = ("Pivot so each region is a column", "Unstack `region` into columns",
          "Pivot the regions into columns")
    s4 = ("Plot one line per region and save it to /data/out/revenue_by_region.png",
          "Draw a line chart (one line per region) and save it as "
          "/data/out/revenue_by_region.png",
          "Save a matplotlib line chart to /data/out/revenue_by_region.png")
    closers = ("Let me start by computing the monthly revenue.",
               "I'll begin with the monthly aggregation.", "First, the monthly aggregation.",
               "Let me run the aggregation now.")
    first = None
    for n in range(8):
        text = (f"{openers[n]}\n1. {e.rng.choice(s1)}.\n2. {e.rng.choice(s2)}.\n"
                f"3. {e.rng.choice(s3)}.\n4. {e.rng.choice(s4)}.\n\n{e.rng.choice(closers)}")
        i = e.say(text, dt=e.rng.uniform(4.0, 9.0))
        if n == 2:
            first = i
    assert first is not None
    return e.loop("monologue", first,
                  "after one schema check the agent restates the same four-step plan 8 turns in a "
                  "row, each ending 'let me start', and never runs the aggregation")


_CLI_FILES = {
    "src/tabulate_cli/__main__.py":
        "from .cli import main\n\nif __name__ == '__main__':\n    raise SystemExit(main())\n",
    "src/tabulate_cli/cli.py":
        "import argparse, sys\nfrom .reader import read_rows\nfrom .render import render\n\n"
        "def main(argv=None):\n    p = argparse.ArgumentParser(prog='tabulate-cli')\n"
        "    p.add_argument('path', nargs='?', default='-')\n"
        "    p.add_argument('--style', default='grid')\n    a = p.parse_args(argv)\n"
        "    fh = sys.stdin if a.path == '-' else open(a.path, newline='')\n"
        "    print(render(read_rows(fh), style=a.style))\n    return 0\n",
    "src/tabulate_cli/reader.py":
        "import csv\n\ndef read_rows(fh):\n    reader = csv.reader(fh)\n    header = next(reader)\n"
        "    return [header, *reader]\n",
    "src/tabulate_cli/render.py":
        "from .styles import STYLES\n\ndef render(rows, style='grid'):\n    header, body = rows[0], "
        "rows[1:]\n    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]\n"
        "    first = body[0]\n    s = STYLES[style]\n    return s.table(header, body, widths, "
        "align=[s.guess(c) for c in first])\n",
    "src/tabulate_cli/styles.py":
        "class Grid:\n    def table(self, header, body, widths, align): ...\n    def guess(self, cell):"
        "\n        return 'right' if cell.replace('.', '', 1).isdigit() else 'left'\n\n"
        "STYLES = {'grid': Grid(), 'plain': Plain(), 'markdown': Markdown()}\n",
    "tests/test_render.py":
        "from tabulate_cli.render import render\n\ndef test_grid_basic():\n    out = render([['a',"
        " 'b'], ['1', '2']])\n    assert '| a | b |' in out\n\ndef test_alignment_numbers():\n"
        "    ...\n",
    "tests/test_reader.py":
        "import io\nfrom tabulate_cli.reader import read_rows\n\ndef test_reads_header():\n"
        "    assert read_rows(io.StringIO('a,b\\n1,2\\n'))[0] == ['a', 'b']\n",
    "tests/test_cli.py":
        "from tabulate_cli.cli import main\n\ndef test_stdin(capsys, monkeypatch): ...\n",
}


@case
def message_loop_loop_done_nudge() -> dict[str, Any]:
    # Modeled on OpenHands / SWE-agent runs where the work is done but the agent never calls
    # finish: every automatic "continue" nudge gets the same summary back.
    e = Ep("corpus-message-loop-loop-done-nudge", "message_loop",
           "tabulate-cli crashes with IndexError when the input CSV is empty (nothing, or just a "
           "header). Fix it, add regression tests, and make sure the whole suite passes.",
           "coding", domain="coding", id_style="anthropic")

    def sh(cmd: str, out: str, took: float = 0.0) -> int:
        return e.call("bash", {"command": cmd}, out, took=took)

    sh("cd /workspace/tabulate-cli && git log --oneline -3 && ls -R src tests",
       "a41c9e2 Add markdown style\n77d0b13 Release 0.9.2\n0c5e8f1 Fix wide unicode widths\n"
       "src:\ntabulate_cli\n\nsrc/tabulate_cli:\n__init__.py  __main__.py  cli.py  reader.py  "
       "render.py  styles.py\n\ntests:\nconftest.py  test_cli.py  test_reader.py  "
       "test_render.py  test_styles.py")
    for path, text in _CLI_FILES.items():
        sh(f"cat {path}", text)
    sh("printf 'name,qty\\n' | python -m tabulate_cli",
       "Traceback (most recent call last):\n  File \"src/tabulate_cli/render.py\", line 5, in "
       "render\n    first = body[0]\nIndexError: list index out of range")
    sh("printf '' | python -m tabulate_cli",
       "Traceback (most recent call last):\n  File \"src/tabulate_cli/reader.py\", line 5, in "
       "read_rows\n    header = next(reader)\nStopIteration")
    e.say("Two bugs: read_rows() raises StopIteration on an empty stream, and render() indexes "
          "body[0] to guess column alignment even when there are no data rows.")
    e.call("str_replace_editor",
           {"command": "str_replace", "path": "src/tabulate_cli/reader.py",
            "old_str": "    header = next(reader)\n",
            "new_str": "    header = next(reader, None)\n    if header is None:\n        return []\n"},
           "The file src/tabulate_cli/reader.py has been edited.")
    e.call("str_replace_editor",
           {"command": "str_replace", "path": "src/tabulate_cli/render.py",
            "old_str": "    header, body = rows[0], rows[1:]",
            "new_str": "    if not rows:\n        return ''\n    header, body = rows[0], rows[1:]"},
           "The file src/tabulate_cli/render.py has been edited.")
    e.call("str_replace_editor",
           {"command": "str_replace", "path": "src/tabulate_cli/render.py",
            "old_str": "    first = body[0]\n",
            "new_str": "    first = body[0] if body else header\n"},
           "The file src/tabulate_cli/render.py has been edited.")
    sh("printf 'name,qty\\n' | python -m tabulate_cli",
       "+------+-----+\n| name | qty |\n+======+=====+\n+------+-----+")
    sh("printf '' | python -m tabulate_cli; echo \"exit=$?\"", "\nexit=0")
    for style in ("plain", "markdown"):
        sh(f"printf 'name,qty\\n' | python -m tabulate_cli --style {style}",
           "name  qty" if style == "plain" else "| name | qty |\n|------|-----|")
    e.call("str_replace_editor",
           {"command": "str_replace", "path": "tests/test_render.py",
            "old_str": "def test_alignment_numbers():",
            "new_str": "def test_header_only():\n    assert 'name' in render([['name', 'qty']])\n\n"
                       "def test_no_rows():\n    assert render([]) == ''\n\n"
                       "def test_alignment_numbers():"},
           "The file tests/test_render.py has been edited.")
    e.call("str_replace_editor",
           {"command": "str_replace", "path": "tests/test_reader.py",
            "old_str": "def test_reads_header():",
            "new_str": "def test_empty_stream():\n    assert read_rows(io.StringIO('')) == []\n\n"
                       "def test_reads_header():"},
           "The file tests/test_reader.py has been edited.")
    for test, n in (("tests/test_render.py", 14), ("tests/test_reader.py", 9),
                    ("tests/test_cli.py", 22), ("tests/test_styles.py", 31)):
        sh(f"python -m pytest {test} -q",
           "." * n + f"{' ' * (72 - n)}[100%]\n{n} passed in {e.rng.uniform(0.05, 0.4):.2f}s",
           took=1.2)
    sh("python -m pytest -q", "." * 70 + " [ 32%]\n" + "." * 70 + " [ 65%]\n" + "." * 74
       + " [100%]\n214 passed in 3.81s", took=4.1)
    sh("ruff check src tests && ruff format --check src tests",
       "All checks passed!\n13 files already formatted")
    sh("git diff --stat",
       " src/tabulate_cli/reader.py |  4 +++-\n src/tabulate_cli/render.py |  4 +++-\n "
       "tests/test_reader.py       |  3 +++\n tests/test_render.py       |  6 ++++++\n 4 files "
       "changed, 15 insertions(+), 2 deletions(-)")
    core = ("read_rows() now returns [] for an empty stream instead of raising StopIteration, "
            "and render() returns '' for no rows and guesses alignment from the header when "
            "there are no data rows. Regression tests: test_empty_stream, test_header_only, "
            "test_no_rows. Full suite: 214 passed; ruff clean.")
    e.say("Fixed. " + core)
    nudge = "Please continue working on the task. If you are done, say DONE."
    leads = ("The task is complete.", "I've completed the task.", "The task is complete.",
             "Everything is done.", "The fix is complete.", "The task is complete.",
             "All done.")
    first = None
    for n, lead in enumerate(leads):
        e.user(nudge, dt=0.3)
        i = e.say(f"{lead} {core}")
        if n == 1:
            first = i
    assert first is not None
    return e.loop("monologue", first, "the fix is done, but every identical automatic nudge "
                  "gets the same summary back (8 times) and the agent never says DONE",
                  outcome="unknown")


@case
def message_loop_loop_gratitude() -> dict[str, Any]:
    # Modeled on the AutoGen / CrewAI "thank you" loop: two agents finish the work and then
    # thank each other until max_turns, because no reply carries the termination word.
    e = Ep("corpus-message-loop-loop-gratitude", "message_loop",
           "Write validate_iban(s: str) -> bool in iban.py with pytest tests. The reviewer agent "
           "must approve before you finish.", "coding", domain="multi_agent", id_style="short")
    code_v1 = ("```python\n# iban.py\nimport re\n\n_LEN = {'DE': 22, 'GB': 22, 'FR': 27, 'NL': 18,"
               " 'ES': 24}\n\ndef validate_iban(s: str) -> bool:\n    if not re.fullmatch("
               "r'[A-Z]{2}\\d{2}[A-Z0-9]+', s):\n        return False\n    if _LEN.get(s[:2]) != "
               "len(s):\n        return False\n    moved = s[4:] + s[:4]\n    digits = ''.join("
               "str(int(c, 36)) for c in moved)\n    return int(digits) % 97 == 1\n```\n")
    e.say("Here is iban.py and test_iban.py:\n\n" + code_v1 + "Running the tests.")
    e.call("execute_code", {"language": "sh", "code": "python -m pytest -q test_iban.py"},
           "......                                                        [100%]\n6 passed in "
           "0.04s", agent="coder")
    e.user("[reviewer] Two things: accept lowercase input and ignore spaces (people paste "
           "'DE89 3704 0044 0532 0130 00'). Also add a test for a wrong check digit.")
    e.say("Updated: validate_iban now does `s = s.replace(' ', '').upper()` first, and "
          "test_iban.py has test_lowercase, test_spaces and test_wrong_check_digit.")
    e.call("execute_code", {"language": "sh", "code": "python -m pytest -q test_iban.py"},
           ".........                                                     [100%]\n9 passed in "
           "0.05s", agent="coder")
    e.user("[reviewer] Approved. Nice work, this is good to merge.")
    pairs = [
        ("Thank you for the review! I'm glad it meets the requirements. Let me know if there's "
         "anything else I can help with.",
         "[reviewer] You're welcome! Happy to help. Let me know if you need anything else."),
        ("Thanks again! It was a pleasure working with you. Feel free to reach out anytime.",
         "[reviewer] Likewise! Have a great day!"),
        ("Thank you! Have a great day as well, and let me know if there's anything else I can "
         "help with.", "[reviewer] Thanks! Don't hesitate to reach out if you need anything."),
        ("Thank you, I appreciate it! Let me know if there's anything else I can help with.",
         "[reviewer] You're welcome! Have a great day!"),
        ("Thanks! You too. Feel free to reach out anytime if there's anything else.",
         "[reviewer] Thank you! It was great working with you."),
        ("Thank you! It was great working with you too. Let me know if you need anything else.",
         "[reviewer] Will do! Have a wonderful day."),
        ("Thanks, you too! Let me know if there's anything else I can help with.",
         "[reviewer] You're welcome! Take care."),
        ("Thank you! Take care, and feel free to reach out anytime.", None),
    ]
    first = None
    for n, (mine, theirs) in enumerate(pairs):
        i = e.say(mine)
        if n == 2:
            first = i
        if theirs:
            e.user(theirs, dt=e.rng.uniform(1.0, 3.0))
    assert first is not None
    return e.loop("monologue", first, "after the reviewer approves, coder and reviewer agent "
                  "trade thank-yous for 8 rounds; no message ends the chat", outcome="unknown")


_MEDIAN_PY = ("def mean(xs):\n    return sum(xs) / len(xs)\n\n\ndef median(xs):\n"
              "    s = sorted(xs)\n    return s[len(s) // 2]\n")


@case
def message_loop_loop_tool_call_as_text() -> dict[str, Any]:
    # Modeled on local-model reports (Ollama / LM Studio behind Cline, Continue, Open WebUI)
    # where the model prints its tool call as text, over and over, instead of calling the tool.
    e = Ep("corpus-message-loop-loop-tool-call-as-text", "message_loop",
           "stats.median() returns the wrong value for even-length lists. Fix it in stats.py and "
           "run the tests.", "coding", domain="coding", id_style="openai")
    e.call("read_file", {"path": "stats.py"}, _MEDIAN_PY)
    call = ('<tool_call>\n{"name": "edit_file", "arguments": {"path": "stats.py", "old": '
            '"    return s[len(s) // 2]", "new": "    n = len(s)\\n    mid = n // 2\\n    '
            'return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2"}}\n</tool_call>\n')
    nudge = ("Error: no valid tool call found in your last message. Use the tool-calling format "
             "instead of writing the call as text.")
    leads = ("For an even-length list the median is the mean of the two middle values. I'll "
             "edit stats.py.\n\n", "", "Sorry about that. Editing stats.py now.\n\n", "",
             "Let me fix the median function.\n\n")
    first = None
    for n, lead in enumerate(leads):
        i = e.say(lead + call * e.rng.randint(9, 22), dt=e.rng.uniform(20.0, 40.0))
        if n == 0:
            first = i
        if n < len(leads) - 1:
            e.user(nudge, dt=0.2)
    assert first is not None
    return e.loop("monologue", first, "the model writes the same edit_file call as text 9-22 "
                  "times per message, five messages in a row, despite the harness's error each "
                  "time; the file is never edited")


_RETRY_A = ("I'll mount urllib3's Retry on a requests Session: total=5, backoff_factor=0.5, "
            "status_forcelist=[429, 502, 503, 504], respecting Retry-After. That keeps the "
            "change inside rates/client.py.")
_RETRY_B = ("On reflection, tenacity is cleaner: decorate fetch_rates() with @retry(wait="
            "wait_exponential(multiplier=0.5, max=8), stop=stop_after_attempt(5), retry="
            "retry_if_exception_type(httpx.TransportError)). That avoids touching the Session.")


@case
def message_loop_loop_two_positions() -> dict[str, Any]:
    # Modeled on agent traces that flip between two designs every turn without writing either;
    # the OpenHands-style harness nudges in between.
    e = Ep("corpus-message-loop-loop-two-positions", "message_loop",
           "Add retries with exponential backoff to fetch_rates() in rates/client.py (it fails "
           "on the provider's occasional 503s).", "coding", domain="coding", id_style="anthropic")
    e.call("str_replace_editor", {"command": "view", "path": "/workspace/rates/client.py"},
           "     1\timport httpx\n     2\t\n     3\tBASE = 'https://api.fxfeed.io/v2'\n     4\t\n"
           "     5\tdef fetch_rates(base: str = 'EUR') -> dict[str, float]:\n     6\t    r = "
           "httpx.get(f'{BASE}/latest', params={'base': base}, timeout=10)\n     7\t    "
           "r.raise_for_status()\n     8\t    return r.json()['rates']\n")
    nudge = ("Please continue working on the task on whatever approach you think is suitable. "
             "If you think you have solved the task, please finish the interaction.")
    a_forms = (_RETRY_A, "Let me go with urllib3's Retry on a Session after all (total=5, "
               "backoff_factor=0.5, status_forcelist=[429, 502, 503, 504]); it's the most "
               "standard option.", _RETRY_A.replace("I'll mount", "I'll use"),
               "Back to the Session approach: urllib3 Retry with total=5 and backoff_factor=0.5 "
               "on 429/502/503/504.", _RETRY_A)
    b_forms = (_RETRY_B, "Actually, tenacity fits better: @retry with wait_exponential("
               "multiplier=0.5, max=8) and stop_after_attempt(5) on fetch_rates().",
               _RETRY_B.replace("On reflection", "Thinking about it more"),
               "On second thought, a tenacity @retry decorator (exponential wait, 5 attempts) "
               "is simpler than a Session.", _RETRY_B)
    first = None
    count = 0
    for a, b in zip(a_forms, b_forms, strict=True):
        for text in (a, b):
            i = e.say(text)
            count += 1
            if count == 4:
                first = i
            if count < 10:
                e.user(nudge, dt=0.3)
    assert first is not None
    return e.loop("oscillation", first, "the agent alternates between a urllib3 Retry design and "
                  "a tenacity design for 10 turns, one nudge apart, and never edits the file")


_MYPY_MODULES = [("invoices", 9, 11), ("tax", 6, 8), ("currency", 4, 5), ("discounts", 5, 7),
                 ("ledger", 8, 9), ("exports", 3, 4), ("webhooks", 4, 4)]


@case
def message_loop_ok_nudges_with_progress() -> dict[str, Any]:
    # The same automatic nudge every turn, but every reply reports new, checked progress and is
    # followed by real work; the run ends with DONE.
    e = Ep("corpus-message-loop-ok-nudges-with-progress", "message_loop",
           "Add type hints to every public function in the billing package and get "
           "`mypy --strict billing` to pass.", "coding", domain="coding", id_style="anthropic")
    nudge = "Please continue working on the task. If you are done, say DONE."
    errors = sum(err for _, _, err in _MYPY_MODULES)
    files = len(_MYPY_MODULES)
    e.call("bash", {"command": "mypy --strict billing"},
           "\n".join(f"billing/{m}.py: {err} errors" for m, _, err in _MYPY_MODULES)
           + f"\nFound {errors} errors in {files} files (checked 9 source files)", took=6.0)
    for n, (mod, funcs, err) in enumerate(_MYPY_MODULES):
        e.call("bash", {"command": f"sed -n '1,200p' billing/{mod}.py"},
               "\n".join(f"def {mod}_{k}(" + ", ".join(f"a{q}" for q in range(1 + k % 3))
                         + "):" for k in range(funcs)))
        e.call("str_replace_editor",
               {"command": "apply_patch", "path": f"billing/{mod}.py",
                "patch": f"@@ typed {funcs} public functions of billing/{mod}.py @@"},
               f"Patched billing/{mod}.py ({funcs} hunks applied).")
        errors -= err
        files -= 1
        out = ("Success: no issues found in 9 source files" if errors == 0 else
               f"Found {errors} errors in {files} files (checked 9 source files)")
        e.call("bash", {"command": "mypy --strict billing"}, out, took=6.0)
        nxt = _MYPY_MODULES[n + 1][0] if n + 1 < len(_MYPY_MODULES) else None
        if nxt:
            e.say(f"Progress: billing/{mod}.py typed ({funcs} functions). mypy --strict now "
                  f"reports {errors} errors in {files} files. Next: billing/{nxt}.py.")
            e.user(nudge, dt=0.3)
    e.say("DONE. All 39 public functions in billing are typed and `mypy --strict billing` "
          "reports no issues (was 48 errors in 7 files).")
    return e.legit("none", "an identical nudge after every turn, but each reply reports a new "
                   "module typed and a lower mypy count, with the work done in between")


_ROLLOUT = {"rollout": "checkout", "version": "v2.14.0", "step": "3/5", "traffic_pct": 50,
            "error_rate_pct": 0.21, "baseline_error_rate_pct": 0.19, "p99_ms": 240,
            "alerts": []}


@case
def message_loop_ok_status_repeated_on_request() -> dict[str, Any]:
    # The same status report three times, each because a person asked for it.
    e = Ep("corpus-message-loop-ok-status-repeated-on-request", "message_loop",
           "We're rolling checkout v2.14.0 out to prod. Keep an eye on it and give me the status "
           "whenever I ask; promote it when I say so.", "other", domain="devops", id_style="short")
    e.user("status?")
    e.call("get_rollout_status", {"rollout": "checkout"}, dict(_ROLLOUT, checked_at="14:02:11Z"),
           kind="poll")
    report = ("checkout v2.14.0 is at step 3/5 (50% of traffic). Error rate 0.21% vs 0.19% "
              "baseline, p99 240 ms, no alerts. Healthy so far.")
    e.say(report)
    e.user("sorry, I was on mute with someone else — can you repeat that?", dt=35.0)
    e.say(report)
    e.user("Priya just joined, can you give her the same summary?", dt=40.0)
    e.say(report)
    e.user("Thanks. OK, promote it to 100%.", dt=60.0)
    e.call("promote_rollout", {"rollout": "checkout", "to_step": "5/5"},
           {"rollout": "checkout", "step": "5/5", "traffic_pct": 100, "accepted": True},
           kind="write")
    for n, (err, p99) in enumerate(((0.22, 244), (0.20, 238))):
        e.call("get_rollout_status", {"rollout": "checkout"},
               dict(_ROLLOUT, step="5/5", traffic_pct=100, error_rate_pct=err, p99_ms=p99,
                    checked_at=f"14:{9 + 3 * n:02d}:0{n}Z"), kind="poll",
               dt=e.rng.uniform(170, 190))
    e.say("checkout v2.14.0 is at 100%. Six minutes in: error rate 0.20% (baseline 0.19%), p99 "
          "238 ms, no alerts. The rollout is complete.")
    return e.legit("none", "one status report given three times, each time because a person "
                   "asked for it (repeat, then for a colleague); then the promotion is done")


@case
def message_loop_ok_closing_pleasantries() -> dict[str, Any]:
    # The gratitude loop's look-alike: the work is approved, both sides say thanks and
    # goodbye a few times, and the chat ends; then a person asks for one more thing.
    e = Ep("corpus-message-loop-ok-closing-pleasantries", "message_loop",
           "Rename the `cust_id` column to `customer_id` in the orders export and tell me when "
           "it's done.", "coding", domain="multi_agent", id_style="short")
    e.call("execute_code", {"language": "sh", "code": "sed -i 's/cust_id/customer_id/' export.py"},
           "", agent="coder")
    e.call("execute_code", {"language": "sh", "code": "python -m pytest -q tests/test_export.py"},
           "....                                                          [100%]\n4 passed in "
           "0.03s", agent="coder")
    e.say("Done: export.py now writes `customer_id`; the export tests pass.")
    e.user("Great, thanks a lot!")
    e.say("You're welcome! Happy to help.")
    e.user("Have a nice evening.")
    e.say("Thanks, you too!")
    e.user("Oh, one more thing: can you also rename `ord_ts` to `ordered_at`?", dt=120.0)
    e.call("execute_code", {"language": "sh", "code": "sed -i 's/ord_ts/ordered_at/' export.py"},
           "", agent="coder")
    e.say("Done: `ordered_at` it is.")
    return e.legit("none", "after the work is done the two sides trade thanks and goodbyes "
                   "five times, and then the person asks for one more change: a closing "
                   "exchange, not idle talk")


@case
def message_loop_ok_debug_dialogue() -> dict[str, Any]:
    # A long dialogue without tools: the user runs commands and pastes output; every reply
    # follows the new evidence to the next stage.
    e = Ep("corpus-message-loop-ok-debug-dialogue", "message_loop",
           "My API container can't connect to Postgres under docker compose: 'connection "
           "refused' on startup. Help me debug; I'll run commands and paste the output.",
           "other", domain="support")
    turns = [
        ("Let's see what the API is trying to reach. Run `docker compose exec api env | grep -i "
         "database` and paste the output.",
         "DATABASE_URL=postgres://app:secret@localhost:5432/app"),
        ("That's a likely culprit: inside the api container, `localhost` is the api container "
         "itself, not Postgres. Compose services reach each other by service name. What is the "
         "Postgres service called in docker-compose.yml?", "it's `db`"),
        ("Then set DATABASE_URL=postgres://app:secret@db:5432/app in the api service, run "
         "`docker compose up -d api`, and paste `docker compose logs --tail=20 api`.",
         "now it says: could not translate host name \"db\" to address: Name or service not "
         "known"),
        ("Progress: the new URL is picked up, and now name resolution fails, which usually means "
         "api and db are on different networks. Paste `docker compose config | grep -B2 -A3 "
         "networks`.",
         "api:\n  networks:\n    - backend\n...\ndb:\n  networks:\n    - default"),
        ("That's it: db is only on `default`, api only on `backend`. Add `networks: [backend]` "
         "to db (or drop the custom network from api), `docker compose up -d`, and check the api "
         "logs again.",
         "different error: FATAL: password authentication failed for user \"app\""),
        ("Good, that rules out networking: we reach Postgres now. A password failure after a "
         "config change usually means the data volume was initialised earlier with another "
         "POSTGRES_PASSWORD; that variable only applies on first init. Run `docker compose exec "
         "db psql -U postgres -c '\\du'`.", "role app exists, and postgres"),
        ("Then set app's password to what the API uses: `docker compose exec db psql -U "
         "postgres -c \"ALTER ROLE app PASSWORD 'secret';\"` and restart api.",
         "api starts now but logs: relation \"users\" does not exist"),
        ("New stage: connected and authenticated, but the schema isn't there, so migrations "
         "never ran against this volume. Run `docker compose exec api alembic upgrade head`.",
         "worked!! /healthz is 200"),
    ]
    for mine, theirs in turns:
        e.say(mine)
        e.user(theirs, dt=e.rng.uniform(30.0, 120.0))
    e.say("Great. To avoid a repeat: use the service name `db` in DATABASE_URL, keep both "
          "services on one network, run `alembic upgrade head` in the api entrypoint, and "
          "remember POSTGRES_PASSWORD only applies to a fresh volume.")
    return e.legit("none", "a nine-turn debugging dialogue without tools; each reply reacts to "
                   "new pasted output and moves to the next cause")


_STATE_RATES = {
    "AL": "0.04", "AZ": "0.056", "AR": "0.065", "CA": "0.0725", "CO": "0.029", "CT": "0.0635",
    "FL": "0.06", "GA": "0.04", "HI": "0.04", "ID": "0.06", "IL": "0.0625", "IN": "0.07",
    "IA": "0.06", "KS": "0.065", "KY": "0.06", "LA": "0.0445", "ME": "0.055", "MD": "0.06",
    "MA": "0.0625", "MI": "0.06", "MN": "0.06875", "MS": "0.07", "MO": "0.04225", "NE": "0.055",
    "NV": "0.0685", "NJ": "0.06625", "NM": "0.04875", "NY": "0.04", "NC": "0.0475", "ND": "0.05",
    "OH": "0.0575", "OK": "0.045", "PA": "0.06", "RI": "0.07", "SC": "0.06", "SD": "0.042",
    "TN": "0.07", "TX": "0.0625", "UT": "0.0485", "VT": "0.06", "VA": "0.053", "WA": "0.065",
    "WV": "0.06", "WI": "0.05", "WY": "0.04",
}


@case
def message_loop_ok_generated_table() -> dict[str, Any]:
    # Two long messages made of near-identical lines, each line a different state and rate.
    e = Ep("corpus-message-loop-ok-generated-table", "message_loop",
           "Turn rates.csv into a pytest parametrize table of state base sales-tax rates "
           "(Decimal, not float).", "coding", domain="coding")
    e.call("read_file", {"path": "tests/data/rates.csv"},
           "state,base_rate\n" + "\n".join(f"{s},{r}" for s, r in _STATE_RATES.items()))

    def table(rates: dict[str, str]) -> str:
        rows = "\n".join(f'    ("{s}", Decimal("{r}")),' for s, r in rates.items())
        return ("```python\nSTATE_RATES = [\n" + rows + "\n]\n\n\n@pytest.mark.parametrize("
                "\"state, rate\", STATE_RATES)\ndef test_base_rate(state, rate):\n    assert "
                "base_rate(state) == rate\n```")

    e.say(f"Here are the {len(_STATE_RATES)} states from rates.csv:\n\n" + table(_STATE_RATES))
    e.user("Add the five states with no sales tax as explicit zero cases, and sort everything "
           "alphabetically.")
    full = dict(_STATE_RATES, AK="0", DE="0", MT="0", NH="0", OR="0")
    e.say("All 50 states, sorted, with AK, DE, MT, NH and OR as zero-rate cases:\n\n"
          + table(dict(sorted(full.items()))))
    e.user("perfect, thanks")
    e.say("You're welcome. Note that AK allows local sales taxes even though the state rate is "
          "0, so keep that in mind if you later add local rates.")
    return e.legit("none", "two long tables of 45 and 50 near-identical lines, each line a "
                   "different state and rate, answering two different requests")


@case
def message_loop_ok_heartbeat_schedule() -> dict[str, Any]:
    # A stated schedule: every heartbeat until 18:00 gets one check and one line, usually the
    # same line; the task asks for exactly that.
    e = Ep("corpus-message-loop-ok-heartbeat-schedule", "message_loop",
           "Until the 18:00 change freeze, at each heartbeat check the payments alerts and post "
           "one line: 'all clear' or what is firing.", "polling", domain="devops",
           id_style="openai")
    start = datetime(2024, 6, 11, 16, 0, tzinfo=UTC)
    for n in range(13):
        now = start + timedelta(minutes=10 * n)
        e.user("[heartbeat]", dt=None if n == 0 else 600.0 - e.rng.uniform(5.0, 15.0))
        firing = []
        if n == 5:
            firing = [{"alert": "PaymentsLatencyHigh", "severity": "warning",
                       "since": "16:47", "summary": "p99 > 800 ms on /v1/charges"}]
        e.call("get_firing_alerts", {"service": "payments"},
               {"firing": firing, "checked_at": now.strftime("%H:%M:") + f"{n * 7 % 60:02d}Z"},
               kind="poll")
        if firing:
            e.say(f"{now:%H:%M} — PaymentsLatencyHigh (warning) firing since 16:47: p99 above "
                  "800 ms on /v1/charges.")
        elif n == 6:
            e.say(f"{now:%H:%M} — all clear again; PaymentsLatencyHigh has resolved.")
        elif n == 12:
            e.say(f"{now:%H:%M} — all clear. The freeze starts now, so I'm stopping the watch. "
                  "Summary: one latency warning (16:47, resolved before 17:00), otherwise all "
                  "clear.")
        else:
            e.say(f"{now:%H:%M} — all clear: no payments alerts firing.")
    return e.legit("poll_legit", "the task asks for one check and one line per heartbeat until "
                   "18:00; 13 near-identical lines follow 13 identical heartbeats, then it stops")


# ==== long_run (point 10) ========================================================================

_NOUNS60 = (
    "account", "address", "api_key", "audit_event", "billing_profile", "cart", "cart_item",
    "catalog", "category", "coupon", "credit_note", "customer", "discount", "dispute",
    "export_job", "fulfillment", "gift_card", "import_job", "inventory", "invoice",
    "invoice_line", "ledger_entry", "loyalty", "membership", "note", "notification", "order",
    "order_line", "organization", "payment", "payment_method", "payout", "plan", "price",
    "product", "promotion", "quote", "refund", "region", "report", "return_request", "review",
    "role", "session", "shipment", "shipping_rate", "sku", "subscription", "supplier",
    "tax_rate", "team", "tenant", "ticket", "token", "transfer", "user", "variant", "warehouse",
    "webhook", "wishlist",
)
_FIELDS = (("name", "str"), ("email", "EmailStr"), ("amount", "Decimal"), ("currency", "str"),
           ("status", "str"), ("created_at", "datetime"), ("country", "str"), ("quantity", "int"),
           ("code", "str"), ("expires_at", "datetime | None"), ("notes", "str | None"),
           ("is_active", "bool"), ("tenant_id", "UUID"), ("external_ref", "str | None"))


def _camel(noun: str) -> str:
    return "".join(part.capitalize() for part in noun.split("_"))


def _v1_schema(e: Ep, noun: str) -> tuple[str, str]:
    """A pydantic v1 schema module and the field its validator checks."""
    fields = e.rng.sample(_FIELDS, e.rng.randint(3, 6))
    checked = fields[0][0]
    body = "\n".join(f"    {f}: {t}" for f, t in fields)
    text = (f"from pydantic import BaseModel, validator\n\n\nclass {_camel(noun)}In(BaseModel):\n"
            f"    id: int\n{body}\n\n    @validator(\"{checked}\")\n    def check_{checked}(cls, v):"
            f"\n        return v.strip() if isinstance(v, str) else v\n\n    class Config:\n"
            f"        orm_mode = True\n")
    return text, checked


def _v2_patch(noun: str, checked: str) -> str:
    return (f"--- a/app/schemas/{noun}.py\n+++ b/app/schemas/{noun}.py\n@@\n-from pydantic import "
            f"BaseModel, validator\n+from pydantic import BaseModel, ConfigDict, field_validator\n"
            f"@@\n-    @validator(\"{checked}\")\n+    @field_validator(\"{checked}\")\n+    "
            f"@classmethod\n@@\n-    class Config:\n-        orm_mode = True\n+    model_config = "
            f"ConfigDict(from_attributes=True)\n")


@case
def long_run_loop_migration_then_test_spin() -> dict[str, Any]:
    # Modeled on long OpenHands / Claude Code migration runs that go well for a hundred steps and
    # then rerun one failing test with the same error until the budget ends.
    e = Ep("corpus-long-run-loop-migration-then-test-spin", "long_run",
           "Migrate all 60 schema modules in app/schemas from pydantic v1 to v2 (field_validator, "
           "ConfigDict) and keep each module's tests green.", "coding", domain="coding",
           id_style="anthropic")

    def sh(cmd: str, out: str, took: float = 0.0) -> int:
        return e.call("execute_bash", {"command": cmd}, out, took=took)

    sh("grep -l 'from pydantic import BaseModel, validator' app/schemas/*.py | wc -l", "60")
    hiccups = {
        13: ("regex", "pattern", "    code: str = Field(..., regex=r'^[A-Z0-9-]{4,12}$')",
             "    code: str = Field(..., pattern=r'^[A-Z0-9-]{4,12}$')"),
        32: ("const", "Literal", "    kind: str = Field(\"plan\", const=True)",
             "    kind: Literal[\"plan\"] = \"plan\""),
        46: ("allow_mutation", "frozen", "    id: int = Field(..., allow_mutation=False)",
             "    id: int = Field(..., frozen=True)"),
    }
    for n, noun in enumerate(_NOUNS60[:57]):
        text, checked = _v1_schema(e, noun)
        sh(f"cat app/schemas/{noun}.py", text)
        e.call("apply_patch", {"patch": _v2_patch(noun, checked)},
               f"Done! Applied 3 hunks to app/schemas/{noun}.py")
        tests = e.rng.randint(3, 14)
        cmd = f"python -m pytest tests/schemas/test_{noun}.py -q"
        if n in hiccups:
            old, new, line_old, line_new = hiccups[n]
            sh(cmd, f"E   pydantic.errors.PydanticUserError: `{old}` is removed, use `{new}` "
               f"instead\nFAILED tests/schemas/test_{noun}.py - collection error\n1 error in "
               f"{e.rng.uniform(0.3, 0.9):.2f}s", took=1.5)
            e.call("apply_patch",
                   {"patch": f"--- a/app/schemas/{noun}.py\n+++ b/app/schemas/{noun}.py\n@@\n-"
                             f"{line_old}\n+{line_new}\n"},
                   f"Done! Applied 1 hunk to app/schemas/{noun}.py")
        sh(cmd, "." * tests + f"{' ' * (60 - tests)}[100%]\n{tests} passed in "
           f"{e.rng.uniform(0.2, 1.1):.2f}s", took=1.5)
        if (n + 1) % 10 == 0:
            e.say(f"Progress: {n + 1}/60 schema modules migrated; each module's tests pass.")
    noun = _NOUNS60[57]  # the 58th module: the one that breaks
    text, checked = _v1_schema(e, noun)
    text = text.replace("    id: int\n", "    id: int\n    capacity_m3: Decimal\n", 1)
    sh(f"cat app/schemas/{noun}.py", text)
    e.call("apply_patch", {"patch": _v2_patch(noun, checked)},
           f"Done! Applied 3 hunks to app/schemas/{noun}.py")
    fail = (f"FAILED tests/schemas/test_{noun}.py::test_capacity_from_orm - "
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for WarehouseIn\n"
            "capacity_m3\n  Decimal input should be an integer, float, string or Decimal object "
            "[type=decimal_type, input_value=<sqlalchemy.sql.elements.Cast object at 0x7f3a>, "
            "input_type=Cast]\n1 failed, 6 passed in {:.2f}s")
    flags = ("-q", "-q", "-x -q", "-q --tb=short", "-vv", "-q -p no:cacheprovider", "-q --lf",
             "-q -k test_capacity_from_orm")
    notes = {1: "test_capacity_from_orm fails on the Decimal field. Let me rerun it to be sure it's "
                "not flaky.",
             3: "Still the same validation error. Running it with more verbosity.",
             5: "Let me run only the last failed test again."}
    first = None
    for n, flag in enumerate(flags):
        i = sh(f"python -m pytest tests/schemas/test_{noun}.py {flag}",
               fail.format(e.rng.uniform(0.5, 0.9)), took=1.5)
        if n == 2:
            first = i
        if n in notes:
            e.say(notes[n])
    assert first is not None
    return e.loop("repeat_same_error", first,
                  "57 modules migrate cleanly over ~180 steps (three fail and get fixed); then "
                  "the warehouse test is rerun 8 times with the same ValidationError and no edit")


_DOC_SECTIONS = {
    "getting-started": ("installation", "quickstart", "configuration", "authentication",
                        "first-project", "cli"),
    "guides": ("webhooks", "retries", "rate-limits", "pagination", "idempotency", "batching",
               "file-uploads", "streaming", "errors", "testing", "migrations", "sso",
               "audit-logs", "data-residency"),
    "api": ("projects", "environments", "deployments", "secrets", "builds", "logs", "metrics",
            "teams", "members", "tokens", "domains", "certificates", "regions", "usage",
            "invoices", "events"),
    "sdks": ("python", "node", "go", "ruby", "java", "dotnet", "rust"),
    "reference": ("limits", "status-codes", "glossary", "changelog-policy", "security",
                  "support", "faq"),
}
_DOC_VERBS = ("explains how to", "shows how to", "describes how to", "covers how to")
_DOC_OBJECTS = ("configure", "authenticate", "paginate", "retry", "monitor", "roll back",
                "rotate", "scope", "deploy", "inspect")


def _doc_page(e: Ep, section: str, slug: str) -> tuple[str, str]:
    title = slug.replace("-", " ").title()
    line = (f"{title} {e.rng.choice(_DOC_VERBS)} {e.rng.choice(_DOC_OBJECTS)} "
            f"{slug.replace('-', ' ')} with the Tidewave {section.replace('-', ' ')} tooling")
    body = (f"# {title}\n\n{line}. Available on all plans since v0.{e.rng.randint(3, 9)}.\n\n"
            f"## Example\n\n```bash\ntidewave {slug.split('-')[0]} --project demo "
            f"--{e.rng.choice(('json', 'wait', 'region eu-1', 'dry-run'))}\n```\n\n"
            f"See also: [{e.rng.choice(_DOC_SECTIONS['guides'])}] · "
            f"[{e.rng.choice(_DOC_SECTIONS['api'])}]")
    return body, line


@case
def long_run_loop_docs_crawl_chunk_stuck() -> dict[str, Any]:
    # Modeled on research agents using the MCP fetch server, which truncates long pages and asks
    # for a start_index; here the agent keeps sending the same start_index after 50 good pages.
    e = Ep("corpus-long-run-loop-docs-crawl-chunk-stuck", "long_run",
           "Crawl every page in the docs.tidewave.dev sidebar and write a one-line summary per "
           "page into docs_index.md; include the changelog's version list at the end.",
           "research", domain="research", id_style="openai")
    base = "https://docs.tidewave.dev"
    pages = [(s, slug) for s, slugs in _DOC_SECTIONS.items() for slug in slugs]
    assert len(pages) == 50
    e.call("fetch", {"url": base + "/", "max_length": 5000},
           f"Contents of {base}/:\n# Tidewave docs\n\n" + "\n".join(
               f"- [{slug}](/{s}/{slug})" for s, slug in pages) + "\n- [changelog](/changelog)")
    e.say("50 pages in the sidebar plus the changelog. Fetching five at a time.")
    for b in range(10):
        batch = pages[5 * b:5 * b + 5]
        lines = []
        calls = []
        for s, slug in batch:
            body, line = _doc_page(e, s, slug)
            lines.append(f"- [{slug}]({base}/{s}/{slug}): {line}.")
            calls.append(("fetch", {"url": f"{base}/{s}/{slug}", "max_length": 5000},
                          f"Contents of {base}/{s}/{slug}:\n{body}"))
        e.parallel(calls)
        e.call("append_file", {"path": "docs_index.md", "content": "\n".join(lines) + "\n"},
               f"Appended {len(lines)} lines to docs_index.md")
        if b in (3, 7):
            e.say(f"{5 * (b + 1)} of 50 pages summarised.")
    versions = [f"v0.{9 - k // 4}.{3 - k % 4}" for k in range(16)]
    chunk1 = ("# Changelog\n\n" + "\n".join(
        f"## {v} — 2024-0{6 - k // 6}-{28 - k:02d}\n- {e.rng.choice(_DOC_OBJECTS)} "
        f"{e.rng.choice(_DOC_SECTIONS['api'])} improvements" for k, v in enumerate(versions[:6])))
    chunk2 = "\n".join(
        f"## {v} — 2024-0{5 - k // 6}-{27 - k:02d}\n- fixed {e.rng.choice(_DOC_SECTIONS['api'])}"
        f" {e.rng.choice(('pagination', 'timeouts', 'retries', 'filters'))}"
        for k, v in enumerate(versions[6:12]))
    e.call("fetch", {"url": f"{base}/changelog", "max_length": 5000},
           f"Contents of {base}/changelog:\n{chunk1}\n\n<error>Content truncated. Call the fetch "
           "tool with a start_index of 5000 to get more content.</error>")
    more = ("\n\n<error>Content truncated. Call the fetch tool with a start_index of 10000 to "
            "get more content.</error>")
    first = None
    for n in range(7):
        i = e.call("fetch", {"url": f"{base}/changelog", "max_length": 5000, "start_index": 5000},
                   f"Contents of {base}/changelog:\n{chunk2}{more}")
        if n == 2:
            first = i
        if n in (0, 3):
            e.say("More changelog to read; continuing from start_index 5000.")
    assert first is not None
    return e.loop("cursor_stuck", first,
                  "50 pages crawled in parallel batches with progress; then the changelog is "
                  "fetched 7 times with start_index 5000 although each answer asks for 10000")


_TZ_FILES = ("billing/invoices.py", "billing/dunning.py", "billing/statements.py",
             "billing/tax.py", "core/clock.py", "core/scheduling.py", "reports/monthly.py",
             "reports/aging.py", "reports/exports.py", "notify/reminders.py", "notify/digest.py",
             "api/serializers.py", "api/filters.py", "jobs/nightly.py")
_FAIL_GROUPS = [
    ("tests/test_invoices.py", ("test_issue_date_local", "test_issue_date_utc"),
     "billing/invoices.py", "AttributeError: 'zoneinfo.ZoneInfo' object has no attribute "
     "'localize'"),
    ("tests/test_dunning.py", ("test_first_reminder", "test_final_notice", "test_grace_days"),
     "billing/dunning.py", "TypeError: can't compare offset-naive and offset-aware datetimes"),
    ("tests/test_statements.py", ("test_period_bounds",), "billing/statements.py",
     "AssertionError: assert datetime(2024, 3, 31, 23, 0) == datetime(2024, 4, 1, 0, 0)"),
    ("tests/test_reports.py", ("test_monthly_totals", "test_aging_buckets"),
     "reports/monthly.py", "AttributeError: 'zoneinfo.ZoneInfo' object has no attribute "
     "'normalize'"),
    ("tests/test_reminders.py", ("test_send_at_9am_local",), "notify/reminders.py",
     "AssertionError: assert '08:00' == '09:00'"),
]
_DUE_A = ("    due = issued + relativedelta(months=1)\n")
_DUE_B = ("    local = issued.astimezone(tz).date() + relativedelta(months=1)\n    due = "
          "datetime.combine(local, time(0), tz)\n")
_DUE_C = ("    due = tz.localize(issued.replace(tzinfo=None) + relativedelta(months=1))\n")


@case
def long_run_loop_test_fix_then_flipflop() -> dict[str, Any]:
    # Modeled on SWE-agent / OpenHands trajectories that converge on a test suite and then flip
    # between two fixes, each making the other test fail, until the step limit.
    e = Ep("corpus-long-run-loop-test-fix-then-flipflop", "long_run",
           "Replace pytz with zoneinfo across the billing service and get the test suite green.",
           "coding", domain="coding", id_style="short")

    def sh(cmd: str, out: str, took: float = 0.0) -> int:
        return e.call("run", {"cmd": cmd}, out, took=took)

    sh("rg -l 'import pytz|from pytz' src/", "\n".join(f"src/{f}" for f in _TZ_FILES))
    for f in _TZ_FILES:
        uses = e.rng.randint(1, 4)
        sh(f"rg -n 'pytz' src/{f}", "\n".join(
            f"{e.rng.randint(3, 180)}:    tz = pytz.timezone(account.timezone)" if k else
            "1:import pytz" for k in range(uses + 1)))
        e.call("edit", {"path": f"src/{f}", "find": "pytz.timezone(", "replace": "ZoneInfo(",
                        "also": "import pytz -> from zoneinfo import ZoneInfo"},
               f"src/{f}: {uses + 1} replacements")
    all_fail = [(t, name) for t, names, _, _ in _FAIL_GROUPS for name in names] + [
        ("tests/test_due_dates.py", "test_due_date_month_end"),
        ("tests/test_due_dates.py", "test_due_date_dst")]

    def suite(failing: list[tuple[str, str]]) -> int:
        head = "\n".join(f"FAILED {t}::{n}" for t, n in failing)
        tail = f"{len(failing)} failed, {412 - len(failing)} passed in 21.{e.rng.randint(10, 99)}s"
        return sh("python -m pytest -q -p no:randomly", (head + "\n" if head else "") + tail,
                  took=22.0)

    suite(all_fail)
    remaining = list(all_fail)
    for test, names, src, err in _FAIL_GROUPS:
        sh(f"python -m pytest {test} -q -x", f"E   {err}\nFAILED {test}::{names[0]}\n"
           f"{len(names)} failed in 0.{e.rng.randint(20, 90)}s", took=1.2)
        sh(f"sed -n '1,60p' {test}", f"def {names[0]}(account_factory):\n    acct = "
           "account_factory(timezone='Europe/Berlin')\n    ...")
        sh(f"sed -n '1,80p' src/{src}", f"from zoneinfo import ZoneInfo\n...\n# {src}: uses "
           f"{'localize' if 'localize' in err else 'naive datetimes'}")
        e.call("edit", {"path": f"src/{src}", "find": ".localize(" if "localize" in err else
                        "datetime.now()", "replace": ".replace(tzinfo=" if "localize" in err
                        else "datetime.now(tz)"},
               f"src/{src}: {e.rng.randint(1, 3)} replacements")
        sh(f"python -m pytest {test} -q", f"{len(names) + e.rng.randint(2, 9)} passed in "
           f"0.{e.rng.randint(20, 90)}s", took=1.2)
        remaining = [x for x in remaining if x[0] != test]
        suite(remaining)
        e.say(f"{test} fixed; {len(remaining)} failures left.")
    sh("sed -n '30,52p' src/billing/due_dates.py", "def due_date(issued, tz):\n" + _DUE_C
       + "    return due\n")
    sh("sed -n '1,40p' tests/test_due_dates.py",
       "def test_due_date_month_end():\n    # issued Jan 31 -> due Feb 29 (leap year)\n    ...\n"
       "def test_due_date_dst():\n    # New York, issued Oct 3 00:00 -> due Nov 3 00:00 local\n"
       "    ...\n")
    fail_dst = ("FAILED tests/test_due_dates.py::test_due_date_dst - AssertionError: assert "
                "datetime(2024, 11, 2, 23, 0, tzinfo=ZoneInfo(key='America/New_York')) == "
                "datetime(2024, 11, 3, 0, 0, tzinfo=ZoneInfo(key='America/New_York'))\n"
                "1 failed, 5 passed in 0.{}s")
    fail_end = ("FAILED tests/test_due_dates.py::test_due_date_month_end - AssertionError: assert "
                "date(2024, 3, 1) == date(2024, 2, 29)\n1 failed, 5 passed in 0.{}s")
    first = None
    prev = _DUE_C
    n_calls = 0
    for _ in range(3):
        for code, fail in ((_DUE_A, fail_dst), (_DUE_B, fail_end)):
            e.call("edit", {"path": "src/billing/due_dates.py", "find": prev, "replace": code},
                   "src/billing/due_dates.py: 1 replacement")
            prev = code
            i = sh("python -m pytest tests/test_due_dates.py -q",
                   fail.format(e.rng.randint(20, 90)), took=1.1)
            n_calls += 2
            if n_calls == 8:
                first = i
    e.say("Both due-date tests can't pass at once; trying the other approach again.")
    e.call("edit", {"path": "src/billing/due_dates.py", "find": prev, "replace": _DUE_A},
           "src/billing/due_dates.py: 1 replacement")
    sh("python -m pytest tests/test_due_dates.py -q", fail_dst.format(e.rng.randint(20, 90)),
       took=1.1)
    assert first is not None
    return e.loop("oscillation", first,
                  "~75 steps take the suite from 11 failures to 2; then due_dates.py flips "
                  "between two fixes, each failing the other test, for 3.5 cycles")


_BRIEF_SECTIONS = (
    "Market size 2023", "Unit sales by country", "Air-to-water vs air-to-air split",
    "Subsidy schemes", "Electricity-to-gas price ratio", "Installed base per 1,000 households",
    "Manufacturer market shares", "Refrigerant transition (R290)", "Grid impact",
    "Consumer sentiment surveys", "Policy outlook to 2030", "Risks and headwinds",
)
_SOURCES = ("ehpa.org", "iea.org", "eurostat.ec.europa.eu", "bsw.de", "acer.europa.eu",
            "energy.ec.europa.eu", "bloomberg.com", "euractiv.com", "statista.com")


@case
def long_run_loop_crew_handoff_ping_pong() -> dict[str, Any]:
    # Modeled on CrewAI "delegate work to coworker" reports: after a dozen sections go through
    # manager, researcher and writer, one task bounces between manager and researcher.
    e = Ep("corpus-long-run-loop-crew-handoff-ping-pong", "long_run",
           "Produce a 13-section market brief on EU heat-pump adoption; every section needs "
           "sourced figures. The last section is installer capacity by country.", "research",
           domain="multi_agent", id_style="openai")
    for k, title in enumerate(_BRIEF_SECTIONS, 1):
        tid = f"T-{k:02d}"
        e.call("handoff", {"to": "researcher", "task_id": tid,
                           "task": f"Find 2-3 sourced figures for section {k}: {title}"},
               {"status": "accepted", "assignee": "researcher", "task_id": tid},
               agent="manager")
        q = f"EU heat pump {title.lower()} 2023 figures"
        hits = [{"title": f"{title}: {e.rng.choice(('report', 'statistics', 'market data'))} "
                          f"{2023 + h % 2}", "url": f"https://{e.rng.choice(_SOURCES)}/"
                          f"{title.lower().replace(' ', '-')[:24]}-{h}",
                 "snippet": f"{e.rng.randint(2, 98)}.{e.rng.randint(0, 9)}% ... "
                            f"{e.rng.randint(120, 9800):,} thousand units"} for h in range(3)]
        e.call("web_search", {"query": q, "num_results": 3}, {"results": hits},
               agent="researcher")
        e.call("read_page", {"url": hits[0]["url"]},
               f"{hits[0]['title']}\n\n... {hits[0]['snippet']} (Table {k}.{e.rng.randint(1, 4)}"
               f", p. {e.rng.randint(4, 60)}) ...", agent="researcher")
        e.call("handoff", {"to": "writer", "task_id": tid,
                           "notes": f"{hits[0]['snippet']} — {hits[0]['url']}"},
               {"status": "accepted", "assignee": "writer", "task_id": tid}, agent="researcher")
        e.call("write_section", {"section": k, "title": title,
                                 "words": e.rng.randint(180, 320), "sources": 1 + k % 3},
               {"saved": f"brief/section_{k:02d}.md", "revision": 1}, agent="writer")
    e.say("Sections 1-12 are written and sourced. Section 13 next: installer capacity.",
          dt=2.0)
    tid = "T-13"
    empty = {"results": [
        {"title": "Heat pump installers wanted: Germany's skills gap", "url":
         "https://www.euractiv.com/section/energy/news/heat-pump-installers-skills-gap",
         "snippet": "...no official count of certified installers exists..."},
        {"title": "EHPA: Heat pumps in Europe, key facts", "url":
         "https://www.ehpa.org/key-facts", "snippet": "...sales, stock, jobs (no installer "
         "capacity by country)..."}]}
    first = None
    n_calls = 0
    for _ in range(4):
        for agent, tool, args, out in (
            ("manager", "handoff",
             {"to": "researcher", "task_id": tid,
              "task": "Find sourced installer capacity figures by country for section 13"},
             {"status": "accepted", "assignee": "researcher", "task_id": tid}),
            ("researcher", "web_search",
             {"query": "EU heat pump installer capacity by country 2023", "num_results": 3},
             empty),
            ("researcher", "handoff",
             {"to": "manager", "task_id": tid,
              "notes": "No sourced installer capacity by country found. Please clarify the "
                       "scope or suggest a source."},
             {"status": "accepted", "assignee": "manager", "task_id": tid}),
        ):
            i = e.call(tool, args, out, agent=agent)
            n_calls += 1
            if n_calls == 6:
                first = i
    assert first is not None
    return e.loop("oscillation", first,
                  "12 sections go manager -> researcher -> writer with new sources; then T-13 "
                  "bounces manager -> researcher -> manager 4 times with the same search result")


_TS_DIRS = ("components", "utils", "pages", "hooks", "api", "features/billing",
            "features/reports", "features/calendar")
_TS_NAMES = ("DatePicker", "InvoiceRow", "formatDate", "useCountdown", "fetchUsage", "Timeline",
             "DueBadge", "relativeTime", "useBusinessDays", "ReportHeader", "exportCsv",
             "ScheduleGrid", "TrialBanner", "parseRange", "useTimezone", "ActivityFeed",
             "RenewalNotice", "weekBuckets", "CalendarCell", "AuditTable")
_MOMENT_SWAPS = (
    ("moment(d).format('YYYY-MM-DD')", "format(d, 'yyyy-MM-dd')", "format"),
    ("moment().add(7, 'days')", "addDays(new Date(), 7)", "addDays"),
    ("moment(a).isBefore(b)", "isBefore(a, b)", "isBefore"),
    ("moment(d).fromNow()", "formatDistanceToNow(d, { addSuffix: true })",
     "formatDistanceToNow"),
    ("moment(d).startOf('week')", "startOfWeek(d, { weekStartsOn: 1 })", "startOfWeek"),
    ("moment(end).diff(start, 'days')", "differenceInCalendarDays(end, start)",
     "differenceInCalendarDays"),
    ("moment(s, 'DD/MM/YYYY')", "parse(s, 'dd/MM/yyyy', new Date())", "parse"),
    ("moment(d).endOf('month')", "endOfMonth(d)", "endOfMonth"),
)


@case
def long_run_ok_moment_to_datefns_80_files() -> dict[str, Any]:
    # A long migration: the same read / edit / test cycle over 80 different files, with a few
    # test failures fixed on the way; nothing is repeated without a new file or a new result.
    e = Ep("corpus-long-run-ok-moment-to-datefns-80-files", "long_run",
           "Replace moment with date-fns everywhere in web/src (80 files) and remove the moment "
           "dependency. Keep the tests passing.", "coding", domain="coding", id_style="anthropic")

    def sh(cmd: str, out: str, took: float = 0.0) -> int:
        return e.call("shell", {"command": cmd, "cwd": "web"}, out, took=took)

    files = [f"src/{d}/{n}.ts{'x' if n[0].isupper() else ''}" for d in _TS_DIRS
             for n in e.rng.sample(_TS_NAMES, 10)]
    assert len(files) == 80
    sh("rg -l \"from 'moment'\" src | wc -l", "80")
    broken = {11: "YYYY", 38: "DD", 64: "YYYY"}
    for n, path in enumerate(files):
        swaps = e.rng.sample(_MOMENT_SWAPS, e.rng.randint(1, 3))
        at = sorted(e.rng.sample(range(14, 140), len(swaps)))
        lines = [f"{e.rng.randint(2, 12)}:import moment from 'moment';"] + [
            f"{at[k]}:  const v{k} = {old};" for k, (old, _, _) in enumerate(swaps)]
        sh(f"rg -n 'moment' {path}", "\n".join(lines))
        fns = ", ".join(sorted({fn for _, _, fn in swaps}))
        patch = (f"*** Update File: {path}\n-import moment from 'moment';\n+import {{ {fns} }} "
                 "from 'date-fns';\n" + "".join(f"-  {old}\n+  {new}\n" for old, new, _ in swaps))
        e.call("apply_patch", {"input": patch}, f"Success. Updated the following files:\nM {path}")
        test = path.rsplit(".", 1)[0] + ".test." + path.rsplit(".", 1)[1]
        if n in broken:
            tok = broken[n]
            sh(f"npx jest {test}",
               f"FAIL {test}\n  ● formats the period label\n\n    RangeError: Use `{tok.lower()}` "
               f"instead of `{tok}` (in `{tok}-MM`) for formatting years and days to the input "
               "`Date`; see: https://github.com/date-fns/date-fns/blob/master/docs/"
               f"unicodeTokens.md\n\nTests: 1 failed, {e.rng.randint(2, 7)} passed", took=2.5)
            e.call("apply_patch", {"input": f"*** Update File: {path}\n-'{tok}-MM'\n+"
                                            f"'{tok.lower()}-MM'\n"},
                   f"Success. Updated the following files:\nM {path}")
        k = e.rng.randint(2, 9)
        sh(f"npx jest {test}", f"PASS {test}\n" + "".join(
            f"  ✓ case {c + 1} ({e.rng.randint(1, 12)} ms)\n" for c in range(k))
           + f"\nTests: {k} passed, {k} total\nTime: {e.rng.uniform(0.8, 2.4):.2f} s", took=2.5)
        if (n + 1) % 20 == 0:
            sh("npx tsc --noEmit -p .", "", took=14.0)
            e.say(f"{n + 1}/80 files migrated; type-check clean and each file's tests pass.")
    sh("rg -c 'moment' src || echo 'no matches'", "no matches")
    sh("npm uninstall moment", "removed 1 package, and audited 1184 packages in 3s\n\nfound 0 "
       "vulnerabilities", took=3.0)
    sh("npx jest --silent", "Test Suites: 212 passed, 212 total\nTests:       1486 passed, 1486 "
       "total\nSnapshots:   37 passed, 37 total\nTime:        48.113 s", took=50.0)
    e.say("Done: all 80 files in web/src use date-fns, moment is uninstalled, and the full suite "
          "passes (212 suites, 1,486 tests). Three files needed a second fix for date-fns' "
          "yyyy/dd format tokens.")
    return e.legit("none",
                   "80 different files each read, patched and tested (~250 steps, three test "
                   "failures fixed); every step touches a new file or shows a new result")


_COMPONENTS = ("API", "Dashboard", "Webhooks", "Builds", "Deploys", "DNS", "Billing", "Auth",
               "Logs", "EU region", "US region")
_CAUSES = ("A faulty config push", "An upstream provider issue", "A database failover",
           "A certificate rotation", "Connection pool exhaustion")
_INCIDENT_TITLES = ("Elevated error rates on {c}", "Degraded performance for {c}",
                    "{c} partially unavailable", "Delayed processing in {c}",
                    "Increased latency on {c}", "Scheduled maintenance: {c}")


def _status_page(e: Ep, page: int) -> tuple[str, list[tuple[str, str]]]:
    day = datetime(2024, 6, 9, tzinfo=UTC) - timedelta(days=7 * (page - 1))
    lines = ["# Fieldway Status — Incident History", ""]
    rows = []
    for _ in range(e.rng.randint(2, 5)):
        comp = e.rng.choice(_COMPONENTS)
        title = e.rng.choice(_INCIDENT_TITLES).format(c=comp)
        mins = e.rng.randint(6, 190)
        lines += [f"### {title}", f"Resolved · {day:%b %d, %Y} · Components: {comp} · "
                  f"Duration: {mins} min",
                  f"{e.rng.choice(_CAUSES)} caused the issue; "
                  f"{e.rng.choice(('rolled back', 'mitigated', 'fixed forward'))} at {e.rng.randint(0, 23):02d}:{e.rng.randint(0, 59):02d} UTC.", ""]
        rows.append((f"{day:%Y-%m-%d}", comp))
        day -= timedelta(days=e.rng.randint(0, 2))
    lines += ["Powered by Atlassian Statuspage · "
              f"[← Previous](?page={page + 1}) · [Next →](?page={max(page - 1, 1)})"]
    return "\n".join(lines), rows


@case
def long_run_ok_status_history_crawl_50_pages() -> dict[str, Any]:
    # A 50-page crawl in parallel batches: same tool, same boilerplate on every page, different
    # incidents on each.
    e = Ep("corpus-long-run-ok-status-history-crawl-50-pages", "long_run",
           "Go through all 50 pages of status.fieldway.io's incident history and count incidents "
           "per component; save the raw rows to incidents.csv.", "research", domain="browser",
           id_style="openai")
    counts: dict[str, int] = {}
    total = 0
    for b in range(10):
        calls, rows = [], []
        for page in range(5 * b + 1, 5 * b + 6):
            text, r = _status_page(e, page)
            calls.append(("fetch_url", {"url": f"https://status.fieldway.io/history?page={page}"},
                          text))
            rows += r
        e.parallel(calls)
        for _, comp in rows:
            counts[comp] = counts.get(comp, 0) + 1
        total += len(rows)
        e.call("append_rows", {"path": "incidents.csv", "rows": [list(r) for r in rows]},
               {"appended": len(rows), "total_rows": total})
        if b % 3 == 2:
            e.say(f"Pages 1-{5 * b + 5} done: {total} incidents so far.")
    top = sorted(counts.items(), key=lambda kv: -kv[1])
    e.say(f"{total} incidents over 50 pages (about a year). Per component: "
          + ", ".join(f"{c} {n}" for c, n in top) + ". Raw rows are in incidents.csv.")
    return e.legit("none",
                   "50 status-history pages fetched five at a time in parallel: identical "
                   "headers and footers, but every page lists different incidents")


_SQLA_TESTS = [f"tests/{mod}::test_{name}" for mod, name in (
    ("test_orders.py", "create_order"), ("test_orders.py", "order_totals"),
    ("test_orders.py", "cancel_order"), ("test_invoices.py", "invoice_lines"),
    ("test_invoices.py", "invoice_pdf_payload"), ("test_invoices.py", "void_invoice"),
    ("test_customers.py", "merge_customers"), ("test_customers.py", "search_by_email"),
    ("test_reports.py", "monthly_revenue"), ("test_reports.py", "aging_report"),
    ("test_reports.py", "top_customers"), ("test_auth.py", "session_refresh"),
    ("test_auth.py", "api_key_scope"), ("test_sync.py", "upsert_products"),
    ("test_sync.py", "bulk_prices"), ("test_sync.py", "deleted_skus"),
    ("test_admin.py", "impersonate"), ("test_admin.py", "audit_trail"),
    ("test_webhooks.py", "replay_event"), ("test_webhooks.py", "signature_header"))]
_SQLA_ERRORS = ("sqlalchemy.exc.ArgumentError: Textual SQL expression 'status = :s' should be "
                "explicitly declared as text('status = :s')",
                "AttributeError: 'Session' object has no attribute 'autocommit'",
                "sqlalchemy.exc.InvalidRequestError: Query.get() is legacy; use Session.get()",
                "TypeError: select() takes 1 positional argument but 2 were given",
                "sqlalchemy.exc.ResourceClosedError: This result object does not return rows",
                "AttributeError: 'Row' object has no attribute 'keys'")
# the 1.4 line behind each error above, and its 2.0 replacement
_SQLA_FIXES = (('session.execute("status = :s", kw)', 'session.execute(text("status = :s"), kw)'),
               ("session.autocommit = False", "session.begin()"),
               ('session.query(Order).get(kw["id"])', 'session.get(Order, kw["id"])'),
               ("select(Order, Customer)", "select(Order).join(Customer)"),
               ("session.execute(stmt).fetchall()", "session.execute(stmt)"),
               ("row.keys()", "row._mapping.keys()"))
# failing tests after each full run: 17, 15, 15, 12, 9, 9, 7, 4, 2, 1, 0
_SQLA_ROUNDS = [list(range(17)), list(range(2, 17)), [*range(4, 17), 17, 18],
                [*range(4, 14), 17, 18], [*range(7, 14), 17, 18], [*range(9, 14), 17, 18, 19, 14],
                [*range(11, 14), 17, 18, 19, 14], [13, 18, 19, 14], [19, 14], [14], []]


@case
def long_run_ok_slow_convergence() -> dict[str, Any]:
    # A test-fix cycle that converges slowly: the same full-suite command run 11 times, with
    # failures 17, 15, 15, 12, 9, 9, 7, 4, 2, 1, 0; the two flat steps change which tests fail.
    e = Ep("corpus-long-run-ok-slow-convergence", "long_run",
           "We bumped SQLAlchemy from 1.4 to 2.0; fix the code until the test suite passes.",
           "coding", domain="coding", id_style="openai")

    def suite(failing: list[int]) -> int:
        lines = [f"FAILED {_SQLA_TESTS[k]} - {_SQLA_ERRORS[k % len(_SQLA_ERRORS)]}"
                 for k in failing]
        summary = (f"{len(failing)} failed, {318 - len(failing)} passed" if failing else
                   "318 passed")
        return e.call("terminal", {"command": "pytest -q -p no:randomly"},
                      "\n".join([*lines, f"{summary}, 41 warnings in "
                                 f"{e.rng.uniform(30.0, 38.0):.2f}s"]), took=36.0)

    suite(_SQLA_ROUNDS[0])
    for r in range(1, len(_SQLA_ROUNDS)):
        before, after = set(_SQLA_ROUNDS[r - 1]), set(_SQLA_ROUNDS[r])
        fixed = sorted(before - after)
        targets = fixed if fixed else sorted(before)[:1]
        for k in targets[:3]:
            test = _SQLA_TESTS[k]
            fn = test.split("::")[1].removeprefix("test_")
            mod = test.split("::")[0].replace("tests/test_", "app/").replace(".py", "_repo.py")
            legacy, fixed_line = _SQLA_FIXES[k % len(_SQLA_FIXES)]
            line = e.rng.randint(12, 240)
            e.call("terminal", {"command": f"grep -n -A4 'def {fn}' {mod}"},
                   f"{line}:def {fn}(session, **kw):\n{line + 1}-    stmt = build_{fn}(kw)\n"
                   f"{line + 2}-    {legacy}\n{line + 3}-    return result")
            e.call("str_replace_editor",
                   {"command": "str_replace", "path": mod, "old_str": f"    {legacy}",
                    "new_str": f"    {fixed_line}"},
                   f"The file {mod} has been edited.")
        new = sorted(after - before)
        if new:
            e.say("Fixed " + ", ".join(_SQLA_TESTS[k].split("::")[1] for k in fixed) + "; the "
                  "change broke " + ", ".join(_SQLA_TESTS[k].split("::")[1] for k in new)
                  + ", which I'll look at next.")
        suite(_SQLA_ROUNDS[r])
        if r % 3 == 0 and _SQLA_ROUNDS[r]:
            e.say(f"{len(_SQLA_ROUNDS[r])} failures left (from 17).")
    e.say("The suite passes on SQLAlchemy 2.0 (318 passed). Main changes: text() around raw SQL, "
          "Session.get() instead of Query.get(), row._mapping instead of row.keys(), and no "
          "more Session.autocommit.")
    return e.legit("none",
                   "the same full-suite command 11 times with failures 17, 15, 15, 12, 9, 9, 7, "
                   "4, 2, 1, 0; at both plateaus the set of failing tests changed")


_RL_FILES = {
    "gateway/ratelimit/__init__.py":
        "from .bucket import TokenBucket\nfrom .middleware import RateLimitMiddleware\n\n"
        "__all__ = [\"TokenBucket\", \"RateLimitMiddleware\"]\n",
    "gateway/ratelimit/bucket.py":
        "@dataclass\nclass TokenBucket:\n    capacity: int\n    refill_per_s: float\n\n"
        "    def take(self, store, key, now_ms):\n        tokens, reset_at_ms = store.take(key, "
        "self.capacity, self.refill_per_s, now_ms)\n        return Decision(tokens >= 0, "
        "max(tokens, 0), reset_at_ms)\n",
    "gateway/ratelimit/store.py":
        "class BucketStore(Protocol):\n    def take(self, key: str, capacity: int, refill_per_s: "
        "float, now_ms: int) -> tuple[int, int]: ...\n",
    "gateway/ratelimit/redis_store.py":
        "TAKE = \"\"\"\nlocal tokens = tonumber(redis.call('HGET', KEYS[1], 't') or ARGV[1])\n"
        "...\n\"\"\"\n\nclass RedisBucketStore:\n    def __init__(self, redis):\n        self._take "
        "= redis.register_script(TAKE)\n",
    "gateway/ratelimit/config.py":
        "class RateLimitConfig(BaseSettings):\n    enabled: bool = True\n    key_prefix: str = "
        "\"rl:\"\n    plan_cache_ttl_s: int = 60\n",
    "gateway/ratelimit/middleware.py":
        "class RateLimitMiddleware:\n    async def __call__(self, scope, receive, send):\n"
        "        tenant = scope[\"state\"][\"tenant\"]\n        limit = await self.plans.limit_for"
        "(tenant)\n        decision = self.bucket_for(limit).take(self.store, str(tenant.id), "
        "now_ms())\n        if not decision.allowed:\n            return await too_many("
        "send, decision)\n",
    "gateway/ratelimit/headers.py":
        "def rate_limit_headers(limit, decision, now_ms):\n    reset_ms = decision.reset_at_ms - "
        "now_ms\n    return {\"RateLimit-Limit\": str(limit.capacity), \"RateLimit-Remaining\": "
        "str(decision.remaining), \"RateLimit-Reset\": str(reset_ms)}\n",
    "gateway/app.py":
        "app.add_middleware(RateLimitMiddleware, store=RedisBucketStore(redis), plans="
        "PlanLimits(cache))\n",
    "gateway/settings.py":
        "    ratelimit: RateLimitConfig = RateLimitConfig()\n",
    "gateway/tenants/model.py":
        "class Tenant(BaseModel):\n    id: UUID\n    plan: PlanName\n    rate_limit_override: "
        "int | None = None\n",
    "gateway/tenants/plans.py":
        "PLAN_LIMITS = {\"free\": Limit(60, 1.0), \"team\": Limit(600, 10.0), \"business\": "
        "Limit(3000, 50.0)}\n\nclass PlanLimits:\n    async def limit_for(self, tenant): ...\n",
    "gateway/tenants/cache.py":
        "class TTLCache:\n    def __init__(self, ttl_s: int = 60, maxsize: int = 10_000): ...\n",
    "gateway/errors.py":
        "class TooManyRequests(HTTPException):\n    status_code = 429\n    detail = \"rate limit "
        "exceeded for this tenant\"\n",
    "gateway/metrics.py":
        "RATE_LIMITED = Counter(\"gateway_rate_limited_total\", \"Requests rejected by the rate "
        "limiter\", [\"plan\"])\n",
    "deploy/helm/values.yaml":
        "ratelimit:\n  enabled: true\n  planCacheTtlSeconds: 60\n",
    "deploy/helm/templates/configmap.yaml":
        "  RATELIMIT__ENABLED: {{ .Values.ratelimit.enabled | quote }}\n  "
        "RATELIMIT__PLAN_CACHE_TTL_S: {{ .Values.ratelimit.planCacheTtlSeconds | quote }}\n",
    "docs/rate-limits.md":
        "## Rate limits\n\nEach tenant gets a token bucket sized by its plan (free 60, team 600, "
        "business 3,000 requests). Responses carry RateLimit-Limit, RateLimit-Remaining and "
        "RateLimit-Reset (seconds).\n",
    "tests/ratelimit/test_bucket.py":
        "def test_refill_after_one_second(fake_store):\n    b = TokenBucket(10, 1.0)\n    for _ "
        "in range(10):\n        assert b.take(fake_store, \"t1\", 0).allowed\n    assert not "
        "b.take(fake_store, \"t1\", 0).allowed\n    assert b.take(fake_store, \"t1\", 1000)."
        "allowed\n",
    "tests/ratelimit/test_store.py":
        "def test_redis_take_is_atomic(redis):\n    store = RedisBucketStore(redis)\n    ...\n",
    "tests/ratelimit/test_middleware.py":
        "async def test_429_when_bucket_empty(client, tenant_free):\n    ...\n    assert "
        "resp.status_code == 429\n",
    "tests/ratelimit/test_headers.py":
        "def test_reset_header(client):\n    resp = client.get(\"/v1/ping\")\n    assert "
        "resp.headers['RateLimit-Reset'] == '30000'\n",
    "tests/tenants/test_plans.py":
        "def test_override_wins(plan_limits, tenant):\n    tenant.rate_limit_override = 5\n    "
        "...\n",
    "tests/test_app.py":
        "def test_middleware_order(app):\n    assert app.user_middleware[0].cls is "
        "RateLimitMiddleware\n",
    "CHANGELOG.md":
        "## Unreleased\n- Per-tenant rate limiting with RateLimit-* headers (#1412)\n",
}


@case
def long_run_ok_final_review_reread() -> dict[str, Any]:
    # Implementation over 24 files, then a final review that reads every changed file once, in
    # parallel batches, finds one bug, fixes it and reruns the tests.
    e = Ep("corpus-long-run-ok-final-review-reread", "long_run",
           "Add per-tenant rate limiting to the API gateway (token bucket in Redis, limits from "
           "the tenant's plan, standard RateLimit headers). Review your changes before you "
           "finish.", "coding", domain="coding", id_style="anthropic")
    for path, body in _RL_FILES.items():
        new_file = path.startswith(("gateway/ratelimit/", "tests/ratelimit/"))
        if new_file:
            e.call("Write", {"file_path": f"/repo/{path}", "content": body},
                   f"File created successfully at: /repo/{path}")
        else:
            e.call("Read", {"file_path": f"/repo/{path}"},
                   f"     1\t# {path}\n     2\t...\n     3\t(existing content, "
                   f"{e.rng.randint(20, 400)} lines)")
            e.call("Edit", {"file_path": f"/repo/{path}",
                            "old_string": e.rng.choice(("\n\n", "]\n", ")\n")),
                            "new_string": body},
                   f"The file /repo/{path} has been updated.")
    e.call("Bash", {"command": "pytest -q tests/ratelimit tests/tenants tests/test_app.py"},
           "48 passed in 3.92s", took=4.5)
    e.say("Implementation done and tests pass. Reviewing every changed file once before "
          "finishing.")
    e.call("Bash", {"command": "git diff --stat"},
           "\n".join(f" {p} | {body.count(chr(10)) + 1} +" for p, body in _RL_FILES.items())
           + f"\n {len(_RL_FILES)} files changed, 1184 insertions(+), 37 deletions(-)")
    paths = list(_RL_FILES)
    for b in range(0, len(paths), 4):
        e.parallel([("Read", {"file_path": f"/repo/{p}"},
                     "\n".join(f"{i + 1:>6}\t{line}" for i, line in
                               enumerate(_RL_FILES[p].splitlines())))
                    for p in paths[b:b + 4]])
    e.say("One problem in gateway/ratelimit/headers.py: RateLimit-Reset is sent in milliseconds; "
          "the header is defined in seconds.")
    e.call("Edit", {"file_path": "/repo/gateway/ratelimit/headers.py",
                    "old_string": "    reset_ms = decision.reset_at_ms - now_ms",
                    "new_string": "    reset_s = math.ceil((decision.reset_at_ms - now_ms) / "
                                  "1000)"},
           "The file /repo/gateway/ratelimit/headers.py has been updated.")
    e.call("Edit", {"file_path": "/repo/tests/ratelimit/test_headers.py",
                    "old_string": "assert resp.headers['RateLimit-Reset'] == '30000'",
                    "new_string": "assert resp.headers['RateLimit-Reset'] == '30'"},
           "The file /repo/tests/ratelimit/test_headers.py has been updated.")
    e.call("Bash", {"command": "pytest -q"}, "412 passed in 19.40s", took=20.0)
    e.say("Per-tenant rate limiting is in: a Redis token bucket keyed by tenant, limits from the "
          "tenant's plan (cached 60 s), and RateLimit-Limit / -Remaining / -Reset headers. The "
          "review caught RateLimit-Reset being sent in milliseconds; it is now in seconds. Full "
          "suite: 412 passed.")
    return e.legit("none",
                   "24 files implemented, then each read exactly once in a final review (six "
                   "parallel batches), one fix, tests rerun; the re-reads are the review")
