-- The statements of the messages table (storage/writes/messages.py).

-- name: load
-- The stored messages of the episodes in incoming_episode_ids (every column MessageRow has).
select m.* from messages m join incoming_episode_ids i using (episode_id);
