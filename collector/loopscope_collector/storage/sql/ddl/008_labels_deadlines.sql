-- A run's ground truth when the agent knew it (scripted and evaluation runs: the root span's
-- loopscope.label.* attributes, or the label of an Episode JSONL record read by `analyze --db`).
-- The metrics' scenario label source; human labels (the labels table) outrank it.
alter table episodes add column scenario_loop boolean;
alter table episodes add column scenario_kind varchar;
alter table episodes add column scenario_first_loop_step integer;  -- 0-based agent step

-- A poll's own deadline (loopscope.tool.deadline_s), so the collector's poll_timeout detector
-- judges a declared deadline as the agent's guard did, also when an episode is rebuilt.
alter table tool_calls add column deadline_s double;
