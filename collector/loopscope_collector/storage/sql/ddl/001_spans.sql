-- Every span the collector acknowledged, as received: the source of truth that the other
-- tables are derived from (a later version can re-normalise from here).
create table spans (
    trace_id varchar not null,          -- 32 lower-case hex
    span_id varchar not null,           -- 16 lower-case hex
    parent_span_id varchar not null default '',  -- '' for a root span
    name varchar not null,
    service varchar not null,           -- resource service.name, denormalised: the hottest filter
    start_ns bigint not null,
    end_ns bigint not null,
    kind tinyint not null default 0,
    status_code tinyint not null default 0,
    status_message varchar,
    attributes json,                    -- span attributes as JSON text
    resource json,
    events json,
    scope varchar,
    received_at timestamp not null default current_timestamp,
    primary key (trace_id, span_id)     -- ingest is idempotent: a client's retry is ignored
);
