-- Per-key ordering of webhook events as a chain: each event names the event before it with the same
-- (target, ordering key), or 0 for the first. The dispatcher then checks one row by primary key instead of
-- searching every earlier event (which a planner with stale statistics turned into a scan per candidate).
ALTER TABLE outbox_events ADD COLUMN after_id BIGINT NOT NULL DEFAULT 0;
UPDATE outbox_events SET after_id = COALESCE((SELECT MAX(p.id) FROM outbox_events p
    WHERE p.target = outbox_events.target AND p.target_id = outbox_events.target_id
      AND p.ordering_key = outbox_events.ordering_key AND p.id < outbox_events.id), 0);
