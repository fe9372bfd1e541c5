-- Detection v3: the messages of a conversation (loopscope `message` spans), so an episode's
-- repeated replies and its user turns reach the collector's detection as they reach the
-- guard's, and an episode rebuilt from the store is judged with them.
create table messages (
    trace_id varchar not null,
    span_id varchar not null,
    episode_id varchar not null,
    service varchar not null,
    role varchar not null,              -- user | assistant | system
    start_ns bigint not null,
    step integer,                       -- the agent's own step index
    content varchar,                    -- null when content was not captured
    content_hash varchar not null default '',
    tokens bigint not null default 0,
    primary key (trace_id, span_id)
);
create index messages_episode on messages (episode_id);
-- A flag raised at a message (a monologue) is a detections row whose span_id is the
-- message's and whose ordinal is the number of tool calls before it.

-- Whether a poll's recorded deadline is an explicit limit (loopscope.tool.deadline_stated):
-- an estimate is counted from the poll's last change, a limit from its first poll.
alter table tool_calls add column deadline_stated boolean;
