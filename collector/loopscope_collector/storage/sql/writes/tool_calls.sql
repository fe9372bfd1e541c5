-- The statements that write and look up the tool_calls table (storage/writes/tool_calls.py).
-- Each is a "-- name:" block, as in reads.sql. "incoming_*", "shadowed" and "emptied" are
-- Arrow batches the Python side registers for the statement (storage/arrow.py); $names are
-- bound parameters. A look-up takes its keys as a list parameter, unnested: a join with a
-- registered Arrow batch costs DuckDB several times more, in every batch. The insert is queries.insert_statements' (a file's key, or a lake's
-- anti-join), as every table's.

-- name: load
-- The stored calls of the episodes $episode_ids (every column ToolCallRow has).
select t.* from tool_calls t
join (select unnest($episode_ids::varchar[]) as episode_id) i using (episode_id);

-- name: episodes_stored_elsewhere
-- The episodes of $episode_ids with calls that another collector instance ($me is this one)
-- stored, and one such instance.
select t.episode_id, any_value(t.collector) from tool_calls t
join (select unnest($episode_ids::varchar[]) as episode_id) i using (episode_id)
where t.collector is not null and t.collector <> $me
group by t.episode_id;

-- name: loopscope_spans_of_traces
select t.trace_id, t.tool, t.start_ns, t.end_ns from tool_calls t
join (select unnest($traces::varchar[]) as trace_id) i using (trace_id)
where t.convention = 'loopscope';

-- name: foreign_calls_of_traces
-- In ToolCallRow's field order: its first eight fields.
select t.trace_id, t.span_id, t.episode_id, t.service, t.tool, t.start_ns, t.end_ns,
       t.convention
from tool_calls t join (select unnest($traces::varchar[]) as trace_id) i using (trace_id)
where t.convention <> 'loopscope';

-- name: delete_shadowed_calls
delete from tool_calls where (trace_id, span_id) in (select trace_id, span_id from shadowed);

-- name: delete_shadowed_detections
delete from detections where (trace_id, span_id) in (select trace_id, span_id from shadowed);

-- name: delete_emptied_episodes
-- An episode row made only for the shadows (no root span, no calls left).
delete from episodes where root_span_id is null
    and episode_id in (select episode_id from emptied)
    and not exists (select 1 from tool_calls t where t.episode_id = episodes.episode_id);

-- name: stored_dedup_keys
select distinct t.dedup_key from tool_calls t
join (select unnest($keys::varchar[]) as dedup_key) i using (dedup_key);

-- name: episodes_of_traces
select t.trace_id, any_value(t.episode_id) from tool_calls t
join (select unnest($traces::varchar[]) as trace_id) i using (trace_id) group by t.trace_id;

-- name: bare_traces
-- The traces of $traces with calls stored under the bare trace id (as their episode).
select distinct t.trace_id from tool_calls t
join (select unnest($traces::varchar[]) as trace_id) i using (trace_id)
where t.episode_id = t.trace_id;

-- name: rebind_tool_calls
update tool_calls set episode_id = $e where trace_id = $t and episode_id = $t;

-- name: rebind_detections
update detections set episode_id = $e where trace_id = $t and episode_id = $t;

-- name: rebind_guard_decisions
update guard_decisions set episode_id = $e where trace_id = $t and episode_id = $t;

-- name: rebind_unknown_writes
update unknown_writes set episode_id = $e where trace_id = $t and episode_id = $t;

-- name: delete_bare_episode
delete from episodes where episode_id = $t;

-- name: update_verdicts
update tool_calls set collector_progress = i.progress, collector_streak = i.streak
from incoming_verdicts i
where tool_calls.trace_id = i.trace_id and tool_calls.span_id = i.span_id;
