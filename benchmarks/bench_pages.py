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
Streamlit's start, and every page its first reads), then again, each in a new context. The
Import page reads nothing: it is the floor, what Streamlit and the sidebar cost.

Run:  git worktree add --detach /tmp/base 5954975
      .venv/bin/python benchmarks/bench_pages.py --before /tmp/base [--calls 1000000]
          [--stores DIR]
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
def dashboard(checkout: Path, store: Path) -> Iterator[tuple[str, str]]:
    """A collector on ``store`` and a dashboard reading it, both from ``checkout``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPSCOPE_"))}
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


def build_stores(folder: Path, calls: int, per_shape: int) -> dict[str, Path]:
    """The demo's store and one of ``calls`` tool calls in ``folder``; stores already there
    (``--stores``, from an earlier run with the same arguments) are used as they are."""
    from bench_metrics import build_store
    from demo_store import build_demo_store, demo_spans

    demo, big = folder / f"demo-{per_shape}.duckdb", folder / f"calls-{calls}.duckdb"
    start = time.perf_counter()
    if not demo.exists():
        build_demo_store(demo, demo_spans(per_shape=per_shape))
        print(f"built the demo's store in {time.perf_counter() - start:.1f} s",
              file=sys.stderr)
    start = time.perf_counter()
    if not big.exists():
        build_store(big, calls)
        print(f"built a store of {calls:,} tool calls in {time.perf_counter() - start:.1f} s",
              file=sys.stderr)
    return {"demo": demo, f"{calls:,} calls": big}


def _seconds(value: float | None) -> str:
    return f">{TIMEOUT_S:.0f} s" if value is None else f"{value:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True,
                        help="a checkout of the code to compare with (the base commit)")
    parser.add_argument("--after", type=Path, default=ROOT,
                        help="the checkout measured after (default: this one)")
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--per-shape", type=int, default=8,
                        help="demo scripts per scenario shape (each in observe and enforce)")
    parser.add_argument("--stores", type=Path,
                        help="keep the stores in this folder and use them again next time")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        folder = args.stores or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        stores = build_stores(folder, args.calls, args.per_shape)
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        results: dict[tuple[str, str, int], dict[str, float | None]] = {}
        for store_name, store in stores.items():
            for label, checkout in (("before", args.before.resolve()),
                                    ("after", args.after.resolve())):
                with dashboard(checkout, store) as (collector, base):
                    episode = flagged_run(collector)
                    for visit in (1, 2):
                        print(f"{store_name}, {label}, visit {visit}:", file=sys.stderr)
                        results[store_name, label, visit] = time_pages(browser, base, episode)
        browser.close()
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    for store_name in stores:
        print(f"\n{store_name}: seconds to content, a fresh browser context per page")
        print("| page | first visit: before | after | after / before "
              "| again: before | after | after / before |\n| --- | --- | --- | --- | --- "
              "| --- | --- |")
        for page in PAGES:
            cells = []
            for visit in (1, 2):
                was = results[store_name, "before", visit][page]
                now = results[store_name, "after", visit][page]
                ratio = f"{now / was:.2f}" if was and now else "—"
                cells += [_seconds(was), _seconds(now), ratio]
            print(f"| {page} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
