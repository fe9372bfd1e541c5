-- The statements that write the episodes table (storage/writes/episodes.py).

-- name: upsert
-- incoming_episodes has the EPISODES batch schema; its columns go in by name, and a stored
-- episode takes each new value by its column's rule. The call facts (schema version 16) are
-- the sums of the batch's new calls of the run, added to the stored sums.
insert into episodes by name
select * replace (coalesce(service, 'unknown_service') as service,
                  coalesce(input_tokens, 0) as input_tokens,
                  coalesce(output_tokens, 0) as output_tokens)
from incoming_episodes
on conflict (episode_id) do update set
    service = coalesce(excluded.service, episodes.service),
    agent = coalesce(excluded.agent, episodes.agent),
    model = coalesce(excluded.model, episodes.model),
    task_type = coalesce(excluded.task_type, episodes.task_type),
    -- (the root and its trace go together: an episode id reused in another trace points at
    -- the root it read last, in that root's trace)
    trace_id = case when excluded.root_span_id is not null then excluded.trace_id
                    else coalesce(episodes.trace_id, excluded.trace_id) end,
    root_span_id = coalesce(excluded.root_span_id, episodes.root_span_id),
    outcome = coalesce(excluded.outcome, episodes.outcome),
    stop_reason = coalesce(excluded.stop_reason, episodes.stop_reason),
    stop_diagnostic = coalesce(excluded.stop_diagnostic, episodes.stop_diagnostic),
    guard_mode = coalesce(excluded.guard_mode, episodes.guard_mode),
    convention = coalesce(episodes.convention, excluded.convention),
    start_ns = least(excluded.start_ns, episodes.start_ns),
    end_ns = greatest(excluded.end_ns, episodes.end_ns),
    input_tokens = greatest(excluded.input_tokens, episodes.input_tokens),
    output_tokens = greatest(excluded.output_tokens, episodes.output_tokens),
    cost_usd = coalesce(excluded.cost_usd, episodes.cost_usd),
    scenario_loop = coalesce(excluded.scenario_loop, episodes.scenario_loop),
    scenario_kind = coalesce(excluded.scenario_kind, episodes.scenario_kind),
    scenario_first_loop_step = coalesce(excluded.scenario_first_loop_step,
                                        episodes.scenario_first_loop_step),
    tool_calls = episodes.tool_calls + excluded.tool_calls,
    numbered_calls = coalesce(episodes.numbered_calls, 0) + excluded.numbered_calls,
    max_call_ordinal = greatest(episodes.max_call_ordinal, excluded.max_call_ordinal),
    priced_calls = coalesce(episodes.priced_calls, 0) + excluded.priced_calls,
    calls_cost_usd = coalesce(episodes.calls_cost_usd + excluded.calls_cost_usd,
                              episodes.calls_cost_usd, excluded.calls_cost_usd),
    calls_tokens_in = coalesce(episodes.calls_tokens_in + excluded.calls_tokens_in,
                               episodes.calls_tokens_in, excluded.calls_tokens_in),
    calls_tokens_out = coalesce(episodes.calls_tokens_out + excluded.calls_tokens_out,
                                episodes.calls_tokens_out, excluded.calls_tokens_out),
    calls_by_tool = case when excluded.calls_by_tool is null then episodes.calls_by_tool
        when episodes.calls_by_tool is null then excluded.calls_by_tool
        else map_concat(episodes.calls_by_tool, map_from_entries(list_transform(
            map_entries(excluded.calls_by_tool), lambda c: {'key': c.key, 'value': c.value
                + coalesce(episodes.calls_by_tool[c.key], 0)}))) end,
    updated_at = now();

-- name: name_agents
-- incoming_agents (trace_id, episode_id, agent): a run stored without an agent name takes
-- the one its trace's spans carry in a later batch (normalize/assembly.py, rule 7); a run
-- already named keeps its name.
update episodes set agent = n.agent, updated_at = now()
from incoming_agents n
where episodes.episode_id = n.episode_id and episodes.agent is null;

-- name: recount_calls
-- The call facts (the upsert's, schema version 16) of the runs in recount_ids (episode_id),
-- counted again from their stored calls: after calls of theirs were moved to them (a root
-- naming its conversation) or deleted (shadows), after an import, and once for the runs
-- stored before version 16.
update episodes set tool_calls = coalesce(c.calls, 0), numbered_calls = coalesce(c.numbered, 0),
    max_call_ordinal = c.max_ordinal, priced_calls = coalesce(c.priced, 0),
    calls_cost_usd = c.cost, calls_tokens_in = c.tokens_in, calls_tokens_out = c.tokens_out,
    calls_by_tool = c.by_tool
from (
    select r.episode_id, sum(g.calls)::integer as calls, sum(g.numbered)::integer as numbered,
           max(g.max_ordinal) as max_ordinal, sum(g.priced)::integer as priced,
           sum(g.cost) as cost, sum(g.tokens_in) as tokens_in, sum(g.tokens_out) as tokens_out,
           map_from_entries(list({'key': g.tool, 'value': g.calls::integer})
                            filter (where g.tool is not null)) as by_tool
    from recount_ids r
    left join (
        select episode_id, tool, count(*) as calls, count(call_ordinal) as numbered,
               max(call_ordinal) as max_ordinal, count(cost_usd) as priced,
               sum(cost_usd) as cost, sum(tokens_in) as tokens_in,
               sum(tokens_out) as tokens_out
        from tool_calls
        semi join recount_ids using (episode_id)
        group by episode_id, tool
    ) g using (episode_id)
    group by r.episode_id
) c
where episodes.episode_id = c.episode_id;
