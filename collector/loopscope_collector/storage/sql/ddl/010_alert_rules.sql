-- The rule each alert was judged by, as the collector was configured when it fired, so the
-- dashboard draws the alert's own threshold and window (never parsed from its message).
-- Alerts stored before this version have them null: readers fall back to the defaults.
alter table alerts add column threshold double;      -- fires at this rate, whatever the baseline
alter table alerts add column window_s double;       -- the rolling window the rate is over
alter table alerts add column baseline_s double;     -- the baseline's time constant
alter table alerts add column factor double;         -- ... or at baseline * factor
alter table alerts add column floor double;          -- ... and at least this
alter table alerts add column min_volume integer;    -- calls needed in the window
