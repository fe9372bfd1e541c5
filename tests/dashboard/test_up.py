"""``loopscope up`` keeps running: a part that dies is started again, with a pause that doubles
while it keeps dying right after its start, until it gives up with the part's last output.
Real child processes (short Python scripts stand in for the collector); the whole system,
killed collector and banner included, is tested in tests/browser/test_dashboard_browser.py."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from loopscope_dashboard import restarts
from loopscope_dashboard.up import BACKOFF, Backoff, Part, run


def test_the_pause_doubles_to_its_cap_and_gives_up() -> None:
    assert [BACKOFF.pause(n) for n in range(6)] == [1, 2, 4, 8, 16, None]
    capped = Backoff(first_s=1, cap_s=5, give_up_after=10)
    assert [capped.pause(n) for n in range(5)] == [1, 2, 4, 5, 5]


def _part(script: str) -> Part:
    return Part("collector", [sys.executable, "-c", script], None)


def test_a_part_that_keeps_dying_right_after_start_stops_up_with_its_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = tmp_path / "restarts.json"
    part = _part("import sys, time; time.sleep(0.3); print('port 4318 is taken'); sys.exit(3)")
    backoff = Backoff(first_s=0.05, cap_s=0.15, stable_s=30, give_up_after=3)
    assert run([part], [], status=status, backoff=backoff) == 1
    err = capsys.readouterr().err
    assert err.count("loopscope up: collector exited (exit code 3)") == 3
    assert "starting it again in 0.1 s" in err and "starting it again in 0.15 s" in err
    assert ("3 times in a row within 30 s of a start; giving up. Its last output:\n"
            "  port 4318 is taken") in err
    assert [(r.part, r.restarts, r.last_exit) for r in restarts.read(status)] == [
        ("collector", 2, 3)]


def test_a_part_that_ran_stably_is_restarted_each_time_until_ctrl_c(tmp_path: Path) -> None:
    """Deaths after a stable run never add up to giving up; Ctrl-C between restarts stops
    ``up`` cleanly (exit 0)."""
    status = tmp_path / "restarts.json"
    part = _part("import os, signal, time; time.sleep(0.4); os.kill(os.getpid(), signal.SIGKILL)")

    def ctrl_c_after_two_restarts() -> None:
        for _ in range(600):
            if sum(r.restarts for r in restarts.read(status)) >= 2:
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    user = threading.Thread(target=ctrl_c_after_two_restarts)
    user.start()
    try:
        code = run([part], [], status=status,
                   backoff=Backoff(first_s=0.05, stable_s=0.2, give_up_after=1))
    finally:
        user.join()
    assert code == 0
    [collector] = restarts.read(status)
    assert collector.restarts >= 2 and collector.last_exit == -signal.SIGKILL
    assert restarts.how_it_ended(collector.last_exit) == "killed by SIGKILL"
