-- Every read the dashboard and the CLI can ask for. A client names a read and passes its
-- $parameters; a parameter left out is NULL, which each read treats as "no filter", except
-- those a read lists after "-- requires:" (a 400 when missing).
--
-- Each parameter's type, declared once for every read: the HTTP read API converts query-string
-- text by it (so episode_id=007 stays '007'). A read may only use parameters declared here.
-- After the type, the rule its values follow (reads/params.py), checked before a read runs so
-- that a value the read cannot take is a 400 naming the parameter, not a failed read: "from
-- LOW [to HIGH]" (a bigint is always within BIGINT), "one of A, B, ..." (text the read knows),
-- "price table" (the JSON run_cost reads), "span filter" (the conditions a Spans filter
-- compiles to: reads/span_filter.py). The ranges: a limit or an offset of at least 0;
-- seconds that the reads multiply into nanoseconds at most 9223372036 (the BIGINT of ns).
-- param service: varchar
-- param agent: varchar
-- param model: varchar
-- param tool: varchar
-- param outcome: varchar
-- param episode_id: varchar
-- param prices: varchar price table
-- param flagged: boolean
-- param limit: bigint from 0
-- param since_ns: bigint
-- param until_ns: bigint
-- param bucket_s: bigint from 1 to 9223372036
-- param points: bigint from 1
-- param offset: bigint from 0
-- param search: varchar
-- param verdict: varchar one of flagged, not flagged, stopped, would stop
-- param status: varchar one of running, ended without a summary, ended
-- param sort: varchar one of newest, started, calls, flags, cost, duration, agent, service
-- param ascending: boolean
-- param stale_s: bigint from 0 to 9223372036
-- param where: varchar span filter
-- param trace_id: varchar
-- param span_id: varchar

-- fragment: episode_filter
-- The filters of an episode list on episodes e (the sidebar's): used after WHERE.
($service is null or e.service = $service)
  and ($agent is null or e.agent = $agent)
  and ($model is null or e.model = $model)
  and ($outcome is null or e.outcome = $outcome)
  and ($since_ns is null or e.start_ns >= $since_ns)
  and ($until_ns is null or e.start_ns < $until_ns)
  and ($tool is null or map_contains(e.calls_by_tool, $tool))
-- end fragment

-- fragment: span_scope
-- The spans a Spans view covers, as the CTE span_scope (used as "with /*fragment
-- span_scope*/"): every stored span in the sidebar's service, tool and time window (by its
-- start) that meets each condition of $where (reads/span_filter.py: a JSON list of {field,
-- op, text, number}, checked before it gets here, so a field is safe in a JSON path). Each
-- row is narrow, its key (trace_id, span_id), start_ns and the words its filter compares:
-- `status` (ok, error, unset), `kind` (internal, server, ...) and `duration_ms`; a read
-- fetches the wide columns (attributes, events) and a tool call's run and tool for the rows
-- it shows only (over a million spans, carrying them through the filter, the count and the
-- sort was most of a read's time).
span_tools as (
    -- `tool`, the tool a tool call ran as every page names it: read only when the sidebar's
    -- tool or a condition on the field tool asks for it (joining every span to tool_calls
    -- was half of an unfiltered read)
    select trace_id, span_id, tool from tool_calls
    where ($tool is null or tool = $tool)
      and ($tool is not null
           or list_contains(json_extract_string(coalesce($where, '[]'), '$[*].field'), 'tool'))
),
span_rows as (
    select s.trace_id, s.span_id, s.parent_span_id, s.name, s.service, s.start_ns,
           t.tool, (s.end_ns - s.start_ns) / 1e6 as duration_ms,
           -- the attribute each condition names, by position: one parse of the span's
           -- attributes, by paths known before the scan (a path per span and condition
           -- was twice as slow)
           json_extract_string(s.attributes, list_transform(
               json_extract_string(coalesce($where, '[]'), '$[*].field'),
               lambda f: '$."' || f || '"')) as attribute_values,
           case s.status_code when 1 then 'ok' when 2 then 'error' else 'unset' end as status,
           case s.kind when 1 then 'internal' when 2 then 'server' when 3 then 'client'
                when 4 then 'producer' when 5 then 'consumer' else 'unspecified' end as kind
    from spans s
    left join span_tools t using (trace_id, span_id)
    where ($service is null or s.service = $service)
      and ($since_ns is null or s.start_ns >= $since_ns)
      and ($until_ns is null or s.start_ns < $until_ns)
      and ($tool is null or t.tool = $tool)
),
span_scope as (
    -- every condition holds (one that cannot be judged does not): each span's compared
    -- value, then each condition's verdict, as lists (one pass over the spans; a subquery
    -- per span and condition was 3 s over a million spans). The conditions are read from
    -- $where itself, a constant, not from a joined row (a join per span was half the time).
    select r.trace_id, r.span_id, r.start_ns, r.duration_ms, r.status, r.kind
    from span_rows r
    where $where is null or coalesce(list_bool_and(list_transform(
        list_transform(from_json(coalesce($where, '[]'), '[{"field": "VARCHAR", '
                                 '"op": "VARCHAR", "text": "VARCHAR", "number": "DOUBLE"}]'),
                       lambda c, i: {'c': c, 'v':
            case c.field when 'name' then r.name when 'service' then r.service
                 when 'status' then r.status when 'kind' then r.kind
                 when 'tool' then r.tool when 'trace_id' then r.trace_id
                 when 'span_id' then r.span_id
                 when 'parent_span_id' then r.parent_span_id
                 when 'duration' then r.duration_ms::varchar
                 else r.attribute_values[i] end}),
        lambda x: coalesce(case x.c.op
            when 'exists' then x.v is not null
            when '==' then case when x.c.number is not null
                                then try_cast(x.v as double) = x.c.number
                                else x.v = x.c.text end
            when '!=' then case when x.c.number is not null
                                then try_cast(x.v as double) is distinct from x.c.number
                                else x.v is distinct from x.c.text end
            when '>' then try_cast(x.v as double) > x.c.number
            when '>=' then try_cast(x.v as double) >= x.c.number
            when '<' then try_cast(x.v as double) < x.c.number
            when '<=' then try_cast(x.v as double) <= x.c.number
            when 'contains' then contains(x.v, x.c.text)
            end, false))), true)
)
-- end fragment

-- fragment: run_truth
-- What happened to each run apart from what enforce would have done, from its calls: per
-- episode, `acted` the strongest action a guard really took (3 stop, 2 block, 1 warn, 0
-- allow, null no guard), `decided` the strongest enforce would have taken (the guard's
-- decision, or a collector detection at the call), `kills` and `would_be_kills`. Over the
-- calls of a CTE truth_calls (all of tool_calls, or those of the runs a read shows) that the
-- read defines first; used as "/*fragment run_truth*/" inside a WITH list (the CTEs
-- flagged_calls, ranked and truth); run_happened names them.
flagged_calls as (
    -- one row per flagged call (a join, not a subquery per call: 5x faster over 1M calls)
    select trace_id, span_id,
           max(case action when 'stop' then 3 when 'block' then 2 when 'warn' then 1
                   else 0 end) as decided
    from detections
    group by trace_id, span_id
),
ranked as (
    select t.episode_id,
           case when t.guard_action = 'stop' then 3
                when t.guard_action = 'block' or t.status = 'blocked' then 2
                when t.guard_action = 'warn' then 1
                when t.guard_action is not null then 0 end as acted,
           greatest(case t.guard_decision when 'stop' then 3 when 'block' then 2
                        when 'warn' then 1 when 'allow' then 0 end, d.decided) as decided
    from truth_calls t
    left join flagged_calls d using (trace_id, span_id)
),
truth as (
    select episode_id, max(acted) as acted, max(decided) as decided,
           count(*) filter (where acted >= 2) as kills,
           count(*) filter (where coalesce(acted, 0) < 2 and decided >= 2) as would_be_kills,
           count(*) as tool_calls
    from ranked
    group by episode_id
)
-- end fragment

-- fragment: run_happened
-- `happened` and `enforce_would` of episode e from its truth row r (fragment run_truth): a
-- run its guard stopped is stopped.
case when r.acted = 3 or e.stop_reason in ('no_progress', 'repeated_tool_call', 'budget')
          then 'stopped'
     when r.acted = 2 then 'blocked'
     when r.acted = 1 then 'warned'
     when r.acted = 0 then 'allowed'
     else 'no guard' end as happened,
case coalesce(r.decided, 0) when 3 then 'stop' when 2 then 'block' when 1 then 'warn'
     else 'allow' end as enforce_would
-- end fragment

-- fragment: run_status
-- Whether episode e has ended: `ended` once its final span (the agent's root span, which
-- carries the outcome and stop reason) arrived; before that `running` while its last span
-- ended less than $stale_s seconds ago (default 300), else `ended without a summary` (the
-- agent died, or its exporter dropped the final span).
case when e.root_span_id is not null or e.stop_reason is not null or e.outcome is not null
          then 'ended'
     when coalesce(e.end_ns, e.start_ns)
          >= epoch_ns(current_timestamp) - coalesce($stale_s, 300)::bigint * 1000000000
          then 'running'
     else 'ended without a summary' end
-- end fragment

-- fragment: false_kill_rule
-- The false-kill rule (docs/metrics.md, "False-kill rate"), as loopscope.detect.false_kill's
-- kill_was_false says it in Python (tests/detect/test_false_kill.py holds the two equal): of a
-- run's first kill, from the columns of k: human_false_kill (a human said the kill was
-- wrong), loop_label (true a loop, false no loop, null unlabelled), first_loop_step,
-- kill_step, outcome, progress_after_kill. True a false kill, false a right one, null not
-- judged (out of the rate).
case when k.human_false_kill or not k.loop_label then true
     when k.loop_label then coalesce(k.kill_step < k.first_loop_step, false)
     when k.outcome = 'success' then coalesce(k.progress_after_kill, false)
     when k.outcome = 'failure' then false
