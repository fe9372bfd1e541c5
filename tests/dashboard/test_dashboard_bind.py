"""``loopscope dashboard`` binds by the collector's rule: loopback, or on purpose."""

from __future__ import annotations

import subprocess
import sys


def test_a_non_loopback_host_is_refused_without_insecure_remote() -> None:
    done = subprocess.run([sys.executable, "-m", "loopscope", "dashboard", "--host", "0.0.0.0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0" in done.stderr and "--insecure-remote" in done.stderr
