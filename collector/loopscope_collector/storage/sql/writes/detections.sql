-- The statements that replace an episode's flags (storage/writes/detections.py).

-- name: of_episodes
-- The flags stored for the episodes $episode_ids.
select d.episode_id, d.span_id, d.detector, d.kind from detections d
join (select unnest($episode_ids::varchar[]) as episode_id) i using (episode_id);

-- name: delete_episodes
delete from detections
where episode_id in (select unnest($episode_ids::varchar[]));
