-- The collector instance that stored each tool call (`loopscope collector --instance`), so a
-- collector that is sent an episode another one stored says so (misrouting, docs/deploy.md).
-- Calls stored before this version have it null.
alter table tool_calls add column collector varchar;
