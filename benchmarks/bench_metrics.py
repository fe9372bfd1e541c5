"""How long ``loopscope metrics`` takes over a store of 1,000,000 tool calls.

Builds a temporary DuckDB store with SQL ``range()`` (not through the pipeline): 50,000
episodes of 20 calls over 5 services, 7 agents, 4 models and 12 tools; ~10% of episodes
flagged (half of those killed, some by an in-process guard in observe mode), outcomes, explicit
costs on half the episodes, per-call costs or tokens on the others, 2,000 human labels,
20,000 UNKNOWN writes (10% unresolved), and the spans they came from: each run's root (its
task) and a span per call (its tool and signature as attributes; 1,050,000 spans for the
Spans page). Then times ``compute_metrics`` (median of 5) against a
baseline on the same file in the same run, ``select count(*) from tool_calls``, and prints both
and their ratio. The target is under 200 ms.

    .venv/bin/python benchmarks/bench_metrics.py [--calls 1000000] [--runs 5] [--keep FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CALLS_PER_EPISODE = 20
BASE_NS = 1_750_000_000 * 1_000_000_000  # mid-2025


def build_store(path: Path, calls: int) -> None:
    """Fill a fresh store at ``path`` with ``calls`` tool calls and everything around them."""
    from loopscope_collector.storage import open_database

    db = open_database(path)
    cur = db.con

    class _Con:
        @staticmethod
        def execute(sql: str, params: dict[str, Any]) -> None:
            cur.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})

    con = _Con()
    episodes = calls // CALLS_PER_EPISODE
    p = {"calls": calls, "eps": episodes, "per": CALLS_PER_EPISODE, "base": BASE_NS}
    # an episode e is flagged when e % 10 = 0 (first flag at call 10), killed when e % 20 = 0
    con.execute("""
        insert into episodes (episode_id, service, agent, model, task_type, trace_id, outcome,
            stop_reason, guard_mode, convention, start_ns, end_ns, tool_calls, input_tokens,
            output_tokens, cost_usd)
        select 'ep' || e, 'svc' || (e % 5), 'agent' || (e % 7),
               ['gpt-4o', 'gpt-4o-mini-2024-07-18', 'claude-sonnet-4', 'local-llm'][(e // 2) % 4 + 1],
               'task', lpad(to_hex(e), 32, '0'),
               case when e % 20 = 0 then 'failure' when e % 3 = 0 then 'failure'
                    when e % 17 = 0 then 'unknown' else 'success' end,
               case when e % 20 = 0 then 'no_progress' else 'completed' end,
               case when e % 40 = 0 then 'observe' else 'enforce' end, 'loopscope',
               $base + e * 60_000_000_000, $base + e * 60_000_000_000 + $per::bigint * 1_000_000_000,
               $per, 1000 * $per::bigint, 200 * $per::bigint,
               case when e % 2 = 0 then 0.01 + (e % 13) * 0.003 end
        from range($eps) r(e)
    """, p)
    con.execute("""
        insert into tool_calls (trace_id, span_id, episode_id, service, agent, model, tool,
            call_id, kind, step, start_ns, end_ns, convention, signature, output_hash, status,
            idempotency_key, write_status, tokens_in, tokens_out, cost_usd, collector_progress,
            collector_streak)
        select lpad(to_hex(e), 32, '0'), lpad(to_hex(i), 16, '0'), 'ep' || e, 'svc' || (e % 5),
               'agent' || (e % 7),
               ['gpt-4o', 'gpt-4o-mini-2024-07-18', 'claude-sonnet-4', 'local-llm'][(e // 2) % 4 + 1],
               'tool' || ((e * 7 + s * 3) % 12), 'c' || i,
               case when s % 5 = 4 then 'write' else 'read' end, s,
               $base + e * 60_000_000_000 + s * 1_000_000_000,
               $base + e * 60_000_000_000 + s * 1_000_000_000 + 500_000_000,
               'loopscope', md5(((e * 7 + s) % 50)::varchar), md5(i::varchar), 'ok',
               case when s % 5 = 4 then 'k' || i end, case when s % 5 = 4 then 'ok' end,
               1000, 200, case when e % 4 = 1 then 0.0004 end,
               case when e % 10 = 0 and s >= 10 then 'none'
                    when s % 6 = 5 then 'waiting' else 'new_output' end,
               case when e % 10 = 0 and s >= 10 then s - 9 else 0 end
        from (select i, i // $per as e, i % $per as s from range($calls) r(i))
    """, p)
    con.execute("""
        insert into detections (episode_id, trace_id, span_id, ordinal, detector, kind, severity,
            action, message)
        select 'ep' || e, lpad(to_hex(e), 32, '0'), lpad(to_hex(e * $per + s), 16, '0'), s,
               d.detector, d.kind, case when e % 20 = 0 and s = 12 then 'kill' else 'warn' end,
               case when e % 20 = 0 and s = 12 then 'stop' else 'warn' end, 'flagged'
        from range(0, $eps, 10) r(e), (values (10), (12)) steps(s),
             (values ('repeated_tool_call', 'exact_repeat'), ('no_progress', 'stagnation'))
                 d(detector, kind)
        where (e % 20 = 0 or s = 10) and (d.detector = 'no_progress' or e % 30 = 0)
    """, p)
    con.execute("""
        insert into guard_decisions (trace_id, span_id, episode_id, service, tool, mode, action,
            decision, reason, flags, time_ns)
        select lpad(to_hex(e), 32, '0'), lpad(to_hex(e * $per + 13), 16, '0'), 'ep' || e,
               'svc' || (e % 5), 'tool1', 'observe', 'allow', 'stop', 'no progress',
               ['no_progress'], $base + e * 60_000_000_000 + 13_000_000_000
        from range(0, $eps, 40) r(e)
    """, p)
    con.execute("""
        insert into labels (episode_id, span_id, label)
        select 'ep' || e, '', case when e % 10 = 0 or e % 7 = 1 then 'true_loop' else 'no_loop' end
        from range(0, $eps, 25) r(e)
    """, p)
    con.execute("""
        insert into unknown_writes (idempotency_key, episode_id, service, tool, trace_id,
            span_id, unknown_at_ns, resolved_at_ns, resolution)
        select 'k' || (e * $per + 4), 'ep' || e, 'svc' || (e % 5), 'tool' || (e % 12),
               lpad(to_hex(e), 32, '0'), lpad(to_hex(e * $per + 4), 16, '0'),
               $base + e * 60_000_000_000 + 4_500_000_000,
               case when e % 10 <> 3 then
                   $base + e * 60_000_000_000 + 4_500_000_000 + (1 + e % 97) * 250_000_000 end,
               case when e % 10 <> 3 then 'reconciled_found' end
        from range(0, $eps, greatest($eps // 20000, 1)) r(e)
    """, p)
    con.execute("""
        insert into spans (trace_id, span_id, parent_span_id, name, service, start_ns, end_ns,
            kind, status_code, attributes, resource)
        select lpad(to_hex(e), 32, '0'), 'f' || lpad(to_hex(e), 15, '0'), '', 'invoke_agent',
               'svc' || (e % 5), $base + e * 60_000_000_000,
               $base + e * 60_000_000_000 + $per::bigint * 1_000_000_000, 1, 1,
               json_object('gen_ai.operation.name', 'invoke_agent', 'loopscope.episode.id',
                           'ep' || e, 'loopscope.task', 'task ' || e % 97),
               json_object('service.name', 'svc' || (e % 5))
        from range($eps) r(e)
    """, p)
    con.execute("""
        update episodes set root_span_id = 'f' || lpad(to_hex(episode_id[3:]::bigint), 15, '0')
    """, p)
    con.execute("""
        insert into spans (trace_id, span_id, parent_span_id, name, service, start_ns, end_ns,
            kind, status_code, attributes, resource)
        select t.trace_id, t.span_id, 'f' || lpad(to_hex(t.episode_id[3:]::bigint), 15, '0'),
               'execute_tool ' || t.tool, t.service, t.start_ns,
               -- durations of 20 ms to 2 s, by tool and call (the latency percentiles)
               t.start_ns + (20 + (hash(t.span_id) % 100) * (1 + t.tool[5:]::int)) * 1_000_000,
               1, case when t.step % 50 = 49 then 2 else 1 end,
               json_object('gen_ai.operation.name', 'execute_tool', 'gen_ai.tool.name', t.tool,
                           'loopscope.tool.signature', t.signature, 'loopscope.episode.id',
                           t.episode_id, 'loopscope.step', t.step),
               json_object('service.name', t.service)
        from tool_calls t
    """, p)
    try:  # the runs' call facts (schema version 16), as the collector keeps them
        from loopscope_collector.storage.writes.episodes import recount_calls
    except ImportError:  # a checkout from before them: nothing to count
        pass
    else:
        cur.execute("begin transaction")
        recount_calls(cur, None)
        cur.execute("commit")
    db.close()


def median_ms(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """Median wall time of ``runs`` calls after one warm-up, and the last result."""
    result = fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", metavar="FILE", help="build the store here and keep it")
    args = parser.parse_args(argv)

    from loopscope_collector.metrics.compute import compute_metrics
    from loopscope_collector.storage import open_database

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "bench.duckdb"
        if path.exists():
            path.unlink()
        start = time.perf_counter()
        build_store(path, args.calls)
        build_s = time.perf_counter() - start
        db = open_database(path, read_only=True)
        try:
            def baseline() -> Any:
                cur = db.cursor()
                try:
                    return cur.execute("select count(*) from tool_calls").fetchone()
                finally:
                    cur.close()

            def scan() -> Any:
                cur = db.cursor()
                try:
                    return cur.execute("select episode_id, count(*), sum(cost_usd)"
                                       " from tool_calls group by 1").fetchall()
                finally:
                    cur.close()

            base_ms, count = median_ms(baseline, args.runs)
            scan_ms, _ = median_ms(scan, args.runs)
            metrics_ms, report = median_ms(lambda: compute_metrics(db), args.runs)
            filtered_ms, _ = median_ms(
                lambda: compute_metrics(db, service="svc1", tool="tool3"), args.runs)
        finally:
            db.close()
    print(f"store: {count[0]:,} tool calls, {report['episodes']:,} episodes, "
          f"{report['loops_detected']:,} flagged, {report['kills']:,} killed "
          f"(built in {build_s:.1f} s)")
    print(f"baseline  select count(*) from tool_calls   {base_ms:8.2f} ms (median of {args.runs})")
    print(f"baseline  one grouped pass over the calls  {scan_ms:8.2f} ms")
    print(f"compute_metrics, no filter                 {metrics_ms:8.2f} ms "
          f"({metrics_ms / base_ms:,.0f}x count(*), {metrics_ms / scan_ms:.1f}x one pass)")
    print(f"compute_metrics, service + tool filter     {filtered_ms:8.2f} ms "
          f"({filtered_ms / base_ms:,.0f}x count(*), {filtered_ms / scan_ms:.1f}x one pass)")
    target = 200.0
    verdict = "OK" if metrics_ms < target else "OVER TARGET"
    print(f"target < {target:.0f} ms over 1M calls: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
