-- One row per tool call, whatever instrumentation reported it (loopscope, OTel GenAI,
-- OpenInference, OpenLLMetry, OpenAI Agents / Logfire, MCP).
create table tool_calls (
    trace_id varchar not null,
    span_id varchar not null,
    episode_id varchar not null,        -- loopscope.episode.id, else the conversation/session id, else the trace id
    service varchar not null,
    agent varchar,
    model varchar,
    tool varchar not null,
    call_id varchar,
    kind varchar,                       -- read | write | poll | null (undeclared, as in most traces)
    step integer,                       -- the agent's own step index when it reported one
    start_ns bigint not null,
    end_ns bigint not null,
    convention varchar not null,        -- which instrumentation the row was read from
    signature varchar not null default '',   -- '' when the span had neither a signature nor arguments
    args_text varchar,                  -- null when content was not captured
    output_hash varchar not null default '',
    output_text varchar,                -- null when content was not captured
    output_size integer,
    content_captured boolean not null default false,
    status varchar not null default 'ok',    -- ok | error | timeout | blocked
    error_message varchar,
    guard_mode varchar,                 -- the in-process guard's own decision, as the agent made it
    guard_action varchar,
    guard_decision varchar,
    guard_reason varchar,
    guard_flags varchar[],
    progress varchar,                   -- the agent-side progress marker, when reported
    streak integer,
    idempotency_key varchar,
    write_status varchar,               -- ok | error | unknown
    intent varchar,
    tokens_in bigint not null default 0,
    tokens_out bigint not null default 0,
    cost_usd double,
    dedup_key varchar,                  -- one call reported twice (MCP client and server) shares it
    collector_progress varchar,         -- the collector's own verdict, set by streaming detection
    collector_streak integer,
    primary key (trace_id, span_id)
);
create index tool_calls_episode on tool_calls (episode_id);
