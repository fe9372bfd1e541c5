-- What a run's calls add up to, kept on its row as its calls arrive (the pipeline adds each
-- batch's calls: storage/writes/episodes.py), so the metrics, the Runs page and the pricing
-- rule read one row per run instead of every call: tool_calls (the column of 003, left at 0
-- until this version) counts the run's stored calls; numbered_calls those with the agent's
-- own number and max_call_ordinal the highest (fewer numbered than the highest: calls lost
-- on the way); priced_calls those with a cost, calls_cost_usd / calls_tokens_in /
-- calls_tokens_out their sums (null: none reported); calls_by_tool the calls per tool name.
-- The runs stored before this version are counted once here (storage/writes/episodes.py,
-- recount_calls, runs the same count after the migration).
alter table episodes add column numbered_calls integer;
alter table episodes add column max_call_ordinal integer;
alter table episodes add column priced_calls integer;
alter table episodes add column calls_cost_usd double;
alter table episodes add column calls_tokens_in bigint;
alter table episodes add column calls_tokens_out bigint;
alter table episodes add column calls_by_tool map(varchar, integer);
