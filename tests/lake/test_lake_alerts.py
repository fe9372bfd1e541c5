"""Alerts once (issue 17, point 4): two collectors each get half of a service's spinning
episodes; collectors on a lake judge no spikes themselves, and one ``loopscope alerts`` over
the lake fires the spike once."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from collector_process import eventually, start_collector
from lake_place import LakePlace
from otlp_requests import episode_request


def test_one_spike_over_two_collectors_fires_once(lake: LakePlace, tmp_path: Path) -> None:
    nodes = [start_collector(tmp_path / f"c{i}.duckdb", grpc=False,
                             extra=[*lake.args, "--instance", f"c{i}"]) for i in range(2)]
    alerts = subprocess.Popen(
        [sys.executable, "-m", "loopscope", "alerts", *lake.args, "--alert-window", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        for node in nodes:  # 4 spinning episodes of 10 calls each: 36 of 40 without progress
            for _ in range(4):
                assert node.post(episode_request(10, repeat=True)[0].SerializeToString())[0] \
                    == 200
        fired = eventually(lambda: nodes[0].read("alerts"), timeout=60)
        time.sleep(5)  # more looks of the evaluator: still one alert
        assert len(nodes[1].read("alerts")) == 1
        (alert,) = fired
        assert alert["service"] == "load" and alert["volume"] >= 40
        for node in nodes:  # the collectors judged nothing themselves
            assert not re.search(r'^loopscope_alerts_total\{.*\} [1-9]', node.get("/metrics"),
                                 re.MULTILINE)
    finally:
        alerts.send_signal(signal.SIGTERM)
        _, log = alerts.communicate(timeout=30)
        for node in nodes:
            node.stop()
    assert "evaluating spikes over" in log
    assert alerts.returncode == 0, log
