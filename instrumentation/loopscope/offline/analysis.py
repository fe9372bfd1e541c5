"""Reading recorded runs from files and replaying them through the core.

The core's ``replay`` is pure; this module is the I/O around it: it opens Episode JSONL
files, reports each malformed line as ``file:line`` and skips it, and summarises the
reports ``loopscope analyze`` prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..detect import Policy
from ..detect.episode_records import EpisodeFormatError, EpisodeRecord, parse_episode_line
from ..detect.readings import Readings
from ..detect.replay import EpisodeReport, replay
from ..detect.steps import ToolStep

FORMATS = ("auto", "episodes")


@dataclass(frozen=True, slots=True)
class AnalyzeInputs:
    """What an installed package adds to ``loopscope analyze``: input formats and options.

    The SDK owns the command; a package (the collector: OTLP JSON and ``--db``) offers one of
    these through the ``loopscope.analyze`` entry point. Its formats join ``--format``, its
    help joins the command's, ``add_arguments`` adds its options, and ``run`` then runs the
    command, Episode JSONL included.
    """

    formats: tuple[str, ...]
    """The ``--format`` choices it adds (``auto`` and ``episodes`` are always there)."""
    format_help: str
    files_help: str
    command_help: str
    """The one-line help of ``analyze`` in ``loopscope --help``."""
    description: str
    """Paragraphs added to ``analyze --help`` before the examples."""
    example: str
    """Example lines added to ``analyze --help``."""
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


@dataclass(frozen=True, slots=True)
class Problem:
    """A line that could not be read, or a file (``line`` None) that could not be opened."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"


