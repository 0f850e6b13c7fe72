-- Per-key ordering of webhook events as a chain. `ordering_key` now names its target too
-- (`partner:<id>:<key>`), so one indexed column finds the previous event of a group, and each event names
-- that predecessor (`after_id`, 0 for the first). The dispatcher checks the one predecessor row by
-- primary key, with a scalar subquery on purpose: PostgreSQL turns NOT EXISTS under an OR into a hashed
-- subplan that reads the whole table on every claim. Before, the check searched every earlier event of the
-- target, which a planner with stale statistics ran as a scan per candidate (claims of 15-49 s).
UPDATE outbox_events SET ordering_key = target || ':' || target_id || ':' || ordering_key;
DROP INDEX outbox_events_ordering;
CREATE INDEX outbox_events_chain ON outbox_events (ordering_key, id);
ALTER TABLE outbox_events ADD COLUMN after_id BIGINT NOT NULL DEFAULT 0;
UPDATE outbox_events SET after_id = COALESCE((SELECT MAX(p.id) FROM outbox_events p
    WHERE p.ordering_key = outbox_events.ordering_key AND p.id < outbox_events.id), 0);
-- The dispatcher walks pending events in id order; finished ones (most of the table, in time) are not in
-- this index.
CREATE INDEX outbox_events_pending ON outbox_events (id) WHERE state = 'pending';
