-- The statements that settle the unknown_writes table (storage/writes/unknown_writes.py).

-- name: resolve_by_reconcile
-- A reconcile of key $k at $t settles an open UNKNOWN write with that key, or the write of
-- the call whose call id is $k in the same trace.
update unknown_writes set resolved_at_ns = $t, resolution = $how
where resolved_at_ns is null and unknown_at_ns <= $t
    and (idempotency_key = $k or span_id in (select span_id from tool_calls
         where call_id = $k and trace_id = $trace));

-- name: resolve_by_retry
-- A successful retry with the same idempotency key at $t.
update unknown_writes set resolved_at_ns = $t, resolution = 'retried_ok'
where resolved_at_ns is null and idempotency_key = $k and unknown_at_ns <= $t;
