"""Runs, the trace view, shareable URLs, runs in flight and faults, as a user meets them: a
real collector on a free loopback port filled by ``loopscope demo``, a run still in flight
from the real SDK in another process, ``loopscope dashboard`` against that collector, headless
Chromium. One collector, one dashboard and one browser serve the whole module; the tests run
in file order (the fault test restarts the collector last but one). Screenshots go to
``artifacts/browser/runs-*.png``; every page's load time is printed, not asserted."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from test_dashboard_browser import (
    CHROMIUM_FLAGS,
    chromium,
    free_port,
    get_json,
    stop,
    wait_for,
)

__all__ = ["chromium"]  # the session fixture, shared with the other browser test

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
VIEWPORT = {"width": 1400, "height": 1000}
IN_FLIGHT = textwrap.dedent("""
    import sys, time
    from opentelemetry import trace
    import loopscope

    loopscope.instrument(endpoint=sys.argv[1], service_name="inflight-svc")

    @loopscope.tool(kind="read")
    def lookup(order: str) -> str:
        return f"order {order}: shipped"

    episode = loopscope.episode(task="still working", agent_name="inflight-agent",
                                episode_id="inflight-run")
    episode.__enter__()
    lookup("A-1")
    lookup("A-2")
    trace.get_tracer_provider().force_flush()
    print("ready", flush=True)
    time.sleep(3600)  # killed by the test: the run's final span never leaves
