"""One vocabulary (docs/glossary.md, issue 30): every page of the demo's store, its CSV columns,
``loopscope metrics``, ``/metrics``, the Prometheus rules and the Grafana dashboard use only
words the glossary defines, and no word it retired.

What is held to the glossary word by word: page titles and section headings, metric cards'
labels, table headers and the fields a table's download writes, widget labels, metric and
label names, the rules' names and summary, Grafana's panel titles and ``loopscope metrics``'
row names. Free text (captions, messages, column help) must not use a retired word.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from app_pages import APP
from glossary_words import glossary
from streamlit.testing.v1 import AppTest

from loopscope_collector.alerts.prometheus_rules import rules_yaml
from loopscope_collector.alerts.settings import AlertSettings
from loopscope_collector.metrics import prometheus
from loopscope_collector.metrics.compute import compute_metrics, format_table
from loopscope_collector.pipeline.thread import Pipeline
from loopscope_collector.receive.connections import ConnectionWatch
from loopscope_collector.receive.limits import InFlight
from loopscope_collector.storage import open_database

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("views/overview.py", "views/runs.py", "views/episode.py", "views/loops.py",
         "views/alerts.py", "views/labels.py", "views/importer.py", "views/policy.py")

pytestmark = pytest.mark.timeout(300)


def _shown_headers(df) -> tuple[list[str], list[str], list[str]]:
    """A table's headers as drawn, its fields (a download's CSV columns) and column help."""
    config = json.loads(df.proto.columns) if df.proto.columns else {}
    fields = [str(c) for c in df.value.columns]
    order = list(df.proto.column_order) or [
        c for c in fields if not config.get(c, {}).get("hidden")]
    headers = [config.get(c, {}).get("label") or c for c in order]
    helps = [c["help"] for c in config.values() if isinstance(c, dict) and c.get("help")]
    return headers, [f for f in fields if f not in ("open", "strip")], helps


def _page_texts(at: AppTest, page: str) -> tuple[list[str], list[str]]:
    """(texts held to the glossary word by word, free texts held to its retired words)."""
    strict: list[str] = [m.label for m in at.metric]
    loose: list[str] = [m.help or "" for m in at.metric]
    if page != "views/episode.py":  # the Episode page's title is the agent's name
        strict += [str(t.value) for t in at.title]
    strict += [str(h.value) for h in at.subheader]
    strict += [e.label for e in at.expander] + [b.label for b in at.button]
    strict += [w.label for w in (*at.selectbox, *at.radio, *at.text_input)]
    for df in at.dataframe:
        headers, fields, helps = _shown_headers(df)
        strict += headers + fields
        loose += helps
    for kind in ("caption", "markdown", "info", "warning", "success", "error"):
        loose += [str(e.value) for e in getattr(at, kind)]
    loose += [str(o) for r in at.radio for o in r.options]
    return strict, loose


@pytest.fixture(scope="module")
def demo_pages(demo_store_path: Path) -> Iterator[dict[str, AppTest]]:
    """Every page of the dashboard over the demo's store; the Episode page on a run its guard
    stopped and on an observe-mode run enforce would have stopped."""
    with duckdb.connect(str(demo_store_path), read_only=True) as con:
        stopped, observed = (con.execute(
            "select min(episode_id) from episodes where guard_mode = ? and stop_diagnostic "
            "is not null", [mode]).fetchone()[0] for mode in ("enforce", "observe"))
    mp = pytest.MonkeyPatch()
    mp.setenv("LOOPSCOPE_DB_SNAPSHOT", str(demo_store_path))
    opened: dict[str, AppTest] = {}
    try:
        for page in (*PAGES, "observe"):
            at = AppTest.from_file(APP, default_timeout=120).run()
            at.switch_page("views/episode.py" if page == "observe" else page)
            if page in ("views/episode.py", "observe"):
                at.query_params["episode"] = stopped if page != "observe" else observed
            at.run()
            assert not at.exception, (page, at.exception)
            opened[page] = at
        yield opened
    finally:
        mp.undo()


def test_every_page_of_the_demo_speaks_the_glossary(demo_pages: dict[str, AppTest]) -> None:
    words = glossary()
    problems: list[str] = []
    for page, at in demo_pages.items():
        strict, loose = _page_texts(at, "views/episode.py" if page == "observe" else page)
        assert strict, page
        problems += words.problems(page, strict)
        problems += words.problems(page, loose, retired_only=True)
    assert not problems, "\n".join(problems)


def test_a_made_up_word_or_a_retired_one_is_caught() -> None:
    """The check can fail: a word the glossary does not define, and a retired one."""
    words = glossary()
    assert "false kill" in words.retired_in("False-kill rate")
    assert words.unknown("Flagged zorbles") == ["zorbles"]
    assert words.retired_in("Flagged episodes") == ["episodes"]
    assert not words.problems("x", ["False-stop rate", "would-stops", "stop_reason"])


def test_exports_speak_the_glossary(demo_store_path: Path, tmp_path: Path) -> None:
    """``/metrics`` (its names and label names, as the collector renders them over the demo's
    store), ``loopscope metrics``' rows and columns, the Prometheus rules and the Grafana
    dashboard's panels and queries."""
    words = glossary()
    copy = tmp_path / "demo.duckdb"
    copy.write_bytes(demo_store_path.read_bytes())
    db = open_database(copy)
    try:
        pipeline = Pipeline(db)
        exposition = prometheus.render(
            pipeline, alerts=[("svc", "firing", 1)], firing=[("svc", 1)],
            alert_steps=[("svc", 10, 5)], inflight=InFlight(), watch=ConnectionWatch(),
            quality=lambda: compute_metrics(db))
        table = format_table(compute_metrics(db))
    finally:
        db.close()
    names = sorted(set(re.findall(r"^# TYPE (\w+) ", exposition, re.MULTILINE)))
    label_names = sorted(set(re.findall(r"[{,](\w+)=\"", exposition)))
    current = [n for n in names
               if f"# HELP {n} DEPRECATED" not in exposition]  # old names: one release more
    assert "loopscope_stopped_runs" in current and "loopscope_killed_episodes" in names
    problems = words.problems("/metrics", current + label_names)

    rows = [line.split("  ")[0] for line in table.splitlines() if re.match(r"^[a-zA-Z]", line)]
    headers = sorted({line for line in table.splitlines() if line.strip().startswith("key ")})
    assert rows and headers
    problems += words.problems("loopscope metrics", [r.split(":")[0] for r in rows] + headers)

    rules = rules_yaml(AlertSettings())
    rule_names = re.findall(r"(?:record|alert|name): (\S+)", rules)
    rule_metrics = re.findall(r"\bloopscope_\w+", rules)
    summary = re.search(r"summary: (.+)", rules)
    assert rule_names and rule_metrics and summary
    camel = [re.sub(r"(?<=[a-z])(?=[A-Z])", " ", n) for n in rule_names]
    said = re.sub(r"\{\{.*?\}\}", "", summary.group(1))  # templating is not words
    problems += words.problems("rules", [*camel, *rule_metrics, said])
    assert not set(rule_metrics) - set(current), "the rules judge a deprecated or absent name"

    grafana = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text("utf-8"))
    panels = grafana["panels"]
    exprs = " ".join(t["expr"] for p in panels for t in p.get("targets", []))
    queried = sorted(set(re.findall(r"\bloopscope_\w+", exprs)))
    assert not set(queried) - set(current), "Grafana queries a deprecated or absent name"
    problems += words.problems("Grafana", [grafana["title"], *(p["title"] for p in panels),
                                           *queried])
    problems += words.problems("Grafana", [p.get("description", "") for p in panels],
                               retired_only=True)
    assert not problems, "\n".join(problems)
