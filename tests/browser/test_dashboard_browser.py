"""The whole system as a user starts it: ``loopscope up --demo``, looked at in headless
Chromium. A screenshot of every page is kept under ``artifacts/browser/`` (the test run's
output folder) for people to look at."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-dev-shm-usage"]

pytestmark = pytest.mark.timeout(900)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium; installed with apt-get when absent (the test command's job), by one
    test process at a time (the other waits on the lock, then finds it installed)."""
    path = shutil.which("chromium") or "/usr/bin/chromium"
    with (Path(tempfile.gettempdir()) / "loopscope-tests-chromium.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not Path(path).exists():
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
            subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True,
                           env=env, timeout=900)
    return path


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def wait_for(check, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"not ready within {timeout} s")


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``: children, grandchildren, ... (from /proc)."""
    found, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        found += kids
        todo += kids
    return found


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _child(pid: int, part: str) -> int | None:
    """The child of ``loopscope up`` (``pid``) that runs ``loopscope PART``."""
    for kid in children(pid):
        try:
            argv = (Path("/proc") / str(kid) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if part.encode() in argv[:4]:
            return kid
    return None


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def system(tmp_path: Path) -> Iterator[dict]:
    http, dashboard = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "loopscope", "up", "--demo", "--db", str(tmp_path / "up.duckdb"),
         "--http-port", str(http), "--grpc-port", "0", "--dashboard-port", str(dashboard),
         "--demo-pace", "0.01"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    collector = f"http://127.0.0.1:{http}"
    try:
        wait_for(lambda: proc.poll() is None and get_json(collector + "/v1/reads/summary"))
        wait_for(lambda: urllib.request.urlopen(
            f"http://127.0.0.1:{dashboard}/_stcore/health", timeout=5).read())
        yield {"proc": proc, "collector": collector,
               "dashboard": f"http://127.0.0.1:{dashboard}"}
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """Ctrl-C, as a user stops it; killed when it has not ended within a minute."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


NEW_AGENT = textwrap.dedent("""
    import sys
    from opentelemetry import trace
    import loopscope

    loopscope.instrument(endpoint=sys.argv[1], service_name="new-agent-svc", mode="observe")

    @loopscope.tool(kind="read")
    def order_status(order: str) -> str:
        return f"order {order}: pending"

    with loopscope.episode(task="is order 7 shipped?", agent_name="new-agent",
                           episode_id="new-agent-run") as ep:
        for _ in range(8):
            order_status("7")
        ep.set_outcome("failure")
    trace.get_tracer_provider().force_flush()
""")
"""An agent the demo does not know, started while the Overview is open: it loops."""


def shown_numbers(page) -> list[str]:
    """The metric cards' values as a person sees them: those drawn at full strength (a value
    Streamlit greys out while it reruns is left out)."""
    return page.evaluate("""() => [...document.querySelectorAll(
        '[data-testid="stMetricValue"]')].filter(value => {
            const box = value.getBoundingClientRect();
            let opacity = 1;
            for (let e = value; e; e = e.parentElement) {
                opacity *= parseFloat(getComputedStyle(e).opacity);
            }
            return box.width > 0 && box.height > 0 && opacity >= 0.9;
        }).map(value => value.innerText.trim()).filter(text => text)""")


def flagged_csv(page) -> str:
    """The Overview's flagged table as its CSV button gives it (every row, not only the ones
    the grid has on screen)."""
    with page.expect_download(timeout=30_000) as got:
        page.locator(".st-key-download_flagged_csv button").click()
    return Path(got.value.path()).read_text(encoding="utf-8")


PAGES = {"overview": "/", "alerts": "/alerts", "loops": "/loops", "labels": "/labels",
         "import": "/importer", "policy": "/policy"}


