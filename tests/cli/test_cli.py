"""The `loopscope` command: analyze, eval, demo and the help texts."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopscope.offline import cli


def _tool(q: str, output: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool", "tool": "search", "kind": "read", "args": {"q": q},
            "output": output, "status": "ok", **extra}


LOOP = {
    "episode_id": "spin-1", "outcome": "failure",
    "label": {"loop": True, "kind": "exact_repeat", "first_loop_step": 2},
    "steps": [_tool("x", "nothing found for x") for _ in range(5)],
}
HEALTHY = {
    "episode_id": "ok-1", "outcome": "success",
    "steps": [_tool("a", "order 1 is open"), _tool("b", "order 2 was refunded")],
}
BAD_FIELD = {"episode_id": "bad-1", "steps": [_tool("x", "y", status="exploded")]}


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A clean Episode JSONL file: one read spin, one healthy run."""
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(LOOP) + "\n" + json.dumps(HEALTHY) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def messy(tmp_path: Path) -> Path:
    """Line 2 is not JSON, line 4 is JSON with a bad step status."""
    lines = [json.dumps(LOOP), "{this is not json", "", json.dumps(BAD_FIELD),
             json.dumps(HEALTHY)]
    path = tmp_path / "messy.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _analyze_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = cli.main(["analyze", *args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _check_flags(document: dict[str, Any]) -> list[dict[str, Any]]:
    flags = [f for ep in document["episodes"] for f in ep["flags"]]
    for flag in flags:
        assert set(flag) >= {"step", "detector", "kind", "severity"}
        assert isinstance(flag["step"], int) and not isinstance(flag["step"], bool)
        assert isinstance(flag["detector"], str) and flag["detector"]
        assert isinstance(flag["kind"], str) and flag["kind"]
        assert flag["severity"] in {"warn", "kill"}
    return flags


