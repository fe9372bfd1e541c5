-- The statements that check the spans table (storage/writes/spans.py).

-- name: conflicting
-- The incoming spans (incoming_again: spans whose key is stored) whose stored content
-- differs: every column but the key and the service, which the resource already holds.
select i.span_id from spans s join incoming_again i
    on s.trace_id = i.trace_id and s.span_id = i.span_id
where s.parent_span_id::varchar is distinct from i.parent_span_id::varchar
    or s.name::varchar is distinct from i.name::varchar
    or s.start_ns::varchar is distinct from i.start_ns::varchar
    or s.end_ns::varchar is distinct from i.end_ns::varchar
    or s.kind::varchar is distinct from i.kind::varchar
    or s.status_code::varchar is distinct from i.status_code::varchar
    or s.status_message::varchar is distinct from i.status_message::varchar
    or s.attributes::varchar is distinct from i.attributes::varchar
    or s.resource::varchar is distinct from i.resource::varchar
    or s.events::varchar is distinct from i.events::varchar
    or s.scope::varchar is distinct from i.scope::varchar;

-- name: existing_keys
-- The pairs ($traces[i], $spans[i]) that are already stored.
select s.trace_id, s.span_id from spans s
join (select unnest($traces::varchar[]) as trace_id, unnest($spans::varchar[]) as span_id) k
    on s.trace_id = k.trace_id and s.span_id = k.span_id;