def _open(page, url: str, ready: str, name: str, timeout: int = 90_000) -> str:
    """Load ``url``, wait for ``ready`` and the charts, screenshot it as ``name``.png, check
    there is no exception box; returns the page's text."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(ready, timeout=timeout)
    page.wait_for_timeout(2500)  # let the charts draw before the screenshot
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    assert page.locator('[data-testid="stException"]').count() == 0, name
    return page.locator('[data-testid="stMain"]').inner_text()


def test_up_demo_renders_every_page(system: dict, chromium: str) -> None:
    """Every page renders without an exception box (screenshots in artifacts/browser/); an
    observe-mode run with a would-be stop is not shown as stopped; an enforce-mode stop is;
    the Policy page replays the demo's runs and draws its sweep; a collector killed with
    SIGKILL is started again by ``up`` and the banner says so; Ctrl-C on ``up`` then leaves no
    child process behind."""
    from playwright.sync_api import sync_playwright

    def listed() -> list[dict]:
        rows = get_json(system["collector"] + "/v1/reads/episode_list?flagged=true")["rows"]
        observed = [r for r in rows if r["guard_mode"] == "observe"
                    and r["enforce_would"] == "stop" and r["happened"] != "stopped"]
        stopped = [r for r in rows if r["happened"] == "stopped"]
        return rows if observed and stopped else []

    rows = wait_for(listed)
    observed = next(r for r in rows if r["guard_mode"] == "observe"
                    and r["enforce_would"] == "stop" and r["happened"] != "stopped")
    stopped = next(r for r in rows if r["happened"] == "stopped")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    base = system["dashboard"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1100})
            text = _open(page, base + "/", '[data-testid="stMetric"]', "overview")
            assert page.locator('[data-testid="stMetric"]').count() >= 4
            assert "budget stop(s) beside it" in text
            # it refreshes in place while the demo runs: all four numbers in every screenshot
            for shot in range(1, 4):
                page.wait_for_timeout(1000)
                page.screenshot(path=str(ARTIFACTS / f"overview-{shot}s.png"))
                numbers = shown_numbers(page)
                assert len(numbers) == 4, (shot, numbers)
            assert "Newest flag first" in page.locator('[data-testid="stMain"]').inner_text()
            # a new agent's looping run shows up in the live table without a reload
            subprocess.run([sys.executable, "-c", NEW_AGENT, system["collector"]],
                           check=True, timeout=120)
            wait_for(lambda: "new-agent-run" in flagged_csv(page), timeout=60)
            for name in ("alerts", "loops", "labels", "import"):
                _open(page, base + PAGES[name], "h1", name)

            text = _open(page, f"{base}/episode?episode={observed['episode_id']}",
                         ".js-plotly-plot", "episode-observe")
            assert "Not stopped" in text and "would stop" in text
            assert "Stopped at call" not in text

            text = _open(page, f"{base}/episode?episode={stopped['episode_id']}",
                         ".js-plotly-plot", "episode")
            assert "Stopped" in text and stopped["episode_id"] in text

            text = _open(page, base + PAGES["policy"], '[data-testid="stMetric"]', "policy",
                         timeout=240_000)  # the demo's agents keep the CPUs busy meanwhile
            assert "Loops caught" in text and "Runs stopped" in text
            page.get_by_role("button", name="Run the sweep").click()
            page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=300_000)
            page.wait_for_timeout(2500)
            page.screenshot(path=str(ARTIFACTS / "policy-sweep.png"), full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0

            collector = _child(system["proc"].pid, "collector")
            os.kill(collector, signal.SIGKILL)
            wait_for(lambda: _child(system["proc"].pid, "collector") not in (None, collector)
                     and urllib.request.urlopen(system["collector"] + "/healthz",
                                                timeout=5).read())
            # the page left open (Policy) shows it by itself: the banner's watcher reads it
            banner = page.get_by_text("The collector was restarted")
            banner.wait_for(timeout=60_000)
            # a locator, not the element: the banner is drawn again each time the page reruns
            banner.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "collector-restarted.png"), full_page=True)
            text = page.locator('[data-testid="stMain"]').inner_text()
            assert "restarted once by loopscope up" in text and "killed by SIGKILL" in text
        finally:
            browser.close()

    proc = system["proc"]
    parts = descendants(proc.pid)
    assert len(children(proc.pid)) >= 3  # collector, dashboard, demo agents
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in parts) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in parts if alive(pid)], "loopscope up left processes behind"
