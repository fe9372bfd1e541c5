-- Alerts also record how many episodes were in a no-progress streak when they fired (the
-- second rate of the spike), beside the rate of no-progress steps.
alter table alerts add column episodes_in_streak integer;
alter table alerts add column episodes integer;  -- episodes seen in the window
