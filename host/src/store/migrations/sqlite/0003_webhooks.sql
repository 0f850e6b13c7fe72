-- Webhook dispatch: per-key ordering needs the earlier events of a key fast.
CREATE INDEX outbox_events_ordering ON outbox_events (target, target_id, ordering_key, id);
