"""How long each dashboard page takes to show its content in a browser, before and after.

Builds two stores: the demo's (the demo's scripted agents driven through the real SDK, content
captured, stored by the collector's pipeline: ``tests/dashboard/demo_store.py``) and one of
1,000,000 tool calls (``bench_metrics.build_store``, SQL in seconds). For each checkout (this
one, and ``--before``, e.g. a detached worktree of the base commit) and each store it starts
``loopscope collector --db STORE`` and ``loopscope dashboard --collector URL`` from that
checkout, idle (no agent sending), and opens every page in headless Chromium, each in a fresh
browser context (a new session, as a copied URL opened in a fresh browser): the time from the
navigation to the page's content (``PAGES``: the page's last section, or its numbers) is
printed per page, with after / before. Nothing is asserted. The pages are opened in ``PAGES``
order twice: first visits (the first page opened after the dashboard starts also pays
Streamlit's start, and every page its first reads), then again, each in a new context; with
``--restarted``, once more after the dashboard restarted (the Policy page's replays it kept
stay: each checkout and store starts with none). The Import page reads nothing: it is the
floor, what Streamlit and the sidebar cost.

Each round of visits prints the load average as it starts: on a shared machine the times are
only as good as the load beside them.

Run:  .venv/bin/python benchmarks/bench_pages.py [--stores DIR] [--visits 3]
      (this checkout alone: seconds per page for both stores)
      git worktree add --detach /tmp/base 5954975
      .venv/bin/python benchmarks/bench_pages.py --before /tmp/base [--calls 1000000]
          [--stores DIR]   (and the ratios against another checkout)
      .venv/bin/python benchmarks/bench_pages.py --before /tmp/base --reads 5 [--stores DIR]
          (no browser: the pages' slow reads, both checkouts' SQL alternating, rows compared)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "dashboard"))

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-dev-shm-usage"]
TIMEOUT_S = 120.0

_TEXT = "document.querySelector('[data-testid=\"stMain\"]')?.innerText.includes({!r})"
_TABLE = "!!document.querySelector('[data-testid=\"stMain\"] [data-testid=\"stDataFrame\"]')"
_NUMBERS = "document.querySelectorAll('[data-testid=\"stMetricValue\"]').length >= {}"
PAGES: dict[str, tuple[str, str]] = {
    "overview": ("/", f"{_NUMBERS.format(4)} && {_TABLE}"),
    "runs": ("/runs", _TABLE),
    "runs (copied URL)": ("/runs?verdict=flagged&sort=tool+calls&page=2", _TABLE),
    "episode": ("/episode?episode={episode}", _TEXT.format("How the run ended")),
    "alerts": ("/alerts", f"{_TEXT.format('Around each alert')} || "
               f"{_TEXT.format('No alerts yet')}"),
    "loops": ("/loops", _TEXT.format("Cost spent in loops") + f" && {_TABLE}"),
    "spans": ("/spans", f"{_TEXT.format('Latency by tool')} || {_TEXT.format('No span')}"),
    "labels": ("/labels", _TEXT.format("Labels so far")),
    "import": ("/importer", _TEXT.format("Choose a file")),
    "policy": ("/policy", f"{_TEXT.format('Current vs candidate')} && {_NUMBERS.format(6)}"),
}
"""Each page's path and the JavaScript condition that says its content is on screen."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                response.read()
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@contextmanager
def dashboard(checkout: Path, store: Path, kept: Path) -> Iterator[tuple[str, str]]:
    """A collector on ``store`` and a dashboard reading it, both from ``checkout``; the
    dashboard keeps the Policy page's replays in ``kept`` (``$LOOPSCOPE_REPLAY_CACHE``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPSCOPE_"))}
    env["LOOPSCOPE_REPLAY_CACHE"] = str(kept)
    env["PYTHONPATH"] = os.pathsep.join(
        str(checkout / part) for part in ("instrumentation", "collector", "dashboard"))
    http, port = free_port(), free_port()
    collector = subprocess.Popen(
        [sys.executable, "-m", "loopscope", "collector", "--db", str(store), "--http-port",
         str(http), "--grpc-port", "0"], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    procs = [collector]
    try:
        url = f"http://127.0.0.1:{http}"
        _wait(url + "/healthz")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "loopscope", "dashboard", "--collector", url, "--port",
             str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait(f"http://127.0.0.1:{port}/_stcore/health")
        yield url, f"http://127.0.0.1:{port}"
    finally:
        for proc in reversed(procs):
            _stop(proc)


def flagged_run(collector: str) -> str:
    """A flagged run's id (the Episode page opened): the newest."""
    query = urllib.parse.urlencode({"verdict": "flagged", "limit": 1})
    with urllib.request.urlopen(f"{collector}/v1/reads/run_list?{query}", timeout=60) as r:
        return str(json.loads(r.read())["rows"][0]["episode_id"])


