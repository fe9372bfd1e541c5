-- No-progress spike alerts: one row per alert, resolved in place.
create table alerts (
    alert_id varchar primary key,
    service varchar not null,
    state varchar not null,             -- firing | resolved
    fired_at timestamp not null,
    resolved_at timestamp,
    rate double not null,               -- no-progress steps / steps in the window when it fired
    baseline double,
    volume integer not null,            -- steps in the window
    message varchar not null
);

-- Human verdicts from the dashboard; they outrank scenario labels and the unlabelled rule.
create table labels (
    episode_id varchar not null,
    span_id varchar not null default '',    -- '' labels the whole episode
    label varchar not null,             -- true_loop | false_kill | no_loop
    note varchar,
    labelled_at timestamp not null default current_timestamp,
    primary key (episode_id, span_id)
);
