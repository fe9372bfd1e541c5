-- Detection v2: the user turn of a tool call (loopscope.turn: a new turn starts a new intent)
-- and the UNKNOWN write a tool call looked up (loopscope.reconcile.key / .found on a tool
-- span), so an episode rebuilt from the store is judged as the agent's guard judged it.
alter table tool_calls add column turn integer;
alter table tool_calls add column reconciles varchar;
alter table tool_calls add column found boolean;
-- A look-up the guard saw (the implicit rule) settles a write without saying found or not.
alter table reconciles alter column found drop not null;
