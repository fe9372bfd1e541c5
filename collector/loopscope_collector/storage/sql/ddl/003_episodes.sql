-- One row per episode (an agent run). Filled from root spans (invoke_agent and equivalents)
-- and kept current as tool calls arrive, so a run without a root span still has a row.
create table episodes (
    episode_id varchar primary key,
    service varchar not null,
    agent varchar,
    model varchar,
    task_type varchar,
    trace_id varchar,                   -- the trace of the root span, or of the first call seen
    root_span_id varchar,
    outcome varchar,                    -- success | failure | unknown (reported by the agent)
    stop_reason varchar,                -- completed | no_progress | repeated_tool_call | budget | timeout | aborted | fatal
    stop_diagnostic varchar,            -- JSON text
    guard_mode varchar,
    convention varchar,
    start_ns bigint,
    end_ns bigint,
    tool_calls integer not null default 0,
    input_tokens bigint not null default 0,
    output_tokens bigint not null default 0,
    cost_usd double,
    first_flag_ns bigint,               -- start of the first flagged call (cost after the first flag)
    updated_at timestamp not null default current_timestamp
);
