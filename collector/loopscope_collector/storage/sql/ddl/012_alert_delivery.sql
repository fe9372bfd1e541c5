-- Where each alert went and why it resolved, for the dashboard's Alerts page. Alerts stored
-- before this version have them null.
alter table alerts add column sent_to varchar;          -- JSON list: "log", "webhook HOST", "prometheus"
alter table alerts add column resolved_because varchar; -- plain words, set when it resolves
