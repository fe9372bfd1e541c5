-- Every read the dashboard and the CLI can ask for. A client names a read and passes its
-- $parameters; a parameter left out is NULL, which each read treats as "no filter".

-- name: summary
-- Totals for the overview: tool calls, episodes, flagged episodes, open UNKNOWN writes.
select
    (select count(*) from tool_calls where $service is null or service = $service) as tool_calls,
    (select count(*) from episodes where $service is null or service = $service) as episodes,
    (select count(distinct d.episode_id) from detections d
        join episodes e using (episode_id)
        where $service is null or e.service = $service) as flagged_episodes,
    (select count(*) from detections d join episodes e using (episode_id)
        where ($service is null or e.service = $service) and d.severity = 'kill') as kills,
    (select count(*) from unknown_writes where resolved_at_ns is null
        and ($service is null or service = $service)) as unresolved_unknown_writes,
    (select count(*) from alerts where state = 'firing'
        and ($service is null or service = $service)) as firing_alerts;

-- name: episodes
-- Episodes, most recent first, with their tool-call and flag counts.
select e.episode_id, e.service, e.agent, e.model, e.task_type, e.outcome, e.stop_reason,
       e.guard_mode, e.convention, e.start_ns, e.end_ns, e.cost_usd,
       e.input_tokens, e.output_tokens,
       (select count(*) from tool_calls t where t.episode_id = e.episode_id) as tool_calls,
       (select count(*) from detections d where d.episode_id = e.episode_id) as flags,
       (select count(*) from detections d where d.episode_id = e.episode_id
            and d.severity = 'kill') as kills
from episodes e
where ($service is null or e.service = $service)
  and ($outcome is null or e.outcome = $outcome)
  and ($flagged is null or $flagged = exists (
        select 1 from detections d where d.episode_id = e.episode_id))
order by coalesce(e.end_ns, e.start_ns) desc nulls last
limit coalesce($limit, 100);

-- name: episode
-- One episode's row.
select * from episodes where episode_id = $episode_id;

-- name: episode_tool_calls
-- Every tool call of one episode, in the order they ran.
select trace_id, span_id, tool, call_id, kind, step, start_ns, end_ns, convention, signature,
       args_text, output_hash, output_text, output_size, content_captured, status,
       error_message, guard_mode, guard_action, guard_decision, guard_reason, guard_flags,
       progress, streak, collector_progress, collector_streak, idempotency_key, write_status,
       tokens_in, tokens_out, cost_usd
from tool_calls
where episode_id = $episode_id
order by start_ns, step nulls last, span_id;

-- name: episode_detections
-- The collector's flags on one episode, in step order.
select span_id, ordinal, detector, kind, severity, action, message, detected_at
from detections
where episode_id = $episode_id
order by ordinal, detector;

-- name: recent_detections
-- The newest flags across episodes: the live list of stuck agents.
select d.episode_id, e.service, e.agent, d.span_id, d.ordinal, d.detector, d.kind,
       d.severity, d.action, d.message, d.detected_at
from detections d
left join episodes e using (episode_id)
where ($service is null or e.service = $service)
order by d.detected_at desc, d.ordinal desc
limit coalesce($limit, 100);

-- name: guard_decisions
-- Decisions in-process guards made, newest first (observe mode: what they would have done).
select episode_id, service, tool, mode, action, decision, reason, flags, time_ns
from guard_decisions
where ($episode_id is null or episode_id = $episode_id)
  and ($service is null or service = $service)
order by time_ns desc
limit coalesce($limit, 100);

-- name: unknown_writes
-- Writes whose result was UNKNOWN, unresolved first.
select idempotency_key, episode_id, service, tool, unknown_at_ns, resolved_at_ns, resolution
from unknown_writes
where ($service is null or service = $service)
order by resolved_at_ns is not null, unknown_at_ns desc
limit coalesce($limit, 100);

-- name: alerts
-- No-progress spike alerts, newest first.
select alert_id, service, state, fired_at, resolved_at, rate, baseline, volume, message
from alerts
where ($service is null or service = $service)
order by fired_at desc
limit coalesce($limit, 100);