def time_pages(browser: Any, base: str, episode: str) -> dict[str, float | None]:
    """Seconds from navigation to content for each page, each in a fresh context (None: not
    within ``TIMEOUT_S``, or an exception box)."""
    times: dict[str, float | None] = {}
    for name, (path, ready) in PAGES.items():
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        url = base + path.format(episode=urllib.parse.quote(episode, safe=""))
        start = time.perf_counter()
        try:
            page.goto(url, wait_until="commit")
            page.wait_for_function(f"() => {ready}", timeout=TIMEOUT_S * 1000, polling=100)
            times[name] = time.perf_counter() - start
        except Exception:  # playwright's TimeoutError: not within the timeout
            times[name] = None
        if page.locator('[data-testid="stException"]').count():
            times[name] = None
        print(f"  {name}: {_seconds(times[name])}", file=sys.stderr, flush=True)
        context.close()
    return times


_BUILD = """
import sys
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[2]]
if sys.argv[3] == "demo":
    from demo_store import build_demo_store, demo_spans
    build_demo_store(Path(sys.argv[4]), demo_spans(per_shape=int(sys.argv[5])))
else:
    from bench_metrics import build_store
    build_store(Path(sys.argv[4]), int(sys.argv[5]))
"""


def build_stores(folder: Path, calls: int, per_shape: int, code: Path) -> dict[str, Path]:
    """The demo's store and one of ``calls`` tool calls (with their spans) in ``folder``,
    each built by the collector of the checkout ``code`` (the oldest measured: a newer one
    migrates its copy when it opens it; an older one cannot open a newer store); stores
    already there (``--stores``, from an earlier run with the same arguments) are used as
    they are."""
    demo, big = folder / f"demo-{per_shape}.duckdb", folder / f"calls-{calls}-spans.duckdb"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        str(code / part) for part in ("instrumentation", "collector", "dashboard")))
    for kind, path, size, what in (("demo", demo, per_shape, "the demo's store"),
                                   ("calls", big, calls, f"a store of {calls:,} tool calls")):
        if path.exists():
            continue
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", _BUILD, str(Path(__file__).resolve().parent),
                        str(ROOT / "tests" / "dashboard"), kind, str(path), str(size)],
                       env=env, check=True)
        print(f"built {what} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return {"demo": demo, f"{calls:,} calls": big}


_TOOL_IS = json.dumps([{"field": "gen_ai.tool.name", "op": "==", "text": "tool3", "number": None}])
"""The Spans page's filter over an attribute: ``gen_ai.tool.name == tool3``."""
_CALLS_TOOL = json.dumps([{"field": "tool", "op": "==", "text": "tool3", "number": None}])
"""The Spans filter over the tool a call ran (``tool == tool3``: the calls' table is joined)."""
_SLOW = json.dumps([{"field": "duration", "op": ">", "text": None, "number": 200}])
"""The Spans filter over a span's own column: ``duration > 200ms``."""
PAGE_READS: list[tuple[str, str, dict[str, Any]]] = [
    ("every page (sidebar)", "filter_options", {}),
    ("overview, loops, labels", "metrics_breakdown", {}),
    ("overview", "no_progress_rate", {"bucket_s": 60, "points": 300}),
    ("overview", "episode_list", {"flagged": True, "limit": 50}),
    ("runs", "run_list", {"limit": 50, "offset": 0, "sort": "newest", "stale_s": 300}),
    ("loops", "looping_signatures", {}),
    ("loops", "loops_by_tool", {}),
    ("labels", "episode_list", {"flagged": True, "limit": 200}),
    ("policy", "replay_calls", {"limit": 2000}),
    ("spans", "span_list", {"limit": 200}),
    ("spans", "span_latency", {}),
    ("spans, filtered", "span_list", {"limit": 200, "where": _TOOL_IS}),
    ("spans, filtered", "span_latency", {"where": _TOOL_IS}),
    ("spans, tool ==", "span_list", {"limit": 200, "where": _CALLS_TOOL}),
    ("spans, tool ==", "span_latency", {"where": _CALLS_TOOL}),
    ("spans, duration >", "span_list", {"limit": 200, "where": _SLOW}),
    ("spans, duration >", "span_latency", {"where": _SLOW}),
    ("spans, sidebar tool", "span_list", {"limit": 200, "tool": "tool3"}),
    ("spans, sidebar tool", "span_latency", {"tool": "tool3"}),
]
"""The slow reads behind the pages, as each page asks for them (a parameter a checkout's read
does not take is left out: what its page asked)."""

_TIME_READS = """
import hashlib, json, sys, time
from loopscope_collector.reads import READS, run_read
from loopscope_collector.storage import open_database
db = open_database(sys.argv[1])  # a copy of the store, migrated to this checkout's schema
out = []
for page, name, params in json.loads(sys.argv[2]):
    read = READS[name]
    given = {k: v for k, v in params.items() if k in read.params}
    cur = db.cursor()
    run_read(cur, name, given)  # once before: a page's read runs in a warm process
    start = time.perf_counter()
    rows = run_read(cur, name, given)
    seconds = time.perf_counter() - start
    cur.close()
    # floats to 9 places (sums add up in any order); a run's kinds are string_agg's, in any
    # order too
    text = json.dumps([{k: round(v, 9) if isinstance(v, float) else
                        ", ".join(sorted(v.split(", "))) if k == "kinds" and v else v
                        for k, v in r.items() if k != "bucket_s"} for r in rows],
                      sort_keys=True, default=str)
    out.append([seconds, len(rows), hashlib.sha256(text.encode()).hexdigest()[:12]])
print(json.dumps(out))
"""


def time_reads(checkouts: dict[str, Path], stores: dict[str, Path], rounds: int) -> None:
    """Each checkout's SQL for ``PAGE_READS`` on each store, the checkouts alternating round
    by round (each round a fresh process, each read timed on its second run); prints the
    median seconds, the ratio, and whether the rows are the same in every round (the numbers
    on the page do not change; a read whose rows come in a different order from one run to
    the next says no too)."""
    for store_name, store in stores.items():
        times: dict[str, list[list[Any]]] = {label: [] for label in checkouts}
        loads = []
        with tempfile.TemporaryDirectory() as tmp:
            copies = {label: Path(tmp) / f"{label}-{store.name}" for label in checkouts}
            for copy in copies.values():
                shutil.copy(store, copy)
            for _ in range(rounds):
                loads.append(os.getloadavg()[0])
                for label, checkout in checkouts.items():
                    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                        str(checkout / part) for part in ("instrumentation", "collector")))
                    answer = subprocess.run(
                        [sys.executable, "-c", _TIME_READS, str(copies[label]),
                         json.dumps(PAGE_READS)],
                        env=env, check=True, capture_output=True, text=True)
                    # (the last line: a migration above it may print a progress bar)
                    times[label].append(json.loads(answer.stdout.strip().splitlines()[-1]))
        print(f"\n{store_name}: median seconds of {rounds} rounds (load average "
              f"{min(loads):.1f}–{max(loads):.1f})")
        labels = list(checkouts)
        ratio = " | after / before | same rows" if len(labels) == 2 else ""
        print("| page | read | " + " | ".join(labels) + ratio + " |\n|"
              + " --- |" * (2 + len(labels) + (2 if ratio else 0)))
        for i, (page, name, _params) in enumerate(PAGE_READS):
            medians = [sorted(r[i][0] for r in times[label])[rounds // 2] for label in labels]
            cells = [f"{m:.2f} s" for m in medians]
            if ratio:
                same = len({r[i][2] for label in labels for r in times[label]}) == 1
                cells += [f"{medians[1] / medians[0]:.2f}", "yes" if same else "no"]
            print(f"| {page} | {name} | " + " | ".join(cells) + " |")


def _round(visit: int, visits: int) -> str:
    """A round's name: the first visits, again, or after the dashboard restarted."""
    return "first" if visit == 1 else "restarted" if visit > visits else f"again ({visit})"


def _seconds(value: float | None) -> str:
    return f">{TIMEOUT_S:.0f} s" if value is None else f"{value:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path,
                        help="a checkout of the code to compare with (the base commit); "
                             "without it, only this checkout is measured")
    parser.add_argument("--after", type=Path, default=ROOT,
                        help="the checkout measured after (default: this one)")
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--per-shape", type=int, default=8,
                        help="demo scripts per scenario shape (each in observe and enforce)")
    parser.add_argument("--stores", type=Path,
                        help="keep the stores in this folder and use them again next time")
    parser.add_argument("--visits", type=int, default=2,
                        help="rounds over every page per dashboard (the first pays the start)")
    parser.add_argument("--restarted", action="store_true",
                        help="then restart each dashboard (the Policy page's kept replays "
                             "stay) and open every page once more")
    parser.add_argument("--only", choices=("demo", "calls"),
                        help="measure one store only")
    parser.add_argument("--reads", type=int, metavar="ROUNDS",
                        help="time the pages' slow reads (PAGE_READS) this many rounds "
                             "instead of the pages in a browser")
    args = parser.parse_args()
    checkouts = {"after": args.after.resolve()}
    if args.before is not None:
        checkouts = {"before": args.before.resolve(), **checkouts}
    if args.reads:
        with tempfile.TemporaryDirectory() as tmp:
            folder = args.stores or Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            stores = build_stores(folder, args.calls, args.per_shape,
                                   (args.before or args.after).resolve())
            if args.only:
                stores = {k: v for k, v in stores.items()
                          if (k == "demo") == (args.only == "demo")}
            time_reads(checkouts, stores, args.reads)
        return
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        folder = args.stores or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        stores = build_stores(folder, args.calls, args.per_shape,
                                   (args.before or args.after).resolve())
        if args.only:
            stores = {k: v for k, v in stores.items() if (k == "demo") == (args.only == "demo")}
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        results: dict[tuple[str, str, int], dict[str, float | None]] = {}
        loads: dict[tuple[str, str, int], float] = {}
        rounds = args.visits + (1 if args.restarted else 0)
        for store_name, store in stores.items():
            for label, checkout in checkouts.items():
                kept = Path(tempfile.mkdtemp(prefix="kept-replays-", dir=tmp))  # none yet
                # each checkout opens a copy (one that migrates it leaves the stores as built)
                copy = Path(tmp) / f"{label}-{store.name}"
                shutil.copy(store, copy)
                # the dashboard's start, then (--restarted) its restart
                for started in (range(1, args.visits + 1), range(args.visits + 1, rounds + 1)):
                    if not started:
                        continue
                    with dashboard(checkout, copy, kept) as (collector, base):
                        episode = flagged_run(collector)
                        for visit in started:
                            loads[store_name, label, visit] = os.getloadavg()[0]
                            print(f"{store_name}, {label}, {_round(visit, args.visits)} (load "
                                  f"average {loads[store_name, label, visit]:.2f}):",
                                  file=sys.stderr)
                            results[store_name, label, visit] = time_pages(browser, base,
                                                                           episode)
                copy.unlink()
        browser.close()
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    visits = range(1, rounds + 1)
    for store_name in stores:
        print(f"\n{store_name}: seconds to content, a fresh browser context per page")
        heads = [f"{label} {_round(v, args.visits)}" for v in visits for label in checkouts]
        if args.before is not None:
            heads = [h for v in visits for h in (f"before {_round(v, args.visits)}",
                                                 f"after {_round(v, args.visits)}",
                                                 "after / before")]
        print("| page | " + " | ".join(heads) + " |\n|" + " --- |" * (len(heads) + 1))
        for page in [*PAGES, "load average"]:
            cells = []
            for visit in visits:
                for label in checkouts:
                    key = store_name, label, visit
                    cells.append(f"{loads[key]:.1f}" if page == "load average"
                                 else _seconds(results[key][page]))
                if args.before is not None:
                    was = results[store_name, "before", visit].get(page)
                    now = results[store_name, "after", visit].get(page)
                    cells.append(f"{now / was:.2f}" if was and now else "—")
            print(f"| {page} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
