-- Writes whose result was UNKNOWN (a timeout), and when and how they were settled.
create table unknown_writes (
    idempotency_key varchar not null,
    episode_id varchar not null,
    service varchar not null,
    tool varchar not null,
    trace_id varchar not null,
    span_id varchar not null,           -- the call that timed out
    unknown_at_ns bigint not null,
    resolved_at_ns bigint,              -- null while unresolved
    resolution varchar,                 -- reconciled_found | reconciled_absent | retried_ok
    primary key (idempotency_key, span_id)
);

create table reconciles (
    trace_id varchar not null,
    span_id varchar not null,
    episode_id varchar not null,
    service varchar not null,
    reconcile_key varchar not null,
    found boolean not null,
    time_ns bigint not null,
    primary key (trace_id, span_id)
);
