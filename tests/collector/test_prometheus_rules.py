"""``loopscope export --prometheus-rules``: the collector's no-progress spike alert as
Prometheus alerting rules, checked by Debian's ``promtool`` and fired by a real Debian
``prometheus`` scraping a live collector under a scripted spike (issue 18 point 10)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from collector_process import eventually, free_port, start_collector

from loopscope.offline.cli import main

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prometheus() -> dict[str, str]:
    """Debian's ``prometheus`` and ``promtool``; installed with apt-get when absent (the
    test command's job, as for Chromium); skipped only where there is no apt-get."""
    if not (shutil.which("promtool") and shutil.which("prometheus")):
        if not shutil.which("apt-get"):
            pytest.skip("prometheus / promtool are not installed and there is no apt-get to "
                        "install Debian's 'prometheus' package")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                        "prometheus"], check=True, env=env, timeout=900)
    return {"promtool": shutil.which("promtool") or "promtool",
            "prometheus": shutil.which("prometheus") or "prometheus"}


def _export(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "loopscope-rules.yml"
    assert main(["export", "--prometheus-rules", str(out), *args]) == 0
    return out


@pytest.mark.parametrize("options", [
    [], ["--alert-window", "7.5", "--alert-factor", "2", "--alert-threshold", "0.4",
         "--alert-min-volume", "5", "--prometheus-selector", 'job="loopscope"']])
def test_promtool_accepts_the_exported_rules(prometheus: dict[str, str], tmp_path: Path,
                                             options: list[str]) -> None:
    rules = _export(tmp_path, *options)
    checked = subprocess.run([prometheus["promtool"], "check", "rules", str(rules)],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 5 rules found" in checked.stdout
    text = rules.read_text()
    if options:
        assert "[7500ms]" in text and ">= 0.4" in text and ">= 2 *" in text
        assert 'loopscope_service_tool_calls_total{job=\\"loopscope\\"}' in text  # quoted


def test_export_says_what_is_missing_or_wrong(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export"]) == 2
    assert "--db FILE" in capsys.readouterr().err
    assert main(["export", "--prometheus-rules", str(tmp_path / "r.yml"),
                 "--alert-threshold", "1.5"]) == 2
    assert "threshold must be above 0 and at most 1, not 1.5" in capsys.readouterr().err
    assert not (tmp_path / "r.yml").exists()


AGENT = textwrap.dedent("""
    import sys
    import loopscope
    from opentelemetry import trace

    loopscope.instrument(service_name="spiky-agent", endpoint=sys.argv[1], mode="observe")

    @loopscope.tool(kind="read")
    def search_orders(query: str) -> str:
        return "order 1234: shipped" if sys.argv[2] == "spin" else f"{query}: new fact"

    for run in range(int(sys.argv[3])):
        with loopscope.episode(task="find the order", episode_id=f"{sys.argv[2]}-{run}"):
            for i in range(10):
                search_orders("order 1234" if sys.argv[2] == "spin" else f"q{run}-{i}")
    trace.get_tracer_provider().force_flush()
""")


def _agent(collector_url: str, shape: str, runs: int, tmp_path: Path) -> None:
    """Real agents through the real SDK exporter: ``spin`` repeats one read (no progress),
    ``healthy`` learns something new on every call."""
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPSCOPE_"))}
    done = subprocess.run([sys.executable, str(script), collector_url, shape, str(runs)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_a_prometheus_scraping_a_live_collector_fires_under_a_spike(
        prometheus: dict[str, str], tmp_path: Path) -> None:
    """The collector and the exported rules share one setting (a 10 s window, 5 calls): a
    healthy service does not fire; the same service spinning does, in Prometheus as in the
    collector's own alerts."""
    settings = ["--alert-window", "10", "--alert-min-volume", "5", "--alert-cooldown", "0"]
    collector = start_collector(tmp_path / "store.duckdb", grpc=False, extra=settings)
    rules = _export(tmp_path, *settings)
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(textwrap.dedent(f"""
        global:
          scrape_interval: 1s
          evaluation_interval: 1s
        rule_files: ["{rules}"]
        scrape_configs:
          - job_name: loopscope
            static_configs:
              - targets: ["127.0.0.1:{collector.http_port}"]
    """))
    server = subprocess.Popen(
        [prometheus["prometheus"], f"--config.file={config}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    api = f"http://127.0.0.1:{port}/api/v1"
    try:
        eventually(lambda: _ready(api), timeout=60)

        def scraped(metric: str) -> float | None:
            found = _get(f"{api}/query?query={metric}%7Bservice%3D%22spiky-agent%22%7D")
            rows = found["data"]["result"]
            return float(rows[0]["value"][1]) if rows else None

        # healthy first: the service's series exist before the spike (Prometheus counts an
        # increase only between two scrapes of a series), and a healthy rate never fires
        _agent(collector.url, "healthy", 1, tmp_path)
        eventually(lambda: scraped("loopscope_service_tool_calls_total") == 10, timeout=60)
        assert scraped("loopscope_service_no_progress_calls_total") == 0
        time.sleep(3)  # a few evaluations of the healthy series (none may fire)
        assert _firing(api) == []

        _agent(collector.url, "spin", 3, tmp_path)
        firing = eventually(lambda: _firing(api), timeout=90)
        assert firing[0]["labels"]["service"] == "spiky-agent"
        assert firing[0]["labels"]["source"] == "loopscope"
        assert float(firing[0]["value"]) >= 0.5
        assert "of tool calls made no progress" in firing[0]["annotations"]["summary"]
        # the collector's own rule saw the same spike
        own = eventually(lambda: collector.read("alerts", service="spiky-agent"), timeout=30)
        assert own[0]["state"] in ("firing", "resolved")
        # every query of the Grafana dashboard in docs/ runs on this Prometheus, and the
        # service's no-progress rate is there
        exposed = {line.split()[2] for line in collector.get("/metrics").splitlines()
                   if line.startswith("# HELP ")}
        for title, expr in dashboard_queries():
            assert set(re.findall(r"loopscope_[a-z_]+", expr)) <= exposed, title
            answer = _get(f"{api}/query?" + urllib.parse.urlencode({"query": expr}))
            assert answer["status"] == "success", (title, answer)
            if title == "No-progress rate by service":
                assert [r["metric"]["service"] for r in answer["data"]["result"]] == [
                    "spiky-agent"]
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        collector.stop()


GRAFANA_MACROS = {"$__rate_interval": "30s", "$__range": "1h", "$job": ".*",
                  "$service": ".*"}


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query in docs/grafana-dashboard.json, with Grafana's
    variables as a dashboard showing everything would fill them in."""
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    found = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for macro, value in GRAFANA_MACROS.items():
                expr = expr.replace(macro, value)
            found.append((panel["title"], expr))
    return found


def test_the_grafana_dashboard_queries_are_valid_promql(prometheus: dict[str, str],
                                                         tmp_path: Path) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 10
    rules = tmp_path / "dashboard-queries.yml"
    rules.write_text("groups:\n  - name: dashboard\n    rules:\n" + "".join(
        f"      - record: panel_{i}\n        expr: {json.dumps(expr)}\n"
        for i, (_, expr) in enumerate(queries)))
    checked = subprocess.run([prometheus["promtool"], "check", "rules", str(rules)],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _ready(api: str) -> bool:
    try:
        with urllib.request.urlopen(api.removesuffix("/api/v1") + "/-/ready",
                                    timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def _firing(api: str) -> list[dict[str, Any]]:
    alerts = _get(f"{api}/alerts")["data"]["alerts"]
    return [a for a in alerts if a["labels"].get("alertname") == "LoopscopeNoProgressSpike"
            and a["state"] == "firing"]
