"""``loopscope``: the one console command. Subcommands live with the code they run.

The agent-side commands (analyze, eval, demo) need only the base install, so this module
uses argparse from the standard library. Other packages add their subcommands through
``register(subparsers)`` when they are installed (the collector and dashboard extras).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Final

from ..detect.events import MODES
from ..exit_codes import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE

DEMO_TOOL_CALL_BUDGET = 40

ANALYZE_HELP = """\
Run the detection core over recorded runs and report what the guard would flag.

Reads Episode JSONL (one run per line; see docs/episode-format.md). A malformed line is
reported on stderr as FILE:LINE and skipped, a file that cannot be read as FILE; the exit
status is then 1. The text report names calls by their tool-call ordinal ("call 3" is the
run's third tool call) and shows each finding once, with every detector that saw it.

With --json, stdout is exactly one JSON object:
  {"episodes": [{"episode_id", "outcome", "flags": [{"step", "call", "detector", "kind",
   "severity", "action"}]}], "summary": {...}}
"step" is the 0-based index into the episode's steps (messages included); "call" is the
tool-call ordinal of that step (1 for the first tool call; null for a message); severity
"kill" means the policy of the chosen mode would block or stop there, and "action" says
which (warn, block, stop; "warn" mode never kills).

Example:
  loopscope analyze ../shared/data/taubench_gpt-4o_airline.jsonl
  loopscope analyze runs.jsonl --mode observe --json > report.json
"""

EVAL_HELP = """\
Score the detector against two baselines on the same runs, in one pass.

Labelled runs (label.loop true/false) give the loop-detection rate and the false-stop
rate with n and Wilson 95% intervals, detection delay and a per-kind table. Unlabelled
runs with an outcome give stops on successful runs, flags on failed runs, cost per
successful task and the cost spent after the first flag. Baselines: naive (same tool +
arguments 3 of the last 6 calls) and max-steps (a global cap of --max-steps calls).
With no FILE, the built-in scenario library is evaluated.

Given labelled files (each one a set, as ../shared/eval/dev-*.jsonl), it also scores each
set and all together as the sets' README says: loops caught, false stops (a block or stop
on a look-alike, or before the loop began; with the runs named), false warnings, caught
loops ended by the third step after their first flag, and each detector's precision (its
blocks and stops that landed on a loop).

