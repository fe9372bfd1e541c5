"""The README, `.ci/run` and the code cannot drift apart."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from loopscope.detect import DEFAULT_DETECTORS
from loopscope.offline.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def readme_commands() -> list[str]:
    """The commands of the README's first code block."""
    block = re.search(r"```bash\n(.*?)```", README, re.DOTALL)
    assert block, "the README must open with a bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands() -> None:
    """The README's first lines are the install-and-run and install-and-test commands."""
    assert README.index("```bash") < 20
    commands = readme_commands()
    assert len(commands) == 2
    assert "loopscope" in commands[0] and "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` runs exactly the README's second command, so CI tests what users run."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert readme_commands()[1] in ci.splitlines()


def test_readme_lists_every_default_detector() -> None:
    """A detector added to DEFAULT_DETECTORS must be documented in the README's table."""
    section = README.split("## Detectors", 1)[1].split("\n## ", 1)[0]
    table = {m.group(1) for m in re.finditer(r"^\| `(\w+)` \|", section, re.MULTILINE)}
    names = {detector.name for detector in DEFAULT_DETECTORS}
    assert names == table


def test_every_command_has_help_with_an_example() -> None:
    """Each subcommand's help shows how to run it."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
    assert {"analyze", "eval", "demo"} <= set(subparsers.choices)
    for name, sub in subparsers.choices.items():
        assert "Example:" in sub.format_help(), name


def _fresh_venv(tmp_path: Path, spec: str) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", spec]
    subprocess.run(pip, check=True, capture_output=True, text=True)
    return venv


@pytest.mark.timeout(600)
def test_the_base_install_is_what_an_agent_needs(tmp_path: Path) -> None:
    """``pip install loopscope`` (no extras) pulls no collector or dashboard dependency, the
    agent-side commands work in it (and load without a word about the others), and a command
    that needs an extra says which one, the lake's on a lake."""
    venv = _fresh_venv(tmp_path, str(ROOT))
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        check=True, capture_output=True, text=True,
    ).stdout.lower()
    for heavy in ("duckdb", "streamlit", "plotly", "pandas", "pyarrow", "grpcio"):
        assert f"\n{heavy}==" not in f"\n{installed}", f"base install pulled {heavy}"
    demo = subprocess.run(
        [str(venv / "bin" / "loopscope"), "demo", "--per-shape", "1"],
        capture_output=True, text=True, timeout=300,
    )
    assert demo.returncode == 0, demo.stderr
    assert "enforce" in demo.stdout and "loop detection rate" in demo.stdout
    assert "unavailable" not in demo.stderr, demo.stderr  # every command's parser loads
    for command, extra in ((["export", "--db", "x.duckdb"], "collector"),
                           (["lake", "import", "--db", "x.duckdb", "--lake", "ducklake:c",
                             "--lake-data", "d"], "lake")):
        needs = subprocess.run([str(venv / "bin" / "loopscope"), *command],
                               capture_output=True, text=True, timeout=120)
        assert needs.returncode == 1, needs.stderr
        assert f"pip install 'loopscope[{extra}]'" in needs.stderr, needs.stderr
        assert "Traceback" not in needs.stderr, needs.stderr
    for command in ("metrics", "collector"):  # a lake's command names the lake extra
        lake = subprocess.run(
            [str(venv / "bin" / "loopscope"), command, "--lake", "ducklake:catalog.ducklake",
             "--lake-data", str(tmp_path / "lake-data")],
            capture_output=True, text=True, timeout=120,
        )
        assert lake.returncode != 0 and "pip install 'loopscope[lake]'" in lake.stderr, (
            command, lake.stderr)


@pytest.mark.timeout(900)
def test_first_readme_command_works_in_a_fresh_venv(tmp_path: Path) -> None:
    """The README's first command, in a clean virtual environment: ``.[all]`` installs and
    ``loopscope up --demo`` brings up the collector and the dashboard (on free ports here),
    then stops cleanly on Ctrl-C."""
    import signal
    import socket
    import time
    import urllib.request

    venv = _fresh_venv(tmp_path, f"{ROOT}[all]")
    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    up = subprocess.Popen(
        [str(venv / "bin" / "loopscope"), "up", "--demo", "--db", str(tmp_path / "up.duckdb"),
         "--http-port", str(ports[0]), "--grpc-port", "0", "--dashboard-port", str(ports[1])],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 180
        ready = False
        while time.monotonic() < deadline and up.poll() is None and not ready:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{ports[1]}/_stcore/health", timeout=5)
                summary = urllib.request.urlopen(
                    f"http://127.0.0.1:{ports[0]}/v1/reads/summary", timeout=5).read()
                ready = b'"tool_calls": 0' not in summary
            except OSError:
                time.sleep(1)
        assert ready, "collector, dashboard and demo traffic did not come up"
    finally:
        up.send_signal(signal.SIGINT)
        output = up.communicate(timeout=120)[0]
    assert up.returncode == 0, output
    assert "dashboard: http://127.0.0.1:" in output
    deadline = time.monotonic() + 15
    while (left := _processes_running(str(venv))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes left behind: {left}"


def _processes_running(marker: str) -> list[str]:
    """Command lines of live processes that mention ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(cmdline.strip())
    return found
