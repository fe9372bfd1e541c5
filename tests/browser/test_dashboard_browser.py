"""The whole system as a user starts it: ``loopscope up --demo``, looked at in headless
Chromium. Screenshots are kept under ``artifacts/browser/`` for people to look at."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
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

pytestmark = pytest.mark.timeout(600)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium; installed with apt-get when absent (the test command's job)."""
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env,
                       timeout=900)
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
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_up_demo_renders_overview_and_episode_pages(system: dict, chromium: str) -> None:
    """The overview shows metric cards and no error box; an episode deep link shows its
    timeline; Ctrl-C on ``up`` leaves no child process behind."""
    from playwright.sync_api import sync_playwright

    flagged = wait_for(lambda: get_json(system["collector"] + "/v1/reads/recent_detections")
                       ["rows"])
    episode_id = flagged[0]["episode_id"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1100})
            page.goto(system["dashboard"] + "/", wait_until="domcontentloaded")
            page.wait_for_selector('[data-testid="stMetric"]', timeout=90_000)
            page.wait_for_timeout(3000)  # let the charts draw before the screenshot
            page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0
            assert page.locator('[data-testid="stMetric"]').count() >= 4

            page.goto(f"{system['dashboard']}/episode?episode={episode_id}",
                      wait_until="domcontentloaded")
            page.wait_for_selector(".js-plotly-plot", timeout=90_000)
            page.wait_for_timeout(2000)
            page.screenshot(path=str(ARTIFACTS / "episode.png"), full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0
            assert episode_id in page.content()
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