def read_episodes(paths: Sequence[str], *, fmt: str = "auto") -> Iterator[EpisodeRecord | Problem]:
    """Yield each episode of each file in order, or a ``Problem`` for a line that is not one.

    ``-`` reads standard input. A file that cannot be opened is one ``Problem`` whose
    ``line`` is None.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    for path in paths:
        bad: list[Problem] = []
        try:
            stream: Iterable[str] = sys.stdin if path == "-" else decoded_lines(path, bad)
            for number, line in enumerate(stream, start=1):
                yield from bad
                bad.clear()
                if not line.strip():
                    continue
                try:
                    yield parse_episode_line(line)
                except EpisodeFormatError as exc:
                    yield Problem(path, number, _explain(line, str(exc)))
        except OSError as exc:
            yield Problem(path, None, f"cannot read the file: {exc.strerror or exc}")
        yield from bad


def decoded_lines(path: str, problems: list[Problem]) -> Iterator[str]:
    """The lines of a UTF-8 text file, decoded one at a time (a leading byte-order mark is
    dropped). A line that is not UTF-8 is added to ``problems`` with its number and read as
    an empty line, so one bad byte costs one line, not the rest of the file."""
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(Problem(path, number, f"not UTF-8 text: {exc.reason} at byte "
                                                      f"{exc.start} of the line"))
                yield "\n"


def _explain(line: str, message: str) -> str:
    stripped = line.lstrip()
    if stripped.startswith("{") and '"resourceSpans"' in stripped[:200]:
        return "this is an OTLP JSON line; only Episode JSONL is read here (--format episodes)"
    return message


def analyze(
    items: Iterable[EpisodeRecord | Problem],
    *,
    policy: Policy | None = None,
    mode: str = "enforce",
    progress: TextIO | None = None,
    on_report: Callable[[int], None] | None = None,
) -> tuple[list[EpisodeReport], list[Problem]]:
    """Replay every episode; collect the reports and the problems, in input order.
    ``on_report(done)`` is called after each episode."""
    reports: list[EpisodeReport] = []
    problems: list[Problem] = []
    readings = Readings()  # (an output read in one run is not read again in another)
    for item in items:
        if isinstance(item, Problem):
            problems.append(item)
            continue
        reports.append(replay(item, policy, mode=mode, readings=readings))
        if on_report is not None:
            on_report(len(reports))
        if progress is not None and len(reports) % 200 == 0:
            progress.write(f"\ranalysed {len(reports)} episodes…")
            progress.flush()
    if progress is not None and len(reports) >= 200:
        progress.write(f"\ranalysed {len(reports)} episodes.\n")
    return reports, problems


def summarize(
    reports: Sequence[EpisodeReport], problems: Sequence[Problem], *, mode: str | None = None
) -> dict[str, Any]:
    """Counts over the reports: flagged and killed episodes, by kind, detector and outcome."""
    by_kind: Counter[str] = Counter()
    by_detector: Counter[str] = Counter()
    by_outcome: dict[str, dict[str, int]] = {}
    for report in reports:
        for flag in report.flags:
            by_kind[flag.kind] += 1
            by_detector[flag.detector] += 1
        row = by_outcome.setdefault(
            report.episode.outcome or "unknown", {"episodes": 0, "flagged": 0, "killed": 0}
        )
        row["episodes"] += 1
        row["flagged"] += bool(report.flags)
        row["killed"] += report.first_kill is not None
    return {
        "mode": reports[0].mode if reports else mode,
        "episodes": len(reports),
        "flagged": sum(1 for r in reports if r.flags),
        "killed": sum(1 for r in reports if r.first_kill is not None),
        "flags": sum(len(r.flags) for r in reports),
        "by_kind": dict(by_kind.most_common()),
        "by_detector": dict(by_detector.most_common()),
        "by_outcome": by_outcome,
        "malformed_lines": sum(1 for p in problems if p.line is not None),
        "unreadable_files": sum(1 for p in problems if p.line is None),
    }


def as_json(
    reports: Sequence[EpisodeReport], problems: Sequence[Problem], *, mode: str | None = None
) -> str:
    """The ``--json`` document: exactly one object with ``episodes`` and ``summary``.

    Each flag keeps ``step`` (the index into the episode's ``steps``, messages included) and
    adds ``call`` (``EpisodeReport.call_at``: the number of that step's call; for a message,
    of the call that would follow it) and ``action`` (warn, block or stop: what the chosen
    mode's guard does there)."""
    episodes = []
    for report in reports:
        document = report.as_dict()
        for flag, shown in zip(report.flags, document["flags"], strict=True):
            shown["call"] = report.call_at(flag.step)
            shown["action"] = flag.action if flag.severity == "kill" else "warn"
        episodes.append(document)
    return json.dumps(
        {"episodes": episodes, "summary": summarize(reports, problems, mode=mode)},
        ensure_ascii=False,
    )


def _distinct(flags: Sequence[Any]) -> list[tuple[Any, list[str]]]:
    """The flags one per (step, kind): the strongest, with the other detectors that saw the
    same thing at the same step (edit_revert and oscillation fire together)."""
    grouped: dict[tuple[int, str], list[Any]] = {}
    for flag in flags:
        grouped.setdefault((flag.step, flag.kind), []).append(flag)
    shown = []
    for same in grouped.values():
        lead = max(same, key=lambda f: (f.severity == "kill", _RANK.get(f.action, 0)))
        shown.append((lead, [f.detector for f in same if f is not lead]))
    return shown


_RANK = {"warn": 1, "block": 2, "stop": 3}


def as_text(
    reports: Sequence[EpisodeReport], problems: Sequence[Problem], *, mode: str | None = None
) -> str:
    """The human report: flagged episodes with their flags, then the summary."""
    lines: list[str] = []
    for report in reports:
        if not report.flags:
            continue
        ep = report.episode
        stop = f", would stop: {report.stop.stop_reason}" if report.stop else ""
        lines.append(f"{ep.episode_id}  ({report.tool_calls} tool calls, outcome: "
                     f"{ep.outcome or 'unknown'}{stop})")
        for flag, also in _distinct(report.flags):
            call = (report.call_at(flag.step) if 0 <= flag.step < len(report.steps)
                    and isinstance(report.steps[flag.step], ToolStep) else None)
            where = f"call {call:>3}" if call is not None else f"msg @{flag.step:>3}"
            action = flag.action if flag.severity == "kill" else "warn"
            seen = f"{flag.kind} ({', '.join([flag.detector, *also])})"
            lines.append(f"  {where}  {action:<5}  {seen:<40} {flag.message}")
        lines.append("")
    s = summarize(reports, problems, mode=mode)
    lines.append(
        f"{s['episodes']} episodes ({s['mode']} mode): {s['flagged']} flagged, "
        f"{s['killed']} with a block or stop, {s['flags']} flags"
    )
    for outcome, row in sorted(s["by_outcome"].items()):
        lines.append(
            f"  {outcome:<8} {row['episodes']:>5} episodes  {row['flagged']:>4} flagged"
            f"  {row['killed']:>4} blocked or stopped"
        )
    if s["by_kind"]:
        lines.append("  flags by kind: "
                     + ", ".join(f"{k} {v}" for k, v in s["by_kind"].items()))
    if s["by_detector"]:
        lines.append("  flags by detector: "
                     + ", ".join(f"{k} {v}" for k, v in s["by_detector"].items()))
    if s["malformed_lines"]:
        lines.append(f"  {s['malformed_lines']} malformed line(s) skipped (see stderr)")
    if s["unreadable_files"]:
        lines.append(f"  {s['unreadable_files']} file(s) could not be read (see stderr)")
    return "\n".join(lines)