""")

pytestmark = pytest.mark.timeout(900)


def _collector(db: Path, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "loopscope", "collector", "--db", str(db), "--http-port",
         str(port), "--grpc-port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: proc.poll() is None and urllib.request.urlopen(
        f"http://127.0.0.1:{port}/healthz", timeout=5).read())
    return proc


def _two_runs() -> list[Any]:
    """Two short runs through the real SDK, in memory."""
    import loopscope
    from loopscope.testing import capture_spans

    @loopscope.tool(kind="read")
    def search(query: str) -> str:
        return f"no results for {query}"

    with capture_spans(mode="observe") as captured:
        for run in ("first", "second"):
            with loopscope.episode(task=f"find the {run} order", episode_id=run) as ep:
                search(f"{run} 1")
                search(f"{run} 2")
                ep.set_outcome("success")
        return list(captured.spans())


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def _silent_run(url: str) -> None:
    """A run of another instrumentation (plain GenAI spans, ids in base64 as protobuf's JSON
    mapping writes them) whose last span ended an hour ago, without a final span."""
    start = time.time_ns() - 3600 * 10**9
    spans = [{
        "traceId": _b64("5b8efff798038103d269b633813fc60c"),
        "spanId": _b64(f"eee19b7ec3c1b17{i}"), "name": "execute_tool fetch",
        "startTimeUnixNano": str(start + i * 10**9),
        "endTimeUnixNano": str(start + i * 10**9 + 2 * 10**8),
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "fetch"}},
            {"key": "gen_ai.conversation.id", "value": {"stringValue": "silent-run"}},
            {"key": "gen_ai.agent.name", "value": {"stringValue": "silent-agent"}},
        ],
    } for i in range(2)]
    body = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name",
                                     "value": {"stringValue": "other-svc"}}]},
        "scopeSpans": [{"scope": {"name": "some.genai.instrumentation"}, "spans": spans}],
    }]}
    request = urllib.request.Request(url + "/v1/traces", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, chromium: str) -> Iterator[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    folder = tmp_path_factory.mktemp("runs-browser")
    db, http, port = folder / "runs.duckdb", free_port(), free_port()
    url = f"http://127.0.0.1:{http}"
    procs: dict[str, subprocess.Popen[Any]] = {"collector": _collector(db, http)}
    pw = None
    try:
        subprocess.run([sys.executable, "-m", "loopscope", "demo", "--endpoint", url],
                       check=True, capture_output=True, timeout=600)
        procs["agent"] = subprocess.Popen([sys.executable, "-c", IN_FLIGHT, url],
                                          stdout=subprocess.PIPE, text=True)
        assert procs["agent"].stdout is not None
        assert procs["agent"].stdout.readline().strip() == "ready"
        _silent_run(url)
        procs["dashboard"] = subprocess.Popen(
            [sys.executable, "-m", "loopscope", "dashboard", "--collector", url, "--port",
             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for(lambda: urllib.request.urlopen(
            f"http://127.0.0.1:{port}/_stcore/health", timeout=5).read())
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        pw = sync_playwright().start()
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        yield {"collector": url, "dashboard": f"http://127.0.0.1:{port}", "db": db,
               "http": http, "procs": procs, "browser": browser}
        browser.close()
    finally:
        if pw is not None:
            pw.stop()
        for proc in reversed(procs.values()):
            stop(proc)


def _rows(live: dict[str, Any], read: str, **params: Any) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
    return get_json(f"{live['collector']}/v1/reads/{read}?{query}")["rows"]


def _main_text(page: Any) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def _open(page: Any, url: str, ready: str, name: str, timeout: int = 120_000) -> float:
    """Load ``url`` and wait for ``ready``; screenshot; no exception box. Returns seconds."""
    start = time.perf_counter()
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(ready, timeout=timeout)
    seconds = time.perf_counter() - start
    page.wait_for_timeout(1500)  # let the charts draw before the screenshot
    page.screenshot(path=str(ARTIFACTS / f"runs-{name}.png"), full_page=True)
    assert page.locator('[data-testid="stException"]').count() == 0, name
    return seconds


def _grid_column(page: Any, column: int) -> list[str]:
    """The visible cells of one column of the first table (its accessible grid)."""
    cells = page.locator(f'[data-testid="stDataFrame"] [role="gridcell"]'
                         f'[aria-colindex="{column}"]')
    return cells.all_inner_texts()  # (one snapshot: a rerun may replace the grid's cells)


def _grid_settles(page: Any, column: int, check: Any, timeout_s: float = 60.0) -> list[str]:
    """The column's cells once ``check(cells)`` holds (a rerun replaces the table a moment
    after the caption)."""
    deadline = time.monotonic() + timeout_s
    while True:
        cells = [cell for cell in _grid_column(page, column) if cell]
        if cells and check(cells):
            return cells
        if time.monotonic() > deadline:
            raise AssertionError(f"the table's column {column} stayed {cells}")
        page.wait_for_timeout(500)


def _caption_with(page: Any, text: str, timeout: int = 60_000) -> None:
    page.wait_for_function(
        "t => document.querySelector('[data-testid=\"stMain\"]').innerText.includes(t)",
        arg=text, timeout=timeout)


def test_every_page_loads_and_says_how_long_it_took(
        live: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """Every page renders without an exception box; its load time is printed."""
    healthy = _rows(live, "run_list", verdict="not flagged", search="healthy_lookup")[0]
    observed = next(r for r in _rows(live, "run_list", verdict="would stop", limit=200)
                    if r["guard_mode"] == "observe")
    base = live["dashboard"]
    pages = {"overview": ("/", '[data-testid="stMetric"]'),
             "runs": ("/runs", '[data-testid="stDataFrame"]'),
             "episode": (f"/episode?episode={healthy['episode_id']}", ".st-key-waterfall"),
             "spans": ("/spans", '[data-testid="stDataFrame"]'),
             "alerts": ("/alerts", "h1"), "loops": ("/loops", "h1"), "labels": ("/labels", "h1"),
             "import": ("/importer", "h1"),
             "policy": ("/policy", '[data-testid="stMetric"]')}
    page = live["browser"].new_page(viewport=VIEWPORT)
    times = {name: _open(page, base + path, ready, name) for name, (path, ready) in
             pages.items()}
    with capsys.disabled():
        print("\npage load times on the demo store (not asserted): " + ", ".join(
            f"{name} {seconds:.2f} s" for name, seconds in times.items()))

    # cards wrap instead of cutting at 1,400 px: no metric's label or value is clipped
    _open(page, f"{base}/episode?episode={observed['episode_id']}", ".st-key-waterfall",
          "episode-observe-cards")
    clipped = page.evaluate("""() => [...document.querySelectorAll(
        '[data-testid="stMetricValue"], [data-testid="stMetricLabel"]')]
        .flatMap(card => [card, ...card.querySelectorAll('*')])
        .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)""")
    assert clipped == []
    assert "would stop" in _main_text(page)
    page.close()


def test_a_healthy_run_is_found_by_a_search_and_opened_on_its_trace_view(
        live: dict[str, Any]) -> None:
    expected = _rows(live, "run_list", search="healthy_lookup", verdict="not flagged",
                     limit=500)
    assert expected and all(r["flags"] == 0 for r in expected)
    context = live["browser"].new_context(viewport=VIEWPORT)
    page = context.new_page()
    _open(page, live["dashboard"] + "/runs", '[data-testid="stDataFrame"]', "runs-all")
    page.get_by_role("textbox", name="Search").fill("healthy_lookup")
    page.keyboard.press("Enter")
    _caption_with(page, f" of {len(expected)} (page 1")
    assert "q=healthy_lookup" in page.url
    links = {f"episode?episode={r['episode_id']}" for r in expected}
    shown = _grid_settles(page, 1, lambda cells: set(cells) <= links)
    run = shown[0].removeprefix("episode?episode=")

    grid = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
    with context.expect_page() as opened:  # the link opens the run in a new tab
        page.mouse.move(grid["x"] + 60, grid["y"] + 35 + 17)
        page.wait_for_timeout(500)
        page.mouse.click(grid["x"] + 60, grid["y"] + 35 + 17)
    episode = opened.value
    episode.wait_for_selector(".st-key-waterfall .js-plotly-plot", timeout=120_000)
    episode.wait_for_timeout(1500)
    episode.locator(".st-key-waterfall").screenshot(
        path=str(ARTIFACTS / "runs-episode-waterfall.png"))
    assert urllib.parse.unquote(episode.url).endswith(f"episode?episode={run}")
    assert episode.locator('[data-testid="stException"]').count() == 0
    spans = _rows(live, "episode_spans", episode_id=run)
    bars = episode.locator(".st-key-waterfall .barlayer .point")
    assert bars.count() == len(spans) >= 2  # the agent's run and its calls, one bar each
    assert "Not stopped" in _main_text(episode) and "Trace" in _main_text(episode)
    steps = episode.locator('[data-testid="stDataFrame"]').last  # the Steps table
    steps.scroll_into_view_if_needed()
    episode.wait_for_timeout(1000)
    headers = steps.locator('[role="columnheader"]').all_inner_texts()
    steps.hover()  # the grid draws only the columns in view: scroll right for the rest
    for _ in range(4):
        episode.mouse.wheel(1500, 0)
        episode.wait_for_timeout(300)
        headers += steps.locator('[role="columnheader"]').all_inner_texts()
    assert any("latency" in h for h in headers), headers
    context.close()


def test_runs_in_flight_are_running_or_ended_without_a_summary_and_named(
        live: dict[str, Any]) -> None:
    page = live["browser"].new_page(viewport=VIEWPORT)
    _open(page, live["dashboard"] + "/runs?status=running", '[data-testid="stDataFrame"]',
          "runs-running")
    assert _grid_column(page, 1) == ["episode?episode=inflight-run"]
    assert _grid_column(page, 5) == ["inflight-agent"]  # named by its tool spans
    _open(page, live["dashboard"] + "/runs?status=ended+without+a+summary",
          '[data-testid="stDataFrame"]', "runs-silent")
    assert _grid_column(page, 1) == ["episode?episode=silent-run"]
    assert _grid_column(page, 5) == ["silent-agent"]

    _open(page, live["dashboard"] + "/episode?episode=inflight-run", ".st-key-waterfall",
          "episode-running")
    text = _main_text(page)
    assert "inflight-agent" in text and "Status running" in text
    assert "Running: the agent's final span" in text and "Stopped" not in text
    _open(page, live["dashboard"] + "/episode?episode=silent-run", ".st-key-waterfall",
          "episode-silent")
    assert ("Ended without a summary: the agent's final span never arrived and the run has "
            "been silent for over 5 minutes") in _main_text(page)
    page.close()


def test_a_url_with_filters_reopens_the_same_view(live: dict[str, Any]) -> None:
    agent = "demo-read_spin"
    expected = _rows(live, "run_list", agent=agent, verdict="flagged", sort="calls",
                     limit=500)
    assert expected
    link = (f"{live['dashboard']}/runs?agent={agent}&verdict=flagged&sort=tool+calls"
            "&range=Last+24+hours")
    page = live["browser"].new_page(viewport=VIEWPORT)
    total = _rows(live, "run_list", limit=1)[0]["total"]
    assert total > 100
    _open(page, f"{live['dashboard']}/runs?page=2", '[data-testid="stDataFrame"]', "runs-page-2")
    _caption_with(page, f"Runs 51–100 of {total:,} (page 2 of {-(-total // 50)})")
    _open(page, link, '[data-testid="stDataFrame"]', "runs-from-url")
    _caption_with(page, f" of {len(expected)} (page 1")
    assert "by tool calls, descending" in _main_text(page)
    assert page.get_by_role("combobox", name="Agent").input_value() == agent
    assert page.get_by_role("combobox", name="Time range").input_value() == "Last 24 hours"
    assert page.get_by_role("combobox", name="Verdict").input_value() == "flagged"
    _grid_settles(page, 5, lambda cells: set(cells) == {agent})

    # a change made on the page lands in the URL; that URL, opened afresh, shows the same
    page.get_by_role("textbox", name="Search").fill("enforce")
    page.keyboard.press("Enter")
    page.wait_for_url("**q=enforce**", timeout=60_000)
    narrowed = _rows(live, "run_list", agent=agent, verdict="flagged", search="enforce")
    _caption_with(page, f" of {len(narrowed)} (page 1")
    copied = page.url
    again = live["browser"].new_page(viewport=VIEWPORT)
    _open(again, copied, '[data-testid="stDataFrame"]', "runs-copied-url")
    _caption_with(again, f" of {len(narrowed)} (page 1")
    wanted = {f"episode?episode={r['episode_id']}" for r in narrowed}
    first = _grid_settles(page, 1, lambda cells: set(cells) <= wanted)
    assert _grid_settles(again, 1, lambda cells: set(cells) <= wanted) == first
    assert again.get_by_role("textbox", name="Search").input_value() == "enforce"
    page.close()
    again.close()


def test_a_run_whose_calls_were_partly_lost_keeps_the_agents_numbers(
        live: dict[str, Any]) -> None:
    """An observe-mode run of the real SDK whose calls 2–4 never reached the collector (its
    spans left out, as an exporter drops them when its queue is full): the Episode page
    names the gap, its Steps table numbers the calls 1, 5, 6, … and the would-be stop is at
    the call the agent's own log line named, not at its place among the calls that arrived."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dashboard"))
    from lossy_runs import lossy_spans

    spans, stops = lossy_spans()
    request = urllib.request.Request(
        live["collector"] + "/v1/traces", data=encode_spans(spans).SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
    wait_for(lambda: len(_rows(live, "episode_tool_calls", episode_id="lossy-observe")) == 8)
    page = live["browser"].new_page(viewport=VIEWPORT)
    _open(page, f"{live['dashboard']}/episode?episode=lossy-observe", ".st-key-waterfall",
          "episode-lost-calls")
    text = _main_text(page)
    assert "Calls 2–4 not received: the agent made 11 tool calls" in text
    would = stops["lossy-observe"]
    assert f"Enforce mode would have stopped it at call {would} by " in text
    assert would == 8 and "stopped it at call 5 " not in text  # (its place among the arrived)
    steps = page.locator('[data-testid="stDataFrame"]').last  # the Steps table
    steps.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    page.screenshot(path=str(ARTIFACTS / "runs-episode-lost-calls-steps.png"), full_page=True)
    cells = steps.locator('[role="gridcell"][aria-colindex="1"]')
    assert [cells.nth(i).inner_text() for i in range(cells.count())] == [
        "1", "5", "6", "7", "8", "9", "10", "11"]
    page.close()


def _inspected(page: Any, span_id: str) -> str:
    """The inspector's text once it shows ``span_id`` (its copyable id boxes)."""
    page.wait_for_function(
        "id => [...document.querySelectorAll('[data-testid=\"stCode\"]')]"
        ".some(e => e.innerText.trim() === id)", arg=span_id, timeout=60_000)
    return _main_text(page)


def test_a_span_is_inspected_from_the_trace_and_found_by_the_spans_filter(
        live: dict[str, Any]) -> None:
    """On a demo run's Episode page a click on a call's bar in the trace opens that span in
    the inspector (its ids, its arguments and result, its attributes), and the URL names it;
    so does a row of its Steps table; on the Spans page a filter on the call's signature lists exactly the spans the collector's
    read counts, a bad filter is named, and a row picked opens in the inspector."""
    from loopscope_collector.reads.span_filter import compile_filter

    run = _rows(live, "run_list", search="read_spin", verdict="flagged")[0]["episode_id"]
    spans = _rows(live, "episode_spans", episode_id=run)
    at = next(i for i, s in enumerate(spans) if s["is_call"])
    clicked = spans[at]
    page = live["browser"].new_page(viewport=VIEWPORT)
    _open(page, f"{live['dashboard']}/episode?episode={run}", ".st-key-waterfall .barlayer",
          "episode-before-click")
    bars = page.locator(".st-key-waterfall .barlayer .point")
    assert bars.count() == len(spans)  # one bar per span, top to bottom in start order
    bar = bars.nth(sorted(range(len(spans)), key=lambda i: bars.nth(i).bounding_box()["y"])[at])
    bar.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    box = bar.bounding_box()  # (Plotly's drag layer takes the click and finds the bar)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    text = _inspected(page, clicked["span_id"])
    page.screenshot(path=str(ARTIFACTS / "runs-span-inspector.png"), full_page=True)
    assert f"Span: {clicked['name']}" in text
    assert f"span={clicked['span_id']}" in page.url
    [detail] = _rows(live, "span_detail", span_id=clicked["span_id"],
                     trace_id=clicked["trace_id"])
    attributes = json.loads(detail["attributes"])
    assert "Input" in text and "Output" in text
    for key in ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"):
        assert json.dumps(json.loads(attributes[key]), indent=2) in text  # pretty JSON
    assert f"Attributes ({len(attributes)})" in text
    assert page.locator('[data-testid="stException"]').count() == 0
    # a row of the Steps table (call 2) opens its span in the same inspector
    second = _rows(live, "episode_tool_calls", episode_id=run)[1]
    steps = page.locator('[data-testid="stDataFrame"]').last
    steps.scroll_into_view_if_needed()
    steps.hover()
    frame = steps.bounding_box()
    page.mouse.click(frame["x"] + 14, frame["y"] + 35 + 35 + 17)  # the second row's selector
    _inspected(page, second["span_id"])
    assert f"span={second['span_id']}" in page.url

    signature = attributes["loopscope.tool.signature"]
    expected = _rows(live, "span_list", where=compile_filter(
        f'loopscope.tool.signature == "{signature}"'), limit=500)
    assert expected and all(r["total"] == len(expected) for r in expected)
    _open(page, live["dashboard"] + "/spans", '[data-testid="stDataFrame"]', "spans-all")
    box = page.get_by_role("textbox", name="Filter")
    box.fill(f"loopscope.tool.signature == {signature}")  # no quotes: named
    page.keyboard.press("Enter")
    page.wait_for_selector("text=This filter does not parse", timeout=60_000)
    assert "(text goes in quotes:" in _main_text(page)
    box.fill(f'loopscope.tool.signature == "{signature}"')
    page.keyboard.press("Enter")
    _caption_with(page, f"The newest {len(expected)} of {len(expected)} matching spans")
    assert "where=" in page.url
    page.screenshot(path=str(ARTIFACTS / "runs-spans-filtered.png"), full_page=True)
    cards = page.locator('[data-testid="stMetricValue"]').all_inner_texts()
    assert cards[0] == str(len(expected)) and all(c.endswith(" ms") for c in cards[1:])
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.scroll_into_view_if_needed()
    grid.hover()
    frame = grid.bounding_box()
    page.mouse.click(frame["x"] + 14, frame["y"] + 35 + 17)  # the first row's selector
    text = _inspected(page, expected[0]["span_id"])
    page.screenshot(path=str(ARTIFACTS / "runs-spans-inspector.png"), full_page=True)
    assert f"span={expected[0]['span_id']}" in page.url
    assert f"Span: {expected[0]['name']}" in text
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()


def test_the_collector_stopped_and_restarted_under_open_pages(live: dict[str, Any]) -> None:
    """The Overview and an Episode page stay open while the collector stops: each keeps what
    it showed under a banner with the time of the last good read, no traceback; the banner
    clears by itself once the collector is back."""
    run = _rows(live, "run_list", verdict="stopped")[0]["episode_id"]
    page = live["browser"].new_page(viewport=VIEWPORT)
    _open(page, live["dashboard"] + "/", '[data-testid="stMetric"]', "overview-before-fault")
    episode = live["browser"].new_page(viewport=VIEWPORT)
    _open(episode, f"{live['dashboard']}/episode?episode={run}", ".st-key-waterfall",
          "episode-before-fault")
    cards = page.locator('[data-testid="stMetricValue"]').all_inner_texts()
    story = episode.locator('[data-testid="stMetricValue"]').all_inner_texts()
    stop(live["procs"]["collector"])
    for tab, name in ((page, "overview"), (episode, "episode")):
        tab.wait_for_selector("text=The collector is not answering", timeout=60_000)
        tab.wait_for_timeout(3000)  # the pages' own refreshes run meanwhile
        tab.screenshot(path=str(ARTIFACTS / f"runs-{name}-collector-down.png"), full_page=True)
        assert tab.locator('[data-testid="stException"]').count() == 0
        text = _main_text(tab)
        assert "Traceback" not in text and "SourceError" not in text
        assert "the last good read" in text
    assert page.locator('[data-testid="stMetricValue"]').all_inner_texts() == cards
    assert episode.locator('[data-testid="stMetricValue"]').all_inner_texts() == story
    assert episode.locator(".st-key-waterfall .js-plotly-plot").count() == 1

    live["procs"]["collector"] = _collector(live["db"], live["http"])
    for tab in (page, episode):
        tab.wait_for_selector("text=The collector is not answering", state="detached",
                              timeout=60_000)
        tab.wait_for_selector('[data-testid="stMetric"]', timeout=60_000)
        assert tab.locator('[data-testid="stException"]').count() == 0
        assert "cannot reach the collector" not in _main_text(tab)
    assert page.locator('[data-testid="stMetricValue"]').all_inner_texts() == cards
    assert episode.locator('[data-testid="stMetricValue"]').all_inner_texts() == story
    page.close()
    episode.close()


def test_a_bad_file_is_refused_and_protobuf_json_is_read(live: dict[str, Any]) -> None:
    page = live["browser"].new_page(viewport=VIEWPORT)
    _open(page, live["dashboard"] + "/importer", "h1", "import")
    picture = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    page.locator('input[type="file"]').set_input_files(
        files=[{"name": "picture.json", "mimeType": "application/json", "buffer": picture}])
    page.wait_for_selector("text=neither OTLP JSON nor Episode JSONL", timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "runs-import-bad-file.png"), full_page=True)
    text = _main_text(page)
    assert "picture.json is neither OTLP JSON nor Episode JSONL: line 1: not UTF-8" in text
    assert "No run in this file is flagged" not in text
    assert page.get_by_role("button", name="Send").count() == 0

    mapped = MessageToDict(encode_spans(_two_runs()))  # protobuf's mapping: base64 ids
    page.locator('input[type="file"]').set_input_files(
        files=[{"name": "protobuf.json", "mimeType": "application/json",
                "buffer": json.dumps(mapped).encode()}])
    page.wait_for_selector('[data-testid="stMetric"]', timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "runs-import-protobuf-json.png"), full_page=True)
    runs = page.locator('[data-testid="stMetric"]').first.inner_text()
    assert runs.splitlines()[-1] == "2"
    # the button comes after the metrics in the same script run: wait for it, then count it
    send = page.get_by_role("button", name="Send 2 runs to the collector")
    send.wait_for(timeout=60_000)
    assert send.count() == 1
    # after the send, each run is a link to its Episode page (issue 30: "Sent 1 of 1", then
    # nowhere to go)
    send.click()
    page.wait_for_selector("text=Open on the Episode page", timeout=60_000)
    links = page.locator('a[href*="episode?episode="]')
    assert links.count() >= 2
    page.close()