end
-- end fragment

-- fragment: run_cost
-- The pricing rule (docs/metrics.md, "Cost"), the one every read that reports a cost uses: a
-- run's cost is its own (episodes.cost_usd), else the sum of its calls' costs when any call
-- carries one, else its tokens (the root's, else its calls') at its model's price when it
-- reported any, else unknown. Prices: $prices (JSON {model prefix: {"input": USD per 1M
-- tokens, "output": ...}}), else the built-in table below; the longest matching prefix wins.
-- Over the episodes of a CTE run_scope (episode_id, model, cost_usd, input_tokens,
-- output_tokens) that the read defines first, from their calls' sums kept on their rows (the
-- episodes' call facts, schema version 16); defines run_calls, run_prices, run_price and
-- run_cost (per episode: n_calls, priced_calls, call_cost, cost_source 'episode' /
-- 'tool_calls' / 'tokens' / 'none', cost_usd: null when 'none'). Used as
-- "/*fragment run_cost*/" inside a WITH list.
run_calls as (
    select e.episode_id, e.tool_calls as n_calls, e.priced_calls,
           e.calls_cost_usd as call_cost, e.calls_tokens_in as tokens_in,
           e.calls_tokens_out as tokens_out
    from episodes e
    semi join run_scope r on r.episode_id = e.episode_id
),
run_prices as (
    select key as prefix, (value ->> 'input')::double as usd_in,
           (value ->> 'output')::double as usd_out
    from json_each(coalesce($prices, /*prices*/'{"gpt-4o": {"input": 2.5, "output": 10.0}, "gpt-4o-mini": {"input": 0.15, "output": 0.6}, "gpt-4.1": {"input": 2.0, "output": 8.0}, "gpt-4.1-mini": {"input": 0.4, "output": 1.6}, "o3-mini": {"input": 1.1, "output": 4.4}, "claude-3-5-sonnet": {"input": 3.0, "output": 15.0}, "claude-sonnet-4": {"input": 3.0, "output": 15.0}, "claude-3-5-haiku": {"input": 0.8, "output": 4.0}}'/*end prices*/))
),
run_price as (
    select e.episode_id, arg_max(p.usd_in, length(p.prefix)) as usd_in,
           arg_max(p.usd_out, length(p.prefix)) as usd_out
    from run_scope e
    join run_prices p on e.cost_usd is null and starts_with(lower(e.model), lower(p.prefix))
    group by e.episode_id
),
run_cost as (
    select e.episode_id, coalesce(c.n_calls, 0) as n_calls,
           coalesce(c.priced_calls, 0) as priced_calls, c.call_cost,
           -- tokens price a run only when it reported some: no tokens is no cost known
           case when e.cost_usd is not null then 'episode'
                when c.priced_calls > 0 then 'tool_calls'
                when rp.usd_in is not null and e.input_tokens + e.output_tokens
                     + coalesce(c.tokens_in, 0) + coalesce(c.tokens_out, 0) > 0 then 'tokens'
                else 'none' end as cost_source,
           case when e.cost_usd is not null then e.cost_usd
                when c.priced_calls > 0 then c.call_cost
                when rp.usd_in is not null and e.input_tokens + e.output_tokens
                     + coalesce(c.tokens_in, 0) + coalesce(c.tokens_out, 0) > 0 then (
                    case when e.input_tokens + e.output_tokens > 0 then e.input_tokens
                         else coalesce(c.tokens_in, 0) end * rp.usd_in
                    + case when e.input_tokens + e.output_tokens > 0 then e.output_tokens
                           else coalesce(c.tokens_out, 0) end * rp.usd_out) / 1e6
           end as cost_usd
    from run_scope e
    left join run_calls c using (episode_id)
    left join run_price rp using (episode_id)
)
-- end fragment