def test_analyze_json_is_one_object_with_typed_flags(runs: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Scripts piping --json would get extra text or untyped flags."""
    code, document, err = _analyze_json(capsys, str(runs))
    assert code == 0
    assert err == ""
    assert set(document) == {"episodes", "summary"}
    by_id = {ep["episode_id"]: ep for ep in document["episodes"]}
    assert set(by_id) == {"spin-1", "ok-1"}
    assert by_id["ok-1"]["flags"] == []
    flags = _check_flags(document)
    assert any(f["severity"] == "kill" for f in flags)
    assert min(f["step"] for f in by_id["spin-1"]["flags"]) == 2
    assert document["summary"]["episodes"] == 2
    assert document["summary"]["malformed_lines"] == 0


def test_analyze_reports_malformed_lines_and_keeps_going(
        messy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One bad line would abort the whole file, or pass unreported with exit 0."""
    code, document, err = _analyze_json(capsys, str(messy))
    assert code == 1
    assert f"{messy}:2:" in err
    assert f"{messy}:4:" in err
    assert "status" in err  # names the bad field
    assert {ep["episode_id"] for ep in document["episodes"]} == {"spin-1", "ok-1"}
    assert document["summary"]["malformed_lines"] == 2
    _check_flags(document)


def test_analyze_warn_mode_never_kills(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Warn mode would report kills it can never perform."""
    code, document, _ = _analyze_json(capsys, str(runs), "--mode", "warn")
    assert code == 0
    flags = _check_flags(document)
    assert flags and {f["severity"] for f in flags} == {"warn"}


def test_analyze_text_report(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The human report would omit the flagged episode or the summary."""
    assert cli.main(["analyze", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "spin-1" in out
    assert "ok-1" not in out  # unflagged episodes are not listed
    assert "2 episodes" in out


def test_analyze_missing_file(tmp_path: Path, runs: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    """A typo'd path would be ignored, with exit 0."""
    missing = tmp_path / "nope.jsonl"
    code = cli.main(["analyze", str(missing), str(runs), "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert f"{missing}: cannot read the file" in err
    assert f"{missing}:0" not in err  # a file is not a malformed line
    document = json.loads(out)
    assert len(document["episodes"]) == 2  # the good file is still analysed
    assert (document["summary"]["malformed_lines"], document["summary"]["unreadable_files"]) \
        == (0, 1)
    cli.main(["analyze", str(missing), str(runs)])
    out = capsys.readouterr().out
    assert "1 file(s) could not be read" in out and "malformed" not in out


WITH_MESSAGES = {
    "episode_id": "chatty-1", "outcome": "failure",
    "steps": [{"type": "message", "role": "user", "content": "find x"},
              _tool("x", "nothing found for x"),
              {"type": "message", "role": "assistant", "content": "let me look again"},
              *[_tool("x", "nothing found for x") for _ in range(4)]],
}


def test_analyze_json_adds_the_call_ordinal_beside_the_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``step`` indexes the steps (messages too); ``call`` counts tool calls only."""
    path = tmp_path / "chatty.jsonl"
    path.write_text(json.dumps(WITH_MESSAGES) + "\n", encoding="utf-8")
    code, document, _ = _analyze_json(capsys, str(path))
    assert code == 0
    flags = _check_flags(document)
    for flag in flags:
        step = WITH_MESSAGES["steps"][flag["step"]]
        assert step["type"] == "tool"
        calls_so_far = sum(1 for s in WITH_MESSAGES["steps"][: flag["step"] + 1]
                           if s["type"] == "tool")
        assert flag["call"] == calls_so_far
        assert flag["action"] in {"warn", "block", "stop"}
    assert (flags[0]["step"], flags[0]["call"]) == (4, 3)


def _edit(old: str, new: str) -> dict[str, Any]:
    # "editor" tells no kind by its name ("edit_file" reads as a write, which oscillation
    # leaves to edit_revert): both detectors see the flip-flop
    return {"type": "tool", "tool": "editor", "args": {"path": "a.py", "old_str": old,
            "new_str": new}, "output": "edited", "status": "ok"}


FLIP_FLOP = {
    "episode_id": "flip-1", "outcome": "failure",
    "steps": [_edit("x", "y"), _edit("y", "x")] * 3,
}


def test_analyze_text_names_calls_warns_blocks_stops_and_each_finding_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each rung of the ladder would be hidden, or a finding that two detectors (edit_revert
    and oscillation) saw at one call shown twice."""
    path = tmp_path / "chatty.jsonl"
    path.write_text(json.dumps(WITH_MESSAGES) + "\n" + json.dumps(FLIP_FLOP) + "\n",
                    encoding="utf-8")
    assert cli.main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "chatty-1  (5 tool calls" in out
    assert "call   3  warn   exact_repeat (exact_repeat)" in out
    assert "call   4  block  exact_repeat (exact_repeat)" in out
    assert "call   5  stop   exact_repeat (exact_repeat)" in out
    assert "call   6  stop   oscillation (edit_revert, oscillation)" in out
    assert "kill" not in out and "step" not in out
    assert "flags by kind: exact_repeat" in out and "flags by detector:" in out


@pytest.mark.parametrize("policy", ['{"nope": 1}', "not json", None],
                         ids=["unknown-key", "not-json", "missing"])
def test_analyze_bad_policy_exits_2(tmp_path: Path, runs: Path, policy: str | None,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A bad --policy would print a traceback or analyse with defaults."""
    path = tmp_path / "policy.json"
    if policy is not None:
        path.write_text(policy, encoding="utf-8")
    code = cli.main(["analyze", str(runs), "--policy", str(path)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert "error" in err and str(path) in err
    assert "Traceback" not in err


def test_analyze_policy_is_applied(tmp_path: Path, runs: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """--policy would be parsed but not used."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"actions": {"exact_repeat": "warn"}}), encoding="utf-8")
    code, document, _ = _analyze_json(capsys, str(runs), "--policy", str(path))
    assert code == 0
    flags = _check_flags(document)
    repeats = [f for f in flags if f["detector"] == "exact_repeat"]
    assert len(repeats) == 3  # the ladder still climbs, one flag a rung ...
    assert {(f["severity"], f["action"]) for f in repeats} == {("warn", "warn")}  # ... capped


def test_analyze_via_python_dash_m(runs: Path) -> None:
    """`python -m loopscope` would not be runnable, or print more than the JSON object."""
    done = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(runs), "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert set(document) == {"episodes", "summary"}
    _check_flags(document)


def test_eval_without_files_scores_the_scenario_library(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The built-in evaluation would be empty or unlabelled."""
    assert cli.main(["eval", "--per-shape", "1"]) == 0
    out = capsys.readouterr().out
    assert "Labelled runs" in out
    assert "loop detection rate" in out
    assert "false-stop rate" in out
    for system in ("loopscope", "naive_3_of_6", "max_steps_10"):
        assert system in out


def test_eval_json_has_the_three_systems(capsys: pytest.CaptureFixture[str]) -> None:
    """Dashboards reading eval --json would miss a system or get invalid JSON."""
    assert cli.main(["eval", "--per-shape", "1", "--json", "--max-steps", "7"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [s["system"] for s in document["systems"]] == ["loopscope", "naive_3_of_6",
                                                           "max_steps_7"]
    assert document["labelled"] > 0
    rate = document["systems"][0]["labelled"]["loop_detection_rate"]
    assert rate["n"] > 0 and 0.0 <= rate["value"] <= 1.0


def test_eval_default_max_steps_system(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The default baseline would not be named max_steps_10."""
    assert cli.main(["eval", str(runs), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {s["system"] for s in document["systems"]} == {"loopscope", "naive_3_of_6",
                                                          "max_steps_10"}
    assert document["episodes"] == 2


def test_demo_runs_in_enforce_mode(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo would crash, or not drive the SDK and print its runs summary."""
    assert cli.main(["demo", "--per-shape", "1", "--mode", "enforce"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    head = next(line for line in lines if " runs, " in line and " spans " in line)
    runs_count, spans_count = int(head.split()[0]), int(head.split(", ")[1].split()[0])
    assert runs_count > 0 and spans_count > runs_count
    rows = [line.split()[0] for line in lines[lines.index(head) + 1:]
            if line.startswith("  ") and line.split()[0] in ("observe", "warn", "enforce")]
    assert rows == ["enforce"]
    assert "loop detection rate" in out


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    return dict(actions[0].choices)


def test_every_subcommand_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    """A subcommand without an example in --help would leave users guessing."""
    names = _subcommands()
    assert {"analyze", "eval", "demo"} <= set(names)
    for name in names:
        with pytest.raises(SystemExit) as info:
            cli.main([name, "--help"])
        assert info.value.code == 0
        assert "Example:" in capsys.readouterr().out, name


def test_no_subcommand_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A bare `loopscope` would crash instead of showing usage."""
    assert cli.main([]) == 2
    assert "analyze" in capsys.readouterr().out


@pytest.mark.parametrize(("given", "why"), [
    ("-1", "a number of bytes is 0 or more, not -1"),
    ("64MB", "not a number of bytes: '64MB'"),
    ("", "not a number of bytes: ''"),
])
def test_a_checkpoint_size_that_is_not_a_byte_count_is_refused_by_name(
        given: str, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``--checkpoint-bytes`` takes a whole number of bytes; anything else is a usage error
    naming the option and what is wrong, before anything is opened."""
    with pytest.raises(SystemExit) as info:
        cli.main(["collector", "--db", ":memory:", "--checkpoint-bytes", given])
    assert info.value.code == 2
    said = capsys.readouterr().err
    assert f"argument --checkpoint-bytes: {why}" in said, said