Example:
  loopscope eval
  loopscope eval ../shared/eval/dev-*.jsonl
  loopscope eval ../shared/data/*.jsonl --json
"""

CALIBRATE_HELP = """\
Search the policy that catches the most labelled loops with zero false stops.

Every finding carries the evidence it rests on (docs/detection.md, "Evidence"): a kind
declared or guessed, outputs equal or only similar, a deadline stated or the default, ...
Calibration replays the runs in enforce mode and lets each evidence source block or stop
only if it never stopped a healthy run (a labelled look-alike, a loop before it began, or a
successful run that went on making progress); a source with a false stop on record may
only warn, and a warning that changes nothing still stops the run after ignored_calls
calls without progress (searched too). It prints what each source did, the false-stop
bound that zero stops in n healthy runs gives (0 of 113: at most 3.2% at 95%), and the
policy; fewer than 5 labelled loops or 20 healthy runs are refused as too few.

The default policy is this command's result over every labelled run we have:
  loopscope calibrate tests/corpus/corpus.jsonl ../shared/eval/dev-*.jsonl ../shared/data/*.jsonl

Example:
  loopscope calibrate my-labelled-runs.jsonl --out policy.json
  loopscope analyze runs.jsonl --policy policy.json
"""

DEMO_HELP = """\
Drive scripted demo agents from the scenario library through the real SDK.

Every scenario (healthy runs, read spins, oscillation, parameter jitter, legitimate
polling, write timeouts with reconciles, budget stops, ...) runs as an agent in each
guard mode; spans go to --endpoint over OTLP/HTTP, or stay in memory when none is
given. Then the scenario library is evaluated (as `loopscope eval`).

Example:
  loopscope demo
  loopscope demo --endpoint http://127.0.0.1:4318 --mode enforce
  loopscope demo --endpoint http://127.0.0.1:4318 --forever --pace 0.05
"""


def _policy(path: str | None) -> Any:
    from ..policy_file import load_policy

    return load_policy(path) if path else None


def _add_policy(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="JSON file of policy settings (thresholds, budgets, K per task "
        "type; unset fields keep the defaults of loopscope.detect.Policy)",
    )


def cmd_analyze(args: argparse.Namespace) -> int:
    """``loopscope analyze`` over Episode JSONL (what the base install reads)."""
    from .analysis import analyze, as_json, as_text, read_episodes

    reports, problems = analyze(
        read_episodes(args.files, fmt=args.format),
        policy=_policy(args.policy),
        mode=args.mode,
        progress=sys.stderr if sys.stderr.isatty() and not args.json else None,
    )
    for problem in problems:
        print(f"loopscope analyze: {problem}", file=sys.stderr)
    render = as_json if args.json else as_text
    print(render(reports, problems, mode=args.mode))
    return EXIT_BAD_INPUT if problems else EXIT_OK


def cmd_eval(args: argparse.Namespace) -> int:
    """``loopscope eval``."""
    from ..detect.episode_records import parse_episode
    from .analysis import analyze, read_episodes
    from .evaluation import as_text, evaluate
    from .scoring import as_text as sets_text
    from .scoring import overall, score_runs

    policy = _policy(args.policy)
    reports: list[Any] = []
    problems: list[Any] = []
    sets = []
    if args.files:
        for path in args.files:  # (one labelled set per file)
            got, bad = analyze(read_episodes([path]), policy=policy, mode=args.mode)
            reports += got
            problems += bad
            score = score_runs(Path(path).stem if path != "-" else "stdin", got)
            if score.loops or score.healthy:
                sets.append(score)
    else:
        from .scenarios import generate

        items = [parse_episode(e) for e in generate(seed=args.seed, per_shape=args.per_shape)]
        reports, problems = analyze(items, policy=policy, mode=args.mode)
    for problem in problems:
        print(f"loopscope eval: {problem}", file=sys.stderr)
    result = evaluate(reports, max_steps=args.max_steps)
    if sets:
        result["sets"] = [s.as_dict() for s in sets]
        result["sets_overall"] = overall(sets).as_dict()
    if args.json:
        print(json.dumps(result))
    else:
        print(as_text(result))
        if sets:
            print()
            print(sets_text(sets))
    return EXIT_BAD_INPUT if problems else EXIT_OK


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``loopscope calibrate``."""
    from .analysis import Problem, read_episodes
    from .calibration import TooFewLabels, as_text, calibrate

    episodes: list[Any] = []
    problems: list[Any] = []
    for item in read_episodes(args.files):
        (problems if isinstance(item, Problem) else episodes).append(item)
    for problem in problems:
        print(f"loopscope calibrate: {problem}", file=sys.stderr)
    source = _labelled_runs()
    if source is not None:
        episodes += source.episodes(args) or []
    if not episodes:
        raise ValueError("no runs to calibrate on: give Episode JSONL files with labelled runs"
                         + (" or a store (--db / --lake)" if source is not None else ""))
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if not args.quiet else None
    try:
        result = calibrate(episodes, _policy(args.policy), progress=say)
    except TooFewLabels as exc:
        print(f"loopscope calibrate: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    settings = result.settings()
    if args.policy:  # (the base file's other settings stay)
        base = json.loads(Path(args.policy).read_text(encoding="utf-8"))
        settings = {**base, **settings}
    text = json.dumps(settings, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        print(json.dumps({"policy": settings, "caught": result.score.caught,
                          "loops": result.loops, "healthy": result.healthy,
                          "false_kills": result.false_kills,
                          "false_kill_bound_95": round(result.bound, 4),
                          "ended": result.score.ended, "goes_on": result.score.goes_on,
                          "tried": result.tried,
                          "sources": {name: {"on_loops": row.on_loops,
                                             "false_kills": row.false_kills,
                                             "highest_action": result.caps.get(name, "stop")}
                                      for name, row in sorted(result.sources.items())}}))
    else:
        print(as_text(result))
        print(f"\npolicy written to {args.out}" if args.out else "\n" + text.rstrip())
    return EXIT_BAD_INPUT if problems else EXIT_OK


def _labelled_runs() -> Any:
    """The ``LabelledRuns`` an installed package offers (the collector's stores), or None."""
    for entry in entry_points(group="loopscope.labelled_runs"):
        try:
            return entry.load()
        except Exception as exc:  # a broken plug-in leaves calibration from files working
            print(f"loopscope: labelled runs {entry.name!r} are unavailable: {exc}",
                  file=sys.stderr)
    return None


def cmd_demo(args: argparse.Namespace) -> int:
    """``loopscope demo``: the scripted agents loop on purpose, so no "enforce would stop"
    line per observe / warn run (the logger's level is put back after, for a caller that
    runs the command in its own process)."""
    log = logging.getLogger("loopscope")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        return _demo(args)
    finally:
        log.setLevel(level)


def _demo(args: argparse.Namespace) -> int:
    from .. import _config, _instrument
    from .demo import drive_all
    from .scenarios import generate

    modes = MODES if args.mode == "all" else (args.mode,)
    if args.forever and not args.endpoint:
        raise ValueError("--forever sends live traffic to a collector: give --endpoint URL")
    scripts = generate(seed=args.seed, per_shape=args.per_shape)
    policy = {"budgets": {"tool_calls": DEMO_TOOL_CALL_BUDGET}}
    # The scripts' tasks, arguments and outputs are synthetic: capture them, so the dashboard
    # shows the demo in words rather than hashes (a real agent opts in: capture_content).
    if args.endpoint:
        _instrument.instrument(service_name="loopscope-demo", endpoint=args.endpoint, policy=policy,
                               capture_content=True)
        where = f"exported to {args.endpoint}"
    else:
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        _instrument.instrument(
            service_name="loopscope-demo",
            policy=policy,
            capture_content=True,
            span_processor=SimpleSpanProcessor(exporter),
        )
        where = "kept in memory (pass --endpoint to send them to a collector)"
    if args.forever:
        return _demo_forever(args, scripts, modes, where)

    print(f"driving {len(scripts)} scripted agents in {', '.join(modes)} mode…", file=sys.stderr)
    totals = drive_all(scripts, modes)
    if args.endpoint:
        from opentelemetry import trace

        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
        spans = _config.export_stats()["exported"]
    else:
        spans = len(exporter.get_finished_spans())
    print(f"{len(totals.runs)} runs, {spans} spans {where}")
    for mode, row in totals.by_mode().items():
        reasons = ", ".join(f"{k} {v}" for k, v in row["stop_reasons"].items())
        print(
            f"  {mode:<8} {row['runs']} runs, {row['calls']} tool calls, "
            f"{row['blocked']} blocked; ended: {reasons}"
        )
    print(
        f"(demo agents run with a budget of {DEMO_TOOL_CALL_BUDGET} tool calls; the "
        "evaluation below uses the default policy, which has no budgets)"
    )
    print()
    args.files, args.json, args.max_steps, args.policy = [], False, 10, None
    args.mode = "enforce"
    return cmd_eval(args)


def _demo_forever(args: argparse.Namespace, scripts: Any, modes: Any, where: str) -> int:
    import threading

    from .. import _config
    from .demo import drive_forever

    stop = threading.Event()
    count = [0]

    def report(run: Any) -> None:
        count[0] += 1
        if count[0] % 25 == 0:
            stats = _config.export_stats()
            print(f"demo: {count[0]} runs, {stats['exported']} spans exported, "
                  f"{stats['dropped']} dropped", file=sys.stderr, flush=True)

    print(f"demo: scripted agents running until Ctrl-C, spans {where}", file=sys.stderr,
          flush=True)
    try:
        drive_forever(scripts, modes, pace=args.pace, stop=stop, on_run=report)
    except KeyboardInterrupt:
        stop.set()
    from opentelemetry import trace

    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush is not None:  # what is still queued goes out now, then the final count; within
        # 5 s (OpenTelemetry's batch processor does not bound its flush): the rest is counted
        # by the flush at exit
        flusher = threading.Thread(target=flush, name="loopscope-demo-flush", daemon=True)
        flusher.start()
        flusher.join(5.0)
    stats = _config.export_stats()
    print(f"demo: stopped after {count[0]} runs, {stats['exported']} spans exported, "
          f"{stats['dropped']} dropped", file=sys.stderr, flush=True)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The ``loopscope`` argument parser with every installed subcommand."""
    parser = argparse.ArgumentParser(
        prog="loopscope",
        description="Catch LLM agents stuck in tool-call loops.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    inputs = _analyze_inputs()
    description = ANALYZE_HELP
    if inputs is not None:
        head, marker, examples = ANALYZE_HELP.partition("Example:\n")
        description = head + inputs.description + marker + examples + inputs.example
    p = sub.add_parser(
        "analyze",
        help=inputs.command_help if inputs else "report loops in recorded runs (Episode JSONL)",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help=inputs.files_help if inputs else "Episode JSONL file(s); - for stdin")
    p.add_argument(
        "--format",
        choices=("auto", "episodes", *(inputs.formats if inputs else ())),
        default="auto",
        help=inputs.format_help if inputs else "input format (default: auto)",
    )
    p.add_argument(
        "--mode",
        choices=MODES,
        default="enforce",
        help="guard mode whose decisions are reported (default: enforce)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    _add_policy(p)
    if inputs is not None:
        inputs.add_arguments(p)
    p.set_defaults(func=inputs.run if inputs else cmd_analyze)

    p = sub.add_parser(
        "eval",
        help="detection and false-stop rates vs. baselines",
        description=EVAL_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="Episode JSONL file(s); default: the scenario library",
    )
    p.add_argument("--mode", choices=MODES, default="enforce")
    p.add_argument(
        "--max-steps", type=int, default=10, help="cap of the max-steps baseline (default: 10)"
    )
    p.add_argument("--seed", type=int, default=0, help="scenario library seed (default: 0)")
    p.add_argument(
        "--per-shape", type=int, default=3, help="scenario variants per shape (default: 3)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    _add_policy(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser(
        "calibrate",
        help="the policy that catches the most labelled loops with no false stop",
        description=CALIBRATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="Episode JSONL file(s) of labelled runs (label.loop true/false) and "
                        "successful runs (outcome success)")
    p.add_argument("--out", metavar="FILE", help="write the policy file here (default: print it)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--policy", metavar="FILE",
                   help="base policy file: its settings are kept, its evidence caps and "
                        "ignored_calls calibrated anew")
    labelled = _labelled_runs()
    if labelled is not None:
        labelled.add_arguments(p)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser(
        "demo",
        help="run scripted demo agents through the real SDK",
        description=DEMO_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--endpoint", help="collector OTLP/HTTP base URL (default: keep spans in memory)"
    )
    p.add_argument("--mode", choices=(*MODES, "all"), default="all")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per-shape", type=int, default=2)
    p.add_argument("--forever", action="store_true",
                   help="keep driving agents, round after round, until Ctrl-C (live traffic "
                        "for a dashboard); no evaluation at the end")
    p.add_argument("--pace", type=float, default=0.0, metavar="SECONDS",
                   help="pause before each tool call, so runs unfold live (default: 0)")
    p.set_defaults(func=cmd_demo)
    for entry in entry_points(group="loopscope.commands"):  # the collector, the dashboard
        try:
            entry.load()(sub)
        except Exception as exc:  # a broken plug-in must not take the other commands down
            print(f"loopscope: subcommand {entry.name!r} is unavailable: {exc}", file=sys.stderr)
    return parser


def _analyze_inputs() -> Any:
    """The ``AnalyzeInputs`` an installed package offers (``loopscope.analyze`` entry
    point: the collector's OTLP JSON and ``--db``), or None."""
    for entry in entry_points(group="loopscope.analyze"):
        try:
            return entry.load()
        except Exception as exc:  # a broken plug-in leaves the Episode JSONL analyze working
            print(f"loopscope: analyze input {entry.name!r} is unavailable: {exc}",
                  file=sys.stderr)
    return None


def _version() -> str:
    from .. import __version__

    return f"loopscope {__version__}"


EXTRA_OF: Final = {
    "duckdb": "collector", "pyarrow": "collector", "grpc": "collector", "uvicorn": "collector",
    "h11": "collector", "streamlit": "dashboard", "plotly": "dashboard", "pandas": "dashboard",
}
"""Which extra brings a module a command may miss (``main``'s message names it)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``loopscope`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except ValueError as exc:  # bad settings: a clear message, not a traceback
        print(f"loopscope {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:  # a command whose extra is not installed
        extra = EXTRA_OF.get((exc.name or "").split(".")[0], "all")
        if extra == "collector" and (args.command == "lake" or getattr(args, "lake", None)):
            extra = "lake"  # (a lake needs the DuckDB its extensions are built for)
        print(f"loopscope {args.command}: error: {exc.name or 'a dependency'} is missing; "
              f"this command needs the {extra} extra: pip install 'loopscope[{extra}]'",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
