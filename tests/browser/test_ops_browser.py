"""Issue 18's operator pages in headless Chromium, on a live collector fed by the demo's
scripted agents through the real SDK: the Policy page's current policy is the one the guards
ran (not the library default), the labelling queue, the Alerts page. Each page's load time is
printed (not asserted); screenshots go to ``artifacts/browser/``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from glossary_words import glossary
from test_dashboard_browser import (  # noqa: F401  (chromium: a fixture)
    ARTIFACTS,
    CHROMIUM_FLAGS,
    _open,
    chromium,
    free_port,
    wait_for,
)

from loopscope.detect import Policy

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
GUARDS_POLICY = {"budgets": {"tool_calls": 40}, "no_progress_k": {"lookup": 5},
                 "repeat_threshold": 4}
"""What the agents' guards run: a budget and two thresholds away from the defaults."""

AGENTS = textwrap.dedent("""
    import json, sys
    import loopscope
    from loopscope.offline.demo import drive
    from loopscope.offline.scenarios import generate
    from opentelemetry import trace

    loopscope.instrument(service_name="ops-demo", endpoint=sys.argv[1],
                         policy=json.loads(sys.argv[2]))
    for mode in ("observe", "enforce"):
        for script in generate(seed=0, per_shape=1):
            drive(script, mode=mode, service="ops")
    trace.get_tracer_provider().force_flush()
""")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A collector, the demo's agents run once through it under ``GUARDS_POLICY``, and a
    dashboard reading the collector."""
    tmp = tmp_path_factory.mktemp("ops")
    http, dashboard = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPSCOPE_"))}
    env["LOOPSCOPE_REPLAY_CACHE"] = str(tmp / "kept-replays")  # no earlier run's replay
    collector = subprocess.Popen(
        [sys.executable, "-m", "loopscope", "collector", "--db", str(tmp / "ops.duckdb"),
         "--http-port", str(http), "--grpc-port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{http}"
    board = None
    try:
        wait_for(lambda: _get(url + "/healthz"))
        script = tmp / "ops_demo_agents.py"  # not agents.py: the OpenAI Agents SDK is "agents"
        script.write_text(AGENTS)
        done = subprocess.run([sys.executable, str(script), url, json.dumps(GUARDS_POLICY)],
                              capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        board = subprocess.Popen(
            [sys.executable, "-m", "loopscope", "dashboard", "--collector", url, "--port",
             str(dashboard)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_for(lambda: _get(f"http://127.0.0.1:{dashboard}/_stcore/health"))
        yield {"collector": url, "dashboard": f"http://127.0.0.1:{dashboard}"}
    finally:
        for proc in (board, collector):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


def _timed_open(page, url: str, ready: str, name: str, timeout: int = 240_000) -> str:
    started = time.monotonic()
    text = _open(page, url, ready, name, timeout=timeout)
    # the time to the page's ready element, less the fixed pause _open leaves for the charts
    print(f"page load: {name}: {time.monotonic() - started - 2.5:.2f} s")
    return text


def test_operator_pages_in_a_browser(live: dict[str, str],
                                     request: pytest.FixtureRequest) -> None:
    """The Policy page compares against the policy the guards recorded (the code block in
    "The current policy as JSON", once opened, is GUARDS_POLICY, and the candidate starts from
    it); the labelling queue
    lists unlabelled runs by task, agent and verdict; the Alerts page renders; every page
    keeps to docs/glossary.md and their headline numbers agree (issue 30)."""
    from playwright.sync_api import sync_playwright

    chromium_path = request.getfixturevalue("chromium")  # the shared fixture, imported above
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    base = live["dashboard"]
    texts: dict[str, str] = {}  # each page's text, for the numbers that must agree
    problems: list[str] = []  # words outside the glossary, None, cut buttons
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1100})
            text = texts["policy"] = _check_page(page, base + "/policy",
                                                 '[data-testid="stMetric"]', "ops-policy",
                                                 problems)
            assert "The policy the in-process guards recorded on" in text
            # the policy as JSON is drawn once its expander is opened (a click reruns the page)
            assert not page.locator('[data-testid="stCode"]').count()
            page.get_by_text("The current policy as JSON", exact=True).click()
            current = page.locator('[data-testid="stCode"]').first.inner_text()
            assert Policy.from_mapping(json.loads(current)) == Policy.from_mapping(
                GUARDS_POLICY)
            # the candidate's fields are drawn once their expander is opened; plain words on
            # them, and the candidate starts from the guards' values
            assert not page.get_by_role("spinbutton",
                                        name="Identical calls before a warning").count()
            page.get_by_text("The candidate policy's settings", exact=True).click()
            field = page.get_by_role("spinbutton", name="Identical calls before a warning")
            assert field.input_value() == "4"
            assert "repeat_threshold" not in page.locator("label").all_inner_texts()

            text = texts["labels"] = _check_page(page, base + "/labels",
                                                 '[data-testid="stSelectbox"]', "ops-labels",
                                                 problems)
            assert "have no label saved here yet; they come first" in text
            box = page.locator('[data-testid="stMain"] [data-testid="stSelectbox"]').filter(
                has_text="Flagged run")
            picked = box.locator("input").input_value()  # the chosen option's text
            assert picked.startswith("○ unlabelled · (task not captured) · agent ops-"), picked
            assert picked.endswith(("stopped", "blocked", "warned", "allowed", "would stop",
                                    "would block", "would warn")), picked

            texts["alerts"] = _check_page(page, base + "/alerts", "h1", "ops-alerts", problems)
            texts["loops"] = _check_page(page, base + "/loops", '[data-testid="stMetric"]',
                                         "ops-loops", problems)
            _every_page_speaks_the_glossary_and_agrees(page, live, texts, problems)
        finally:
            browser.close()


def _count(pattern: str, text: str, name: str) -> int:
    found = re.search(pattern, text)
    assert found, f"{name}: no {pattern!r} in the page"
    return int(found.group(1).replace(",", ""))


def _every_page_speaks_the_glossary_and_agrees(page: Any, live: dict[str, str],
                                               texts: dict[str, str],
                                               problems: list[str]) -> None:
    """Issue 30, in the browser, after the test opened Policy, Labels, Alerts and Loops
    (``texts``, ``problems``): every page of the demo's runs shows no word outside
    docs/glossary.md in its headings, metric labels, buttons and table headers, no retired word anywhere, no
    ``None``, no button too narrow for its text; and the headline numbers agree: the labelled
    loops of the Overview's loop-detection rate and of the Policy page, the labels the Labels
    page and the Policy page count (scenario labels in both), and the runs the Runs, Loops
    and Policy pages count."""
    base = live["dashboard"]
    opened = {"overview": ("/", '[data-testid="stMetric"]'), "runs": ("/runs", "h1"),
              "import": ("/importer", "h1")}  # (the test opened the other pages)
    for name, (path, ready) in opened.items():
        texts[name] = _check_page(page, base + path, ready, f"ops-words-{name}", problems)
        if name == "runs":  # the headers the check reads are there
            assert "stop reason" in page.locator('[role="columnheader"]').all_inner_texts()
    flagged = json.loads(_get(live["collector"] + "/v1/reads/episode_list?flagged=true"))
    episode = flagged["rows"][0]["episode_id"]
    texts["episode"] = _check_page(page, f"{base}/episode?episode={episode}",
                                   ".js-plotly-plot", "ops-words-episode", problems,
                                   title_is_data=True)
    assert not problems, "\n".join(problems)

    loops_n = _count(r"(\d+) of (?:\d+) labelled loops", texts["overview"], "overview")
    assert _count(r"Loops caught of (\d+) labelled loops", texts["policy"], "policy") == loops_n
    labelled = _count(r"[\d,]+ runs, [\d,]+ tool calls; ([\d,]+) labelled", texts["policy"],
                      "policy")
    here = _count(r"([\d,]+) runs labelled here", texts["labels"], "labels")
    by_agent = _count(r"and ([\d,]+) by their own agent", texts["labels"], "labels")
    assert here + by_agent == labelled > 0
    runs = _count(r"of ([\d,]+) \(page", texts["runs"], "runs")
    assert _count(r"\d+ of ([\d,]+) runs", texts["loops"], "loops") == runs
    assert _count(r"([\d,]+) runs, [\d,]+ tool calls", texts["policy"], "policy") == runs


def _check_page(page: Any, url: str, ready: str, name: str, problems: list[str], *,
                title_is_data: bool = False) -> str:
    """Open ``url``; add to ``problems`` what breaks the glossary, a ``None``, a cut button."""
    text = _timed_open(page, url, ready, name)
    main = page.locator('[data-testid="stMain"]')
    problems += words_in_page(main, name, title_is_data=title_is_data)
    if re.search(r"\bNone\b", text):
        problems.append(f"{name}: None on the page")
    cut = main.locator("button").evaluate_all(
        "els => els.filter(b => b.offsetParent !== null && [b, ...b.querySelectorAll('p')]"
        ".some(e => e.scrollWidth > e.clientWidth + 1)).map(b => b.innerText)")
    if cut:
        problems.append(f"{name}: buttons cut: {cut}")
    return text


def words_in_page(main: Any, name: str, *, title_is_data: bool = False) -> list[str]:
    """Headings, metric labels, button texts and the tables' headers in view held to the
    glossary word by word; all the page's text held to its retired words."""
    words = glossary()
    heads = main.locator("h2, h3" if title_is_data else "h1, h2, h3").all_inner_texts()
    buttons = main.locator("button").evaluate_all(  # a Material icon's name is not a word
        "els => els.map(b => { const c = b.cloneNode(true); c.querySelectorAll("
        "'[data-testid=\"stIconMaterial\"]').forEach(e => e.remove()); return c.innerText; })")
    columns = main.locator('[role="columnheader"]').all_inner_texts()  # tables' headers
    strict = [t for t in (*heads, *main.locator('[data-testid="stMetricLabel"]')
                          .all_inner_texts(), *buttons, *columns) if t.strip()]
    return (words.problems(name, strict)
            + words.problems(name, [main.inner_text()], retired_only=True))
