-- What the agents' own SDKs say they lost: each export report (a loopscope.export_report
-- span, docs/agent-export.md) as it came, one row per report. Its counts are cumulative since
-- the agent process (service.instance.id) started, so an instance's latest report is its
-- total; a report lost on the way is made good by the next.
create table export_reports (
    trace_id varchar not null,
    span_id varchar not null,
    service varchar not null,
    instance varchar not null,          -- service.instance.id ('' when the report names none)
    time_ns bigint not null,            -- when the process made the report
    started bigint not null,            -- spans started (otel.sdk.span.started)
    exported bigint not null,           -- acknowledged by a collector, before this report's batch
    dropped_unreachable bigint not null,
    dropped_throttled bigint not null,
    dropped_timed_out bigint not null,
    dropped_rejected bigint not null,
    dropped_queue_full bigint not null,
    dropped_at_exit bigint not null,
    primary key (trace_id, span_id)
);
-- The runs a report says lost spans since the process's previous report got through, and
-- how many: a run's loss is the sum over reports. A run here is incomplete in the store.
create table incomplete_runs (
    trace_id varchar not null,          -- the report's
    span_id varchar not null,
    episode_id varchar not null,
    service varchar not null,
    instance varchar not null,
    spans_dropped bigint not null,
    primary key (trace_id, span_id, episode_id)
);
create index incomplete_runs_episode on incomplete_runs (episode_id);
