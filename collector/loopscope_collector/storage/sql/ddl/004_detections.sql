-- What the collector's streaming detection flagged (source 'collector'), one row per flag,
-- re-written for an episode when late spans make the collector re-evaluate it.
create table detections (
    episode_id varchar not null,
    trace_id varchar not null,
    span_id varchar not null,           -- the tool call the flag was raised at
    ordinal integer not null,           -- the call's position in the episode, 0-based
    detector varchar not null,
    kind varchar not null,
    severity varchar not null,          -- warn | kill (kill: enforce mode would block or stop)
    action varchar not null,            -- allow | warn | block | stop
    message varchar not null,
    detected_at timestamp not null default current_timestamp,
    primary key (episode_id, span_id, detector)
);
create index detections_episode on detections (episode_id);

-- Decisions an in-process guard already made, stored as the agent reported them.
create table guard_decisions (
    trace_id varchar not null,
    span_id varchar not null,
    episode_id varchar not null,
    service varchar not null,
    tool varchar not null,
    mode varchar,
    action varchar,                     -- what the guard did
    decision varchar,                   -- what the policy decided (observe mode: the would-be kill)
    reason varchar,
    flags varchar[],
    time_ns bigint not null,
    primary key (trace_id, span_id)
);
