-- The statements that write the episodes table (storage/writes/episodes.py).

-- name: upsert
-- incoming_episodes has the EPISODES batch schema; its columns go in by name, and a stored
-- episode takes each new value by its column's rule.
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
    updated_at = now();
