-- The agent's own number of each tool call (loopscope.call.ordinal: 1 for the run's first,
-- as its guard counts calls), so a run whose spans were partly lost on the way keeps the
-- agent's numbering and shows the gaps, instead of renumbering the calls that arrived. Null
-- for instrumentations that do not set it, and for calls stored before this version: those
-- are numbered in the order they ran.
alter table tool_calls add column call_ordinal integer;
