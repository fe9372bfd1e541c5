-- The statements of the messages table (storage/writes/messages.py).

-- name: load
-- The stored messages of the episodes $episode_ids (every column MessageRow has).
select m.* from messages m
join (select unnest($episode_ids::varchar[]) as episode_id) i using (episode_id);