-- name: summary
-- Totals for the overview: tool calls, episodes, flagged episodes, open UNKNOWN writes.
select
    (select count(*) from tool_calls where $service is null or service = $service) as tool_calls,
    (select count(*) from episodes where $service is null or service = $service) as episodes,
    (select count(distinct d.episode_id) from detections d
        join episodes e using (episode_id)
        where $service is null or e.service = $service) as flagged_episodes,
    -- kills: calls a guard really blocked or stopped; would_be_kills: calls where enforce
    -- would have (the guard's decision, or a collector detection) but nothing was stopped
    (select count(*) from tool_calls t where ($service is null or t.service = $service)
        and (t.guard_action in ('block', 'stop') or t.status = 'blocked')) as kills,
    (select count(*) from tool_calls t where ($service is null or t.service = $service)
        and not (coalesce(t.guard_action in ('block', 'stop'), false) or t.status = 'blocked')
        and (t.guard_decision in ('block', 'stop') or exists (
            select 1 from detections d where d.trace_id = t.trace_id and d.span_id = t.span_id
                and d.severity = 'kill'))) as would_be_kills,
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
-- requires: episode_id
-- One episode's row, with the task its root span reported (loopscope.task) and the tool
-- calls the agent counted (loopscope.tool_calls: with the calls' own numbers, what tells the
-- calls lost at the end of a run).
-- `status`: ended, running or ended without a summary (fragment run_status), and
-- `silent_s`, the silence that ends a run without a summary.
select e.*,
       (select s.attributes ->> 'loopscope.task' from spans s
            where s.trace_id = e.trace_id and s.span_id = e.root_span_id) as task,
       (select try_cast(s.attributes ->> 'loopscope.tool_calls' as integer) from spans s
            where s.trace_id = e.trace_id and s.span_id = e.root_span_id) as agent_tool_calls,
       /*fragment run_status*/ as status,
       coalesce($stale_s, 300) as silent_s
from episodes e
where e.episode_id = $episode_id;

-- name: episode_tool_calls
-- requires: episode_id
-- Every tool call of one episode, in the order they ran (as the collector's detection orders
-- them); call_ordinal is the agent's own number of the call, when its instrumentation sets one.
select trace_id, span_id, tool, call_id, kind, step, call_ordinal, start_ns, end_ns,
       convention, signature, args_text, output_hash, output_text, output_size,
       content_captured, status,
       error_message, guard_mode, guard_action, guard_decision, guard_reason, guard_flags,
       progress, streak, collector_progress, collector_streak, idempotency_key, write_status,
       tokens_in, tokens_out, cost_usd
from tool_calls
where episode_id = $episode_id
order by start_ns, step nulls last, span_id;

-- name: episode_spans
-- requires: episode_id
-- The spans of one episode for its trace view, in start order: every span of its traces that
-- started within the run (model turns, tool calls, the root), with the GenAI operation, the
-- tool, tokens and cost each reported (the tool-call rows' own where the span is a call), at
-- most $limit (default 2000).
with run as (
    select episode_id, start_ns, end_ns from episodes where episode_id = $episode_id
),
traces as (
    select distinct trace_id from tool_calls where episode_id = $episode_id
    union
    select trace_id from episodes where episode_id = $episode_id and trace_id is not null
)
select s.trace_id, s.span_id, s.parent_span_id, s.name, s.start_ns, s.end_ns, s.status_code,
       s.attributes ->> 'gen_ai.operation.name' as operation,
       coalesce(t.tool, s.attributes ->> 'gen_ai.tool.name') as tool,
       coalesce(t.tokens_in, try_cast(s.attributes ->> 'gen_ai.usage.input_tokens' as bigint))
           as tokens_in,
       coalesce(t.tokens_out, try_cast(s.attributes ->> 'gen_ai.usage.output_tokens' as bigint))
           as tokens_out,
       coalesce(t.cost_usd, try_cast(s.attributes ->> 'loopscope.cost_usd' as double))
           as cost_usd,
       t.span_id is not null as is_call
from spans s
join traces using (trace_id)
cross join run r
left join tool_calls t on t.trace_id = s.trace_id and t.span_id = s.span_id
where s.end_ns >= coalesce(r.start_ns, s.end_ns) - 1000000000
  and s.start_ns <= coalesce(r.end_ns, s.start_ns) + 1000000000
  and (t.episode_id is null or t.episode_id = $episode_id)
order by s.start_ns, s.span_id
limit coalesce($limit, 2000);

-- name: span_list
-- The spans a Spans view covers (fragment span_scope: the sidebar's service, tool and time
-- window, and the filter $where), newest first, $limit (default 200) from $offset, with their
-- attributes (JSON text), how many events each has, and `total`, how many spans match.
with /*fragment span_scope*/,
shown as (
    select *, count(*) over () as total
    from span_scope
    order by start_ns desc, span_id
    limit coalesce($limit, 200) offset coalesce($offset, 0)
)
select w.trace_id, w.span_id, s.parent_span_id, s.name, s.service, w.start_ns, s.end_ns,
       w.duration_ms, w.status, w.kind, t.tool, t.episode_id, t.call_ordinal, s.attributes,
       coalesce(json_array_length(s.events), 0) as events, w.total
from shown w
-- (start_ns in the key too: the shown rows' range of it lets the scan skip the rest)
join spans s on s.trace_id = w.trace_id and s.span_id = w.span_id and s.start_ns = w.start_ns
left join tool_calls t on t.trace_id = w.trace_id and t.span_id = w.span_id
order by w.start_ns desc, w.span_id;

-- name: span_latency
-- Latency of the spans a Spans view covers (fragment span_scope): per tool, the tool calls'
-- count and p50 / p90 / p99 / max duration in ms (continuous quantiles), and one row with
-- every matching span, tool calls or not (`tool` null, `every_span` true): one pass over the
-- spans (grouping sets), the three quantiles of a group from one sort of its durations.
with /*fragment span_scope*/,
latency as (
    select t.tool, grouping(t.tool) = 1 as every_span, count(*) as spans,
           quantile_cont(w.duration_ms, [0.5, 0.9, 0.99]) as quantiles,
           max(w.duration_ms) as max_ms
    from span_scope w
    left join tool_calls t on t.trace_id = w.trace_id and t.span_id = w.span_id
    group by grouping sets ((t.tool), ())
    having grouping(t.tool) = 1 or t.tool is not null
)
select tool, every_span, spans, quantiles[1] as p50_ms, quantiles[2] as p90_ms,
       quantiles[3] as p99_ms, max_ms
from latency
order by every_span desc, spans desc, tool;

-- name: span_detail
-- requires: span_id
-- One span as stored, for the span inspector: every column (attributes, resource and events
-- as JSON text), and the run and call number it is a tool call of, when it is one. Matched by
-- $span_id, in $trace_id when given (a span id is unique only within its trace).
select s.trace_id, s.span_id, s.parent_span_id, s.name, s.service, s.start_ns, s.end_ns,
       (s.end_ns - s.start_ns) / 1e6 as duration_ms,
       case s.status_code when 1 then 'ok' when 2 then 'error' else 'unset' end as status,
       s.status_message,
       case s.kind when 1 then 'internal' when 2 then 'server' when 3 then 'client'
            when 4 then 'producer' when 5 then 'consumer' else 'unspecified' end as kind,
       s.scope, s.attributes, s.resource, s.events,
       coalesce(t.episode_id, s.attributes ->> 'loopscope.episode.id') as episode_id,
       t.tool, t.call_ordinal
from spans s
left join tool_calls t using (trace_id, span_id)
where s.span_id = $span_id and ($trace_id is null or s.trace_id = $trace_id)
order by s.start_ns, s.trace_id
limit 10;

-- name: episode_detections
-- requires: episode_id
-- The collector's flags on one episode, in step order: by call, then by when the flagged
-- step began (the messages after one call share its ordinal; a ladder's warning comes before
-- its stop), then by detector.
select d.span_id, d.ordinal, d.detector, d.kind, d.severity, d.action, d.message,
       d.detected_at
from detections d
left join spans s on s.trace_id = d.trace_id and s.span_id = d.span_id
where d.episode_id = $episode_id
order by d.ordinal, s.start_ns nulls last, d.detector;

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
select alert_id, service, state, fired_at, resolved_at, rate, baseline, volume,
       episodes_in_streak, episodes, message,
       -- the rule it was judged by; null for alerts stored before schema version 10
       threshold, window_s, baseline_s, factor, floor, min_volume,
       -- where it went and why it resolved; null before schema version 12
       sent_to, resolved_because
from alerts
where ($service is null or service = $service)
order by fired_at desc
limit coalesce($limit, 100);

-- name: metrics_breakdown
-- The collector's metrics as counts (definitions: docs/metrics.md), one row per dimension and
-- key: 'all' (key null: the headline numbers), 'service', 'agent', 'model', 'tool' (episodes
-- that called the tool; tool_calls = that tool's calls) and 'kind' (episodes flagged with that
-- kind). An episode is in the window when it started in it. Rates and Wilson intervals are
-- derived from these counts by loopscope_collector.metrics. Costs by the pricing rule
-- (fragment run_cost, with its $prices).
with sel as materialized (
    -- the runs in scope with their call facts (kept on their rows: ddl/016), so no read of
    -- every call
    select e.episode_id, e.service, e.agent, e.model, e.outcome, e.cost_usd, e.start_ns,
           e.input_tokens, e.output_tokens, e.first_flag_ns, e.scenario_loop,
           e.scenario_first_loop_step, e.tool_calls, e.numbered_calls, e.max_call_ordinal,
           e.calls_by_tool
    from episodes e
    where ($service is null or e.service = $service)
      and ($agent is null or e.agent = $agent)
      and ($model is null or e.model = $model)
      and ($since_ns is null or e.start_ns >= $since_ns)
      and ($until_ns is null or e.start_ns < $until_ns)
      and ($outcome is null or e.outcome = $outcome)
      and ($tool is null or map_contains(e.calls_by_tool, $tool))
),
calls_of as materialized (
    -- the single calls this read looks at: those of the runs with a flag (a detection, a
    -- guard's decision, a first flag), for a flag's time and step and the calls after the
    -- first flag (a flag is at a call of its own run)
    select t.episode_id, t.trace_id, t.span_id, t.start_ns, t.step, t.cost_usd,
           t.collector_progress
    from tool_calls t
    semi join (select episode_id from sel where first_flag_ns is not null
               union select episode_id from detections
               union select episode_id from guard_decisions) f
        on f.episode_id = t.episode_id
),
flag_events as materialized (
    -- every flag: the collector's detections (any severity) and the guards' non-allow
    -- decisions. A budget stop is a user's cap, not a loop verdict: is_budget keeps it out of
    -- the loop flags and kills, and counts it beside them (budget_stops).
    -- (a flag at a message, a monologue, is placed by the message's time and step)
    select d.episode_id, d.span_id, coalesce(t.start_ns, m.start_ns, s.start_ns) as at_ns,
           d.severity = 'kill' as is_kill, d.kind, coalesce(t.step, m.step) as step,
           d.detector = 'budget' or d.kind = 'budget' as is_budget
    from detections d
    join sel s using (episode_id)
    left join calls_of t on t.trace_id = d.trace_id and t.span_id = d.span_id
    left join messages m on m.trace_id = d.trace_id and m.span_id = d.span_id
    union all
    select g.episode_id, g.span_id, g.time_ns,
           coalesce(g.decision, g.action) in ('block', 'stop'),
           'guard:' || coalesce(g.flags[1], coalesce(g.decision, g.action)), t.step,
           coalesce(g.reason = 'budget', false)
    from guard_decisions g
    join sel s using (episode_id)
    left join calls_of t on t.trace_id = g.trace_id and t.span_id = g.span_id
    where coalesce(g.decision, g.action) in ('warn', 'block', 'stop')
),
budget_stops as (
    -- a run's first budget stop: a kill after it is no kill of the run (under enforce it
    -- ended there; loopscope.detect.false_kill.first_kill)
    select episode_id, min(at_ns) as stop_ns from flag_events
    where is_kill and is_budget group by episode_id
),
marks as materialized (
    select s.episode_id,
           least(s.first_flag_ns, min(f.at_ns) filter (where not f.is_budget))
               as first_flag_ns,
           count(f.episode_id) filter (where not f.is_budget) > 0
               or s.first_flag_ns is not null as flagged,
           coalesce(bool_or(f.is_kill and not f.is_budget
                            and f.at_ns <= coalesce(b.stop_ns, f.at_ns)), false) as killed,
           coalesce(bool_or(f.is_kill and f.is_budget), false) as budget_stopped,
           min(f.at_ns) filter (where f.is_kill and not f.is_budget
                                and f.at_ns <= coalesce(b.stop_ns, f.at_ns)) as first_kill_ns,
           arg_min(f.step, f.at_ns) filter (where f.is_kill and not f.is_budget
                                            and f.at_ns <= coalesce(b.stop_ns, f.at_ns))
               as first_kill_step,
           -- a flag at or after the scenario's first loop step (a flag without a step counts)
           coalesce(bool_or(f.step is null
                            or f.step >= coalesce(s.scenario_first_loop_step, 0))
                        filter (where f.episode_id is not null and not f.is_budget),
                    s.first_flag_ns is not null) as flagged_in_loop
    from sel s
    left join flag_events f using (episode_id)
    left join budget_stops b using (episode_id)
    group by s.episode_id, s.first_flag_ns, s.scenario_first_loop_step
),
run_scope as (
    select episode_id, model, cost_usd, input_tokens, output_tokens from sel
),
/*fragment run_cost*/,
calls as (
    -- the calls of the episodes in scope
    select episode_id,
           case when $tool is null then tool_calls
                else coalesce(calls_by_tool[$tool], 0) end as n_calls,
           -- the agent numbered more calls than arrived: some were lost on the way (a
           -- call is stored once, by its span id, so its number is counted once)
           coalesce(max_call_ordinal > numbered_calls, false) as ordinal_gap
    from sel
),
after_flag as (
    -- the calls of flagged episodes from the first flag on (cost) and after the first kill
    select t.episode_id,
           count(*) filter (where t.start_ns >= m.first_flag_ns) as calls_after_flag,
           coalesce(sum(t.cost_usd) filter (where t.start_ns >= m.first_flag_ns), 0)
               as call_cost_after_flag,
           coalesce(bool_or(t.start_ns > m.first_kill_ns
                            and t.collector_progress not in ('none', 'waiting')), false)
               as progress_after_kill
    from calls_of t
    join marks m on m.episode_id = t.episode_id and m.first_flag_ns is not null
    group by t.episode_id
),
episode_labels as (
    select episode_id, max(label) as label  -- 'true_loop' outranks 'no_loop' (never both: key)
    from labels
    where span_id = '' and label in ('true_loop', 'no_loop')
    group by episode_id
),
false_kill_labels as (
    select distinct l.episode_id
    from labels l
    left join flag_events k
        on k.episode_id = l.episode_id and k.span_id = l.span_id and k.is_kill
    where l.label = 'false_kill' and (l.span_id = '' or k.episode_id is not null)
),
facts as (
    select s.episode_id, s.service, s.agent, s.model, s.outcome,
           -- label source, in order: human (labels), scenario (episodes.scenario_loop), none
           coalesce(el.label, case when s.scenario_loop then 'true_loop'
                                   when not s.scenario_loop then 'no_loop' end) as label,
           case when el.label is not null then 'human'
                when s.scenario_loop is not null then 'scenario' end as label_source,
           coalesce(c.n_calls, 0) as n_calls,
           m.flagged,
           -- a human true_loop counts any flag; a scenario loop one from its first loop step
           case when el.label is not null then m.flagged else m.flagged_in_loop end
               as detected,
           coalesce(m.killed, false) as killed,
           m.budget_stopped,
           case when fk.episode_id is not null or el.label is not null then 'human'
                when s.scenario_loop is not null then 'scenario'
                else 'rule' end as verdict_source,
           -- the inputs of the false-kill rule (fragment false_kill_rule)
           fk.episode_id is not null as human_false_kill,
           case when el.label is not null then el.label = 'true_loop'
                else s.scenario_loop end as loop_label,
           case when el.label is null then s.scenario_first_loop_step end as first_loop_step,
           m.first_kill_step as kill_step,
           coalesce(af.progress_after_kill, false) as progress_after_kill,
           rc.cost_source, coalesce(rc.cost_usd, 0.0) as cost,
           m.first_flag_ns, rc.priced_calls, af.call_cost_after_flag, af.calls_after_flag,
           rc.n_calls as all_calls,
           -- incomplete: calls missing from the agent's numbering, or spans its SDK says it
           -- dropped (docs/metrics.md, "Spans lost before the store")
           coalesce(c.ordinal_gap, false) or ir.episode_id is not null as incomplete
    from sel s
    join marks m using (episode_id)
    left join calls c using (episode_id)
    left join after_flag af using (episode_id)
    left join run_cost rc using (episode_id)
    left join episode_labels el using (episode_id)
    left join false_kill_labels fk using (episode_id)
    left join (select distinct episode_id from incomplete_runs) ir using (episode_id)
),
ef as materialized (
    -- one row per episode in scope: its facts as 0/1 counters, its cost and service/agent/model
    select episode_id, service, agent, model, n_calls,
           flagged::int as flagged,
           (label = 'true_loop')::int as true_loop,
           (label = 'true_loop' and detected)::int as true_loop_flagged,
           (label = 'true_loop' and label_source = 'human')::int as true_loop_human,
           (label = 'true_loop' and label_source = 'human' and detected)::int
               as true_loop_human_flagged,
           (label = 'true_loop' and label_source = 'scenario')::int as true_loop_scenario,
           (label = 'true_loop' and label_source = 'scenario' and detected)::int
               as true_loop_scenario_flagged,
           (label = 'true_loop' and incomplete)::int as true_loop_incomplete,
           incomplete::int as incomplete,
           (label = 'no_loop')::int as no_loop,
           (label is null)::int as unlabelled,
           (label_source = 'human')::int as labelled_human,
           (label_source = 'scenario')::int as labelled_scenario,
           killed::int as killed,
           (killed and wrong_if_killed is not null)::int as judged_kill,
           (killed and wrong_if_killed is not null and incomplete)::int
               as judged_kill_incomplete,
           budget_stopped::int as budget_stopped,
           (killed and wrong_if_killed)::int as false_kill,
           (killed and verdict_source = 'human')::int as kill_human,
           (killed and verdict_source = 'human' and wrong_if_killed)::int as false_kill_human,
           (killed and verdict_source = 'scenario')::int as kill_scenario,
           (killed and verdict_source = 'scenario' and wrong_if_killed)::int
               as false_kill_scenario,
           (killed and verdict_source = 'rule' and wrong_if_killed is not null)::int
               as kill_rule,
           (killed and verdict_source = 'rule' and wrong_if_killed)::int as false_kill_rule,
           (killed and wrong_if_killed is null)::int as kill_rule_unknown,
           (outcome = 'success')::int as success,
           (outcome = 'failure')::int as failure,
           cost,
           case when cost_source = 'none' or first_flag_ns is null then 0.0
                when priced_calls > 0 then call_cost_after_flag
                else cost * calls_after_flag / all_calls end as cost_after_flag,
           (cost_source = 'episode')::int as cost_episode,
           (cost_source = 'tool_calls')::int as cost_calls,
           (cost_source = 'tokens')::int as cost_tokens,
           (cost_source = 'none')::int as cost_none
    from (select *, (/*fragment false_kill_rule*/) as wrong_if_killed from facts k)
),
episode_tools as (
    select * from (select episode_id, unnest(map_keys(calls_by_tool)) as tool,
                          unnest(map_values(calls_by_tool)) as n from sel)
    where $tool is null or tool = $tool
),
episode_kinds as (
    select distinct episode_id, kind from flag_events where not is_budget
),
dims as (
    select 'all' as dimension, null::varchar as key, n_calls as dim_calls, ef.* exclude (
        episode_id, service, agent, model, n_calls) from ef
    union all
    select 'service', service, n_calls, ef.* exclude (
        episode_id, service, agent, model, n_calls) from ef
    union all
    select 'agent', agent, n_calls, ef.* exclude (
        episode_id, service, agent, model, n_calls) from ef
    union all
    select 'model', model, n_calls, ef.* exclude (
        episode_id, service, agent, model, n_calls) from ef
    union all
    select 'tool', et.tool, et.n, ef.* exclude (
        episode_id, service, agent, model, n_calls) from ef join episode_tools et using (episode_id)
    union all
    select 'kind', ek.kind, n_calls, ef.* exclude (
        episode_id, service, agent, model, n_calls) from ef join episode_kinds ek using (episode_id)
)
select dimension, key,
       count(*) as episodes,
       coalesce(sum(dim_calls), 0)::bigint as tool_calls,
       coalesce(sum(flagged), 0)::bigint as loops_detected,
       coalesce(sum(true_loop), 0)::bigint as true_loops,
       coalesce(sum(true_loop_flagged), 0)::bigint as true_loops_flagged,
       coalesce(sum(true_loop_human), 0)::bigint as true_loops_human,
       coalesce(sum(true_loop_human_flagged), 0)::bigint as true_loops_human_flagged,
       coalesce(sum(true_loop_scenario), 0)::bigint as true_loops_scenario,
       coalesce(sum(true_loop_scenario_flagged), 0)::bigint as true_loops_scenario_flagged,
       coalesce(sum(labelled_human), 0)::bigint as labelled_human,
       coalesce(sum(labelled_scenario), 0)::bigint as labelled_scenario,
       coalesce(sum(true_loop_incomplete), 0)::bigint as true_loops_incomplete,
       coalesce(sum(incomplete), 0)::bigint as incomplete_episodes,
       coalesce(sum(no_loop), 0)::bigint as no_loop_episodes,
       coalesce(sum(unlabelled), 0)::bigint as unlabelled_episodes,
       coalesce(sum(killed), 0)::bigint as kills,
       coalesce(sum(judged_kill), 0)::bigint as judged_kills,
       coalesce(sum(judged_kill_incomplete), 0)::bigint as judged_kills_incomplete,
       coalesce(sum(false_kill), 0)::bigint as false_kills,
       coalesce(sum(budget_stopped), 0)::bigint as budget_stops,
       coalesce(sum(kill_human), 0)::bigint as kills_human,
       coalesce(sum(false_kill_human), 0)::bigint as false_kills_human,
       coalesce(sum(kill_scenario), 0)::bigint as kills_scenario,
       coalesce(sum(false_kill_scenario), 0)::bigint as false_kills_scenario,
       coalesce(sum(kill_rule), 0)::bigint as kills_rule,
       coalesce(sum(false_kill_rule), 0)::bigint as false_kills_rule,
       coalesce(sum(kill_rule_unknown), 0)::bigint as kills_rule_unknown_outcome,
       coalesce(sum(success), 0)::bigint as successful_episodes,
       coalesce(sum(failure), 0)::bigint as failed_episodes,
       coalesce(sum(cost), 0)::double as cost_usd,
       coalesce(sum(cost_after_flag), 0)::double as cost_after_first_flag_usd,
       coalesce(sum(cost_episode), 0)::bigint as cost_from_episode,
       coalesce(sum(cost_calls), 0)::bigint as cost_from_tool_calls,
       coalesce(sum(cost_tokens), 0)::bigint as cost_from_tokens,
       coalesce(sum(cost_none), 0)::bigint as cost_unknown
from dims
group by dimension, key
order by dimension, episodes desc, key nulls last;

-- name: span_loss
-- Spans lost before the store, as the agents' SDKs report them (docs/agent-export.md): per
-- service, the latest report of each instance (its counts are cumulative since the process
-- started), summed; `all` (service null) over every service. `incomplete_runs` counts the runs
-- the reports name as having lost spans.
with latest as (
    select * from export_reports
    where $service is null or service = $service
    qualify row_number() over (partition by service, instance
                               order by time_ns desc, exported desc, span_id) = 1
),
per_service as (
    select service, count(*) as instances, sum(started) as started,
           sum(exported) as exported, sum(dropped_unreachable) as dropped_unreachable,
           sum(dropped_throttled) as dropped_throttled,
           sum(dropped_timed_out) as dropped_timed_out,
           sum(dropped_rejected) as dropped_rejected,
           sum(dropped_queue_full) as dropped_queue_full,
           sum(dropped_at_exit) as dropped_at_exit
    from latest group by service
),
runs as (
    select service, count(distinct episode_id) as incomplete_runs
    from incomplete_runs where $service is null or service = $service
    group by grouping sets ((service), ())
),
rows as (
    select 'service' as dimension, * from per_service
    union all
    select 'all', null, coalesce(sum(instances), 0), coalesce(sum(started), 0),
           coalesce(sum(exported), 0), coalesce(sum(dropped_unreachable), 0),
           coalesce(sum(dropped_throttled), 0), coalesce(sum(dropped_timed_out), 0),
           coalesce(sum(dropped_rejected), 0), coalesce(sum(dropped_queue_full), 0),
           coalesce(sum(dropped_at_exit), 0)
    from per_service
)
select r.dimension, r.service, r.instances::bigint as instances, r.started::bigint as started,
       r.exported::bigint as exported,
       (r.dropped_unreachable + r.dropped_throttled + r.dropped_timed_out + r.dropped_rejected
        + r.dropped_queue_full + r.dropped_at_exit)::bigint as dropped,
       r.dropped_unreachable::bigint as unreachable, r.dropped_throttled::bigint as throttled,
       r.dropped_timed_out::bigint as timed_out, r.dropped_rejected::bigint as rejected,
       r.dropped_queue_full::bigint as queue_full, r.dropped_at_exit::bigint as at_exit,
       coalesce(n.incomplete_runs, 0)::bigint as incomplete_runs
from rows r
left join runs n on n.service is not distinct from r.service
order by r.dimension, dropped desc, r.service;

-- name: metrics_unknown_latency
-- UNKNOWN reconcile latency (seconds from a write's UNKNOWN result to its resolution: p50 /
-- p95 / max, linear interpolation) and the writes still unresolved, per dimension and key like
-- metrics_breakdown; a write is in the window when its UNKNOWN result came in it.
select case when grouping(u.service) = 0 then 'service'
            when grouping(e.agent) = 0 then 'agent'
            when grouping(e.model) = 0 then 'model'
            when grouping(u.tool) = 0 then 'tool'
            else 'all' end as dimension,
       case when grouping(u.service) = 0 then u.service
            when grouping(e.agent) = 0 then e.agent
            when grouping(e.model) = 0 then e.model
            when grouping(u.tool) = 0 then u.tool end as key,
       count(*) as unknown_writes,
       count(u.resolved_at_ns) as resolved,
       count(*) - count(u.resolved_at_ns) as unresolved,
       quantile_cont((u.resolved_at_ns - u.unknown_at_ns) / 1e9, 0.5) as p50_s,
       quantile_cont((u.resolved_at_ns - u.unknown_at_ns) / 1e9, 0.95) as p95_s,
       max((u.resolved_at_ns - u.unknown_at_ns) / 1e9) as max_s
from unknown_writes u
left join episodes e using (episode_id)
where ($service is null or u.service = $service)
  and ($agent is null or e.agent = $agent)
  and ($model is null or e.model = $model)
  and ($tool is null or u.tool = $tool)
  and ($outcome is null or e.outcome = $outcome)
  and ($since_ns is null or u.unknown_at_ns >= $since_ns)
  and ($until_ns is null or u.unknown_at_ns < $until_ns)
group by grouping sets ((), (u.service), (e.agent), (e.model), (u.tool))
order by dimension, unknown_writes desc, key nulls last;

-- name: filter_options
-- The values the dashboard's filters offer: one row per dimension (service, agent, model,
-- tool, outcome) and value seen in the store.
select 'service' as dimension, service as value from episodes where service is not null
union
select 'agent', agent from episodes where agent is not null
union
select 'model', model from episodes where model is not null
union
select 'outcome', outcome from episodes where outcome is not null
union
select 'tool', tool from tool_calls
order by dimension, value;

-- name: episode_list
-- Episodes filtered by service, agent, model, outcome, a tool they called, a start window
-- [$since_ns, $until_ns), $flagged and $episode_id (one run), newest first, with counts, cost, the first flag and the
-- flag kinds (the live list of stuck agents is this read with $flagged = true). Newest is the
-- run's last activity (its last call's end, by the agent's clock); with $flagged = true it is
-- the run's newest flag (`last_flag_at`, the collector's clock), so a run that loops now leads
-- however long ago it started, and an agent whose clock is off cannot hide it.
-- What happened and what enforce would have done are apart: `happened` is the strongest
-- action a guard really took (stopped, blocked, warned, allowed; a run its guard stopped is
-- stopped) and `kills` the calls it really blocked or stopped; `enforce_would` is the strongest
-- action enforce mode would have taken (the guard's decision, or a collector detection) and
-- `would_be_kills` the calls it would have blocked or stopped where nothing was.
-- `scenario_label` is the label the agent gave its own run (`loopscope.episode(label=...)`):
-- a label like a human one, which outranks it (docs/glossary.md).
with flags as (
    select episode_id, count(*) as flags, string_agg(distinct kind, ', ' order by kind) as kinds,
           max(detected_at) as last_flag_at
    from detections
    group by episode_id
),
chosen as (
    -- the runs shown, picked before anything is counted over their calls
    select e.*, coalesce(f.flags, 0) as flags, f.kinds, f.last_flag_at
    from episodes e
    left join flags f using (episode_id)
    where /*fragment episode_filter*/
      and ($flagged is null or $flagged = (f.flags is not null))
      and ($episode_id is null or e.episode_id = $episode_id)
    order by case when $flagged then f.last_flag_at end desc nulls last,
             coalesce(e.end_ns, e.start_ns) desc nulls last, e.episode_id
    limit coalesce($limit, 200)
),
truth_calls as (select t.* from tool_calls t semi join chosen c using (episode_id)),
/*fragment run_truth*/
select e.episode_id, e.service, e.agent, e.model, e.task_type, e.outcome, e.stop_reason,
       e.guard_mode, e.start_ns, e.end_ns, e.cost_usd, e.first_flag_ns,
       case when e.scenario_loop then 'true_loop'
            when not e.scenario_loop then 'no_loop' end as scenario_label,
       /*fragment run_happened*/,
       coalesce(r.kills, 0) as kills,
       coalesce(r.would_be_kills, 0) as would_be_kills,
       coalesce(r.tool_calls, 0) as tool_calls,
       e.flags, e.kinds, e.last_flag_at
from chosen e
left join truth r using (episode_id)
order by case when $flagged then e.last_flag_at end desc nulls last,
         coalesce(e.end_ns, e.start_ns) desc nulls last, e.episode_id;

-- name: run_list
-- Every run, healthy ones too, one page at a time (the Runs page): the sidebar's filters;
-- $search, a piece of text found (any case) in the task, agent, service, episode id or a
-- tool's name; $verdict (flagged, not flagged, stopped, would stop); $status (running, ended
-- without a summary, ended: fragment run_status); sorted by $sort (newest, started, calls,
-- flags, cost, duration, agent, service; $ascending, default descending), $limit rows from
-- $offset. `total` is how many runs match, on every row. What happened in a run (fragment
-- run_truth) is read from the calls of the page's runs only; for the verdicts stopped and
-- would stop, of every run that has a stop somewhere (its stop reason, a guard's stop, a
-- stop decided).
with flags as (
    select episode_id, count(*) as flags, string_agg(distinct kind, ', ' order by kind) as kinds
    from detections
    group by episode_id
),
runs as (
    select e.episode_id, e.service, e.agent, e.model, e.task_type, e.outcome, e.stop_reason,
           e.guard_mode, e.start_ns, e.end_ns, e.cost_usd, e.trace_id, e.root_span_id,
           e.tool_calls, coalesce(f.flags, 0) as flags, f.kinds,
           /*fragment run_status*/ as status
    from episodes e
    left join flags f using (episode_id)
    where /*fragment episode_filter*/
      and ($search is null or contains(lower(e.episode_id), lower($search))
           or contains(lower(coalesce(e.agent, '')), lower($search))
           or contains(lower(e.service), lower($search))
           or e.episode_id in (select t.episode_id from tool_calls t
                               where contains(lower(t.tool), lower($search)))
           or e.episode_id in (select s_e.episode_id from episodes s_e
                               join spans s on s.trace_id = s_e.trace_id
                                   and s.span_id = s_e.root_span_id
                               where contains(lower(s.attributes ->> 'loopscope.task'),
                                              lower($search))))
),
placed as materialized (
    -- the runs the verdict's flags and the status keep, each with its place in the order
    select *, row_number() over (order by
        case when coalesce($ascending, false) then sort_text end asc nulls last,
        case when not coalesce($ascending, false) then sort_text end desc nulls last,
        case when coalesce($ascending, false) then sort_number end asc nulls last,
        case when not coalesce($ascending, false) then sort_number end desc nulls last,
        episode_id) as place
    from (select *,
                 case $sort when 'agent' then agent when 'service' then service end
                     as sort_text,
                 case $sort when 'started' then start_ns when 'calls' then tool_calls
                            when 'flags' then flags when 'cost' then cost_usd
                            when 'duration' then end_ns - start_ns
                            when 'agent' then null when 'service' then null
                            else coalesce(end_ns, start_ns) end as sort_number
          from runs)
    where ($verdict is null or $verdict in ('stopped', 'would stop')
           or ($verdict = 'flagged' and flags > 0)
           or ($verdict = 'not flagged' and flags = 0))
      and ($status is null or status = $status)
),
stops_verdict as (select coalesce($verdict in ('stopped', 'would stop'), false) as yes),
truth_scope as materialized (
    -- the runs whose calls are read: the page, or every run that may have stopped
    select p.episode_id from placed p
    where not coalesce($verdict in ('stopped', 'would stop'), false)
      and p.place > coalesce($offset, 0)
      and p.place <= coalesce($offset, 0) + coalesce($limit, 50)
    union all
    select p.episode_id from placed p
    where $verdict in ('stopped', 'would stop')
      and (p.stop_reason in ('no_progress', 'repeated_tool_call', 'budget')
           or p.episode_id in (select t.episode_id from tool_calls t
                               where $verdict in ('stopped', 'would stop')
                                 and (t.guard_action = 'stop' or t.guard_decision = 'stop'))
           or p.episode_id in (select d.episode_id from detections d
                               where d.action = 'stop'))
),
truth_calls as (select t.* from tool_calls t semi join truth_scope s using (episode_id)),
/*fragment run_truth*/,
matched as (
    select e.*, /*fragment run_happened*/,
           coalesce(r.kills, 0) as kills, coalesce(r.would_be_kills, 0) as would_be_kills,
           case when v.yes then count(*) over ()
                else (select count(*) from placed) end as total
    from placed e
    join truth_scope using (episode_id)
    left join truth r using (episode_id)
    cross join stops_verdict v
    where not v.yes
       or ($verdict = 'stopped' and happened = 'stopped')
       or ($verdict = 'would stop' and enforce_would = 'stop' and happened <> 'stopped')
)
select m.episode_id, m.status, m.service, m.agent, m.model, m.task_type,
       (select s.attributes ->> 'loopscope.task' from spans s
            where s.trace_id = m.trace_id and s.span_id = m.root_span_id) as task,
       m.outcome, m.stop_reason, m.guard_mode, m.happened, m.enforce_would, m.kills,
       m.would_be_kills, m.tool_calls, m.flags, m.kinds, m.cost_usd, m.start_ns, m.end_ns,
       m.total
from matched m
order by m.place
limit coalesce($limit, 50) offset case when (select yes from stops_verdict)
                                       then coalesce($offset, 0) else 0 end;

-- name: no_progress_rate
-- Tool calls and the collector's no-progress verdicts per time bucket and service: the rate
-- the spike alerts watch. A bucket is $bucket_s seconds (default 60); with $points, the
-- first of $bucket_s, 1, 5, 15 or 30 minutes, 1, 3, 6 or 12 hours, or whole days wider than
-- the calls' time span cut into $points pieces: at most $points + 1 buckets per service (the
-- buckets sit on whole multiples of their width), so a chart over a month of calls gets a
-- few hundred points, not one a minute. `bucket_s` is the width used. Filters as
-- episode_list.
with scoped as materialized (
    select t.start_ns, t.service, t.collector_progress = 'none' as stuck
    from tool_calls t
    left join episodes e using (episode_id)
    where ($service is null or t.service = $service)
      and ($agent is null or t.agent = $agent or e.agent = $agent)
      and ($model is null or t.model = $model or e.model = $model)
      and ($tool is null or t.tool = $tool)
      and ($outcome is null or e.outcome = $outcome)
      and ($since_ns is null or t.start_ns >= $since_ns)
      and ($until_ns is null or t.start_ns < $until_ns)
),
bounds as (
    select coalesce(max(start_ns) - min(start_ns), 0) as span_ns,
           coalesce($bucket_s, 60)::bigint as least_s
    from scoped
),
width as (
    select case when $points is null then b.least_s
                else coalesce(
                    (select min(u.w) from unnest([b.least_s, 60, 300, 900, 1800, 3600,
                                                  10800, 21600, 43200]) u(w)
                     where u.w >= b.least_s and b.span_ns < u.w * 1000000000 * $points),
                    greatest(b.least_s,
                             86400 * ceil((b.span_ns + 1) / (86400e9 * $points))::bigint))
           end as bucket_s
    from bounds b
)
select (s.start_ns // (w.bucket_s * 1000000000)) * (w.bucket_s * 1000000000) as bucket_ns,
       s.service,
       count(*) as calls,
       count(*) filter (where s.stuck) as no_progress,
       count(*) filter (where s.stuck) / count(*) as rate,
       any_value(w.bucket_s) as bucket_s
from scoped s, width w
group by all
order by bucket_ns, s.service;

-- name: loops_by_tool
-- Per tool: its calls, the calls that made no progress, the flags raised at its calls and the
-- episodes they flagged, and its cost in loops: the cost of its calls from their episode's
-- first flag on (as metrics_breakdown's cost_after_first_flag_usd: a call's own cost when the
-- episode's calls carry costs, else the episode's cost, its own or priced from its tokens,
-- shared evenly over its calls; budget stops are no flag), so the rows add up to the Loops
-- page's card. Filters as episode_list; $prices as metrics_breakdown.
with flags as (
    select trace_id, span_id, count(*) as flags, any_value(episode_id) as episode_id
    from detections
    where detector <> 'budget' and kind <> 'budget'
    group by trace_id, span_id
),
flag_at as materialized (
    -- each run's first flag (runs without one spend nothing in loops)
    select e.episode_id,
           least(e.first_flag_ns,
                 (select min(t.start_ns) from detections d join tool_calls t
                      on t.trace_id = d.trace_id and t.span_id = d.span_id
                  where d.episode_id = e.episode_id and d.detector <> 'budget'
                      and d.kind <> 'budget'),
                 (select min(g.time_ns) from guard_decisions g
                  where g.episode_id = e.episode_id
                      and coalesce(g.decision, g.action) in ('warn', 'block', 'stop')
                      and coalesce(g.reason, '') <> 'budget')) as at_ns
    from episodes e
),
run_scope as (
    select episode_id, model, cost_usd, input_tokens, output_tokens from episodes
    where episode_id in (select episode_id from flag_at where at_ns is not null)
),
/*fragment run_cost*/,
first_flag as (
    select f.episode_id, f.at_ns, rc.cost_usd, rc.n_calls, rc.priced_calls
    from flag_at f
    join run_cost rc using (episode_id)
)
select t.tool,
       count(*) as calls,
       count(distinct t.episode_id) as episodes,
       count(*) filter (where t.collector_progress = 'none') as no_progress_calls,
       coalesce(sum(f.flags), 0)::bigint as flags,
       count(distinct f.episode_id) as flagged_episodes,
       coalesce(sum(case when ff.priced_calls > 0 then t.cost_usd
                         else ff.cost_usd / ff.n_calls end)
                    filter (where t.start_ns >= ff.at_ns), 0)::double as cost_in_loops_usd
from tool_calls t
left join flags f on f.trace_id = t.trace_id and f.span_id = t.span_id
left join episodes e on e.episode_id = t.episode_id
left join first_flag ff on ff.episode_id = t.episode_id
where ($service is null or t.service = $service)
  and ($agent is null or t.agent = $agent or e.agent = $agent)
  and ($model is null or t.model = $model or e.model = $model)
  and ($tool is null or t.tool = $tool)
  and ($outcome is null or e.outcome = $outcome)
  and ($since_ns is null or e.start_ns >= $since_ns)
  and ($until_ns is null or e.start_ns < $until_ns)
group by t.tool
order by flags desc, no_progress_calls desc, t.tool
limit coalesce($limit, 50);

-- name: looping_signatures
-- The calls that looped, ranked: one row per tool and signature flagged by the collector, with
-- an arguments preview when content was captured, the runs it looped in, its calls in those
-- runs (and how many made no progress), its cost in loops (its calls from their run's first
-- flag on, priced as loops_by_tool), when it was
-- first seen, the newest such run and, for a strip, which calls of that run were this
-- signature (a list of 0/1 by call ordinal). Filters as episode_list.
with flagged_calls as (
    select distinct t.episode_id, t.tool, t.signature
    from detections d
    join tool_calls t on t.trace_id = d.trace_id and t.span_id = d.span_id
    where d.detector <> 'budget' and d.kind <> 'budget' and t.signature <> ''
),
-- only the runs with a looping call are read further (each is numbered and priced alone)
run_scope as (
    select episode_id, model, cost_usd, input_tokens, output_tokens from episodes
    semi join (select distinct episode_id from flagged_calls) f using (episode_id)
),
/*fragment run_cost*/,
scope as (
    select e.episode_id, rc.cost_usd, coalesce(e.end_ns, e.start_ns) as at_ns,
           least(e.first_flag_ns,
                 (select min(t.start_ns) from detections d join tool_calls t
                      on t.trace_id = d.trace_id and t.span_id = d.span_id
                  where d.episode_id = e.episode_id and d.detector <> 'budget'
                      and d.kind <> 'budget')) as first_flag_ns,
           rc.n_calls, rc.priced_calls
    from episodes e
    join run_cost rc using (episode_id)
    where ($service is null or e.service = $service)
      and ($agent is null or e.agent = $agent)
      and ($model is null or e.model = $model)
      and ($outcome is null or e.outcome = $outcome)
      and ($since_ns is null or e.start_ns >= $since_ns)
      and ($until_ns is null or e.start_ns < $until_ns)
),
numbered as materialized (
    select t.episode_id, t.tool, t.signature, t.args_text, t.start_ns, t.collector_progress,
           case when s.priced_calls > 0 then coalesce(t.cost_usd, 0)
                else coalesce(s.cost_usd / s.n_calls, 0) end as cost,
           row_number() over (partition by t.episode_id
                              order by t.start_ns, t.step nulls last, t.span_id) as call,
           s.n_calls, s.at_ns, s.first_flag_ns
    from tool_calls t
    join scope s using (episode_id)
),
looped as (
    select n.*
    from numbered n
    semi join flagged_calls f
        on f.episode_id = n.episode_id and f.tool = n.tool and f.signature = n.signature
    where $tool is null or n.tool = $tool
),
newest as (
    select tool, signature, arg_max(episode_id, at_ns) as newest_episode
    from looped
    group by tool, signature
)
select l.tool, l.signature, any_value(l.args_text) as args_preview,
       count(distinct l.episode_id) as runs,
       count(*) as calls,
       count(*) filter (where l.collector_progress = 'none') as no_progress_calls,
       coalesce(sum(l.cost) filter (where l.start_ns >= l.first_flag_ns), 0)::double
           as cost_in_loops_usd,
       min(l.start_ns) as first_seen_ns,
       any_value(w.newest_episode) as newest_episode,
       (select list(case when n2.tool = l.tool and n2.signature = l.signature then 1 else 0 end
                    order by n2.call)
        from numbered n2 where n2.episode_id = any_value(w.newest_episode)) as strip
from looped l
join newest w using (tool, signature)
group by l.tool, l.signature
order by calls desc, runs desc, l.tool, l.signature
limit coalesce($limit, 50);

-- name: signature_steps
-- Which call signatures flagged episodes make at which step (the call's 0-based position in
-- its episode): one row per tool, signature and step, counting calls. Filters as episode_list.
with flagged as (
    select e.episode_id
    from episodes e
    where exists (select 1 from detections d where d.episode_id = e.episode_id)
      and ($service is null or e.service = $service)
      and ($agent is null or e.agent = $agent)
      and ($model is null or e.model = $model)
      and ($outcome is null or e.outcome = $outcome)
      and ($since_ns is null or e.start_ns >= $since_ns)
      and ($until_ns is null or e.start_ns < $until_ns)
),
ordered as (
    select t.tool, t.signature, t.collector_progress,
           row_number() over (partition by t.episode_id
                              order by t.start_ns, t.step nulls last, t.span_id) - 1 as step
    from tool_calls t
    semi join flagged f on f.episode_id = t.episode_id
)
select tool, signature, step, count(*) as calls,
       count(*) filter (where collector_progress = 'none') as no_progress
from ordered
where ($tool is null or tool = $tool)
group by tool, signature, step
order by tool, signature, step
limit coalesce($limit, 5000);

-- name: label_list
-- Human labels, newest first, with their episode's service and agent.
select l.episode_id, l.span_id, l.label, l.note, l.labelled_at, e.service, e.agent
from labels l
left join episodes e using (episode_id)
where ($episode_id is null or l.episode_id = $episode_id)
order by l.labelled_at desc, l.episode_id
limit coalesce($limit, 200);

-- name: episode_tasks
-- The task each run's root span reported (loopscope.task: only with content captured), for
-- the runs episode_list returns for the same parameters (the Labels page's queue).
select e.episode_id, s.attributes ->> 'loopscope.task' as task
from episodes e
left join spans s on s.trace_id = e.trace_id and s.span_id = e.root_span_id
where /*fragment episode_filter*/
  and ($flagged is null or $flagged = exists (
        select 1 from detections d where d.episode_id = e.episode_id))
order by coalesce(e.end_ns, e.start_ns) desc nulls last, e.episode_id
limit coalesce($limit, 200);

-- name: replay_episodes
-- The episodes the Policy page replays, newest first (at most $limit, default 10000), filtered
-- as episode_list, with what a replay needs: task type, outcome, cost, the scenario label and
-- the human label (true_loop / no_loop on the episode; false_kill anywhere in it). cost_usd is
-- the run's cost by the pricing rule (fragment run_cost, with its $prices), as the metrics
-- price it.
with run_scope as (
    select e.episode_id, e.model, e.cost_usd, e.input_tokens, e.output_tokens
    from episodes e
    where /*fragment episode_filter*/
),
/*fragment run_cost*/
select e.episode_id, e.service, e.agent, e.task_type, e.outcome, rc.cost_usd, e.guard_mode,
       e.stop_reason, e.scenario_loop, e.scenario_first_loop_step,
       (select max(l.label) from labels l where l.episode_id = e.episode_id
            and l.span_id = '' and l.label in ('true_loop', 'no_loop')) as human_label,
       exists (select 1 from labels l where l.episode_id = e.episode_id
            and l.label = 'false_kill') as human_false_kill
from episodes e
join run_cost rc using (episode_id)
order by coalesce(e.end_ns, e.start_ns) desc nulls last, e.episode_id
limit coalesce($limit, 10000);

-- name: guard_policies
-- The policies in-process guards recorded on the runs replay_episodes returns for the same
-- parameters (their root spans' loopscope.guard.policy: a policy file's JSON, '{}' for the
-- defaults), the most used first: runs, modes, and the newest run's start.
with chosen as (
    select e.episode_id, e.trace_id, e.root_span_id, e.guard_mode, e.start_ns
    from episodes e
    where /*fragment episode_filter*/
    order by coalesce(e.end_ns, e.start_ns) desc nulls last, e.episode_id
    limit coalesce($limit, 10000)
)
select s.attributes ->> 'loopscope.guard.policy' as policy, count(*) as runs,
       string_agg(distinct c.guard_mode, ', ' order by c.guard_mode) as modes,
       max(c.start_ns) as newest_ns
from chosen c
join spans s on s.trace_id = c.trace_id and s.span_id = c.root_span_id
where s.attributes ->> 'loopscope.guard.policy' is not null
group by policy
order by runs desc, newest_ns desc;

-- name: replay_calls
-- The tool calls and messages of the episodes replay_episodes returns for the same
-- parameters, as the collector's detection is fed them (the columns of ToolCallRow that
-- detection reads, and the agent's number of each call, which names the calls a replay
-- flags; a message has a role and its content), in episode and step order.
with chosen as (
    select e.episode_id
    from episodes e
    where /*fragment episode_filter*/
    order by coalesce(e.end_ns, e.start_ns) desc nulls last, e.episode_id
    limit coalesce($limit, 10000)
)
select * from (
    select t.trace_id, t.span_id, t.episode_id, t.service, t.tool, t.start_ns, t.end_ns,
           t.convention, t.call_id, t.kind, t.step, t.call_ordinal, t.signature, t.args_text,
           t.output_hash, t.output_text, t.status, t.idempotency_key, t.intent, t.deadline_s,
           t.deadline_stated, t.turn, t.reconciles, t.found, t.tokens_in,
           t.tokens_out, t.cost_usd, null::varchar as role, null::varchar as content
    from tool_calls t
    semi join chosen c on c.episode_id = t.episode_id
    union all
    select m.trace_id, m.span_id, m.episode_id, m.service, '' as tool, m.start_ns,
           m.start_ns as end_ns, 'loopscope' as convention, null as call_id, null as kind,
           m.step, null as call_ordinal, '' as signature, null as args_text,
           m.content_hash as output_hash,
           null as output_text, 'ok' as status, null as idempotency_key, null as intent,
           null as deadline_s, null as deadline_stated, null as turn, null as reconciles,
           null as found,
           0 as tokens_in, m.tokens as tokens_out, null as cost_usd, m.role, m.content
    from messages m
    semi join chosen c on c.episode_id = m.episode_id
) t
order by t.episode_id, t.start_ns, t.step nulls last, t.span_id;
