"""Files read after the fact and judged as live: what ``loopscope analyze`` and the dashboard's
Import read.

``analyze_inputs`` reads Episode JSONL and OTLP JSON files (``read_inputs``; ``auto`` sniffs
each file) and reports each run: Episode JSONL runs replayed through the core, OTLP runs
(``otlp_files``) through the collector's streaming detection, as a live collector judges
them. With a ``store`` (``store.Store``, ``loopscope analyze --db``) everything read is
stored through the collector's pipeline first, and the reports are what its detection found.
The command itself is ``offline.analyze``; this is the library both it and the dashboard's
Import call.

Nothing heavy is imported at import time (``otlp_files`` and ``store`` import the decoder,
DuckDB and the pipeline when a file is read or a store opened).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final, TextIO

from loopscope.detect.episode_records import EpisodeFormatError, EpisodeRecord, parse_episode_line
from loopscope.detect.policy import Policy
from loopscope.detect.replay import EpisodeReport
from loopscope.offline.analysis import Problem, analyze, read_episodes

from .otlp_files import OTLP_KEYS, EpisodeGrouper, detect_runs, read_otlp_file
from .store import Store, StoreCounts
from .synthetic_spans import episode_spans

__all__ = ["FORMATS", "analyze_inputs", "read_inputs"]

FORMATS: Final = ("auto", "episodes", "otlp")
_SNIFF_CHARS: Final = 65_536
_OTLP_IN_EPISODES: Final = ("this is an OTLP JSON line in a file read as Episode JSONL "
                            "(its first line decided); read OTLP files on their own")


def analyze_inputs(
    paths: Sequence[str],
    *,
    fmt: str = "auto",
    policy: Policy | None = None,
    mode: str = "enforce",
    store: Store | None = None,
    progress: TextIO | None = None,
    on_report: Callable[[int, int], None] | None = None,
) -> tuple[list[EpisodeReport], list[Problem], StoreCounts | None]:
    """Read every file and report each run, the way ``loopscope analyze`` does.

    Episode JSONL runs are replayed through the core (messages included) and OTLP runs go
    through the collector's streaming detection, as a live collector judges them. With
    ``store``, everything read is stored through the collector's pipeline, detection runs
    there once, and the reports are what its detection found. ``on_report(done, total)`` is
    called after each run reported.
    """
    grouper = EpisodeGrouper()
    episodes: list[EpisodeRecord] = []
    problems: list[Problem] = []
    for item in read_inputs(paths, fmt=fmt, store=store, progress=progress, grouper=grouper):
        if isinstance(item, Problem):
            problems.append(item)
        else:
            episodes.append(item)
    runs = grouper.runs()
    total = len(episodes) + len(runs)

    def done(count: int) -> None:
        if on_report is not None:
            on_report(count, total)

    if store is not None:
        counts = store.finish([*(e.episode_id for e in episodes),
                               *(run.episode_id for run in runs)])
        reports = []
        for episode in episodes:
            reports.append(store.report(episode, mode=mode))
            done(len(reports))
        for run in runs:
            reports.append(store.report(run.record, mode=mode, steps=run.core_steps(),
                                        numbers=run.numbers))
            done(len(reports))
        return reports, problems, counts
    reports, _ = analyze(episodes, policy=policy, mode=mode, progress=progress, on_report=done)
    for report in detect_runs(runs, policy, mode=mode):
        reports.append(report)
        done(len(reports))
    return reports, problems, None


# -- reading -------------------------------------------------------------------------------


def read_inputs(
    paths: Sequence[str],
    *,
    fmt: str = "auto",
    store: Store | None = None,
    progress: TextIO | None = None,
    grouper: EpisodeGrouper,
) -> Iterator[EpisodeRecord | Problem]:
    """Every Episode JSONL episode of every file, or a ``Problem`` per bad line; OTLP JSON
    spans go into ``grouper`` (a trace may span files, as the collector's file exporter
    rotates them; its runs are complete once every file is read: ``grouper.runs()``). With
    ``store``, everything read is also stored.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    for path in paths:
        lines: list[str] | None = None
        kind = fmt
        if path == "-":
            lines = list(sys.stdin)
        if fmt == "auto":
            kind = _sniff(path, lines)
        if kind == "otlp":
            yield from read_otlp_file(path, lines, grouper, store, progress)
            continue
        source = _episode_lines(path, lines) if lines is not None else read_episodes(
            [path], fmt="episodes")
        service = "stdin" if path == "-" else Path(path).stem
        for ordinal, item in enumerate(source):
            if (fmt == "auto" and isinstance(item, Problem)
                    and item.message.startswith("this is an OTLP JSON line")):
                item = Problem(item.path, item.line, _OTLP_IN_EPISODES)
            if store is not None and isinstance(item, EpisodeRecord):
                store.submit(episode_spans(item, service=service, policy=store.policy,
                                           base_ns=store.started_ns + ordinal * 1_000_000))
            yield item


def _sniff(path: str, lines: list[str] | None) -> str:
    """``otlp`` when the file's first line is an OTLP export (or it is one JSON document)."""
    if lines is not None:
        head = "".join(lines)[:_SNIFF_CHARS]
    else:
        try:
            with Path(path).open(encoding="utf-8-sig", errors="replace") as handle:
                head = handle.read(_SNIFF_CHARS)  # a bad byte is reported by its line later
        except OSError:
            return "episodes"  # read_episodes reports it as FILE:0
    first = next((line for line in head.splitlines() if line.strip()), "")
    try:
        doc = json.loads(first)
    except ValueError:  # a pretty-printed document, or a broken / truncated line
        return "otlp" if any(key in head for key in OTLP_KEYS) else "episodes"
    if isinstance(doc, dict) and ("resourceSpans" in doc or "resource_spans" in doc):
        return "otlp"
    return "episodes"


def _episode_lines(path: str, lines: Iterable[str]) -> Iterator[EpisodeRecord | Problem]:
    """Episode JSONL from lines already read (standard input), as ``read_episodes`` does."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield parse_episode_line(line)
        except EpisodeFormatError as exc:
            message = str(exc)
            if any(key in line[:200] for key in OTLP_KEYS):
                message = _OTLP_IN_EPISODES
            yield Problem(path, number, message)
