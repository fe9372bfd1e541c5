"""Reading recorded runs from files and replaying them through the core.

The core's ``replay`` is pure; this module is the I/O around it: it opens Episode JSONL
files, reports each malformed line as ``file:line`` and skips it, and summarises the
reports ``loopscope analyze`` prints.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .detect import Policy
from .detect.replay import Episode, EpisodeFormatError, EpisodeReport, parse_episode_line, replay

FORMATS = ("auto", "episodes")


@dataclass(frozen=True, slots=True)
class Problem:
    """A line that could not be read: where, and why."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def read_episodes(paths: Sequence[str], *, fmt: str = "auto") -> Iterator[Episode | Problem]:
    """Yield each episode of each file in order, or a ``Problem`` for a line that is not one.

    ``-`` reads standard input. A file that cannot be opened is one ``Problem`` (line 0).
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
            yield Problem(path, 0, f"cannot read: {exc.strerror or exc}")
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
    items: Iterable[Episode | Problem],
    *,
    policy: Policy | None = None,
    mode: str = "enforce",
    progress: TextIO | None = None,
) -> tuple[list[EpisodeReport], list[Problem]]:
    """Replay every episode; collect the reports and the problems, in input order."""
    reports: list[EpisodeReport] = []
    problems: list[Problem] = []
    for item in items:
        if isinstance(item, Problem):
            problems.append(item)
            continue
        reports.append(replay(item, policy, mode=mode))
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
        "malformed_lines": len(problems),
    }


def as_json(
    reports: Sequence[EpisodeReport], problems: Sequence[Problem], *, mode: str | None = None
) -> str:
    """The ``--json`` document: exactly one object with ``episodes`` and ``summary``."""
    return json.dumps(
        {
            "episodes": [r.as_dict() for r in reports],
            "summary": summarize(reports, problems, mode=mode),
        },
        ensure_ascii=False,
    )


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
        lines.append(f"{ep.episode_id}  (outcome: {ep.outcome or 'unknown'}{stop})")
        for flag in report.flags:
            lines.append(
                f"  step {flag.step:>3}  {flag.severity:<4}  {flag.detector:<18} {flag.message}"
            )
        lines.append("")
    s = summarize(reports, problems, mode=mode)
    lines.append(
        f"{s['episodes']} episodes ({s['mode']} mode): {s['flagged']} flagged, "
        f"{s['killed']} with a block or stop, {s['flags']} flags"
    )
    for outcome, row in sorted(s["by_outcome"].items()):
        lines.append(
            f"  {outcome:<8} {row['episodes']:>5} episodes  {row['flagged']:>4} flagged"
            f"  {row['killed']:>4} killed"
        )
    if s["by_kind"]:
        lines.append("  by kind: " + ", ".join(f"{k} {v}" for k, v in s["by_kind"].items()))
    if problems:
        lines.append(f"  {len(problems)} malformed line(s) skipped (see stderr)")
    return "\n".join(lines)
