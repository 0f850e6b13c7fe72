-- The dispatcher's claim (store/outbox.rs `claim_due`) looks for pending events whose time has come. Its index
-- held every event, so each one stored `dead` (a target without a webhook URL) or finished (`succeeded`,
-- `dead`) stayed in it for good: it holds only the pending events now, and an event leaves it as it ends.
DROP INDEX outbox_events_due;
CREATE INDEX outbox_events_due ON outbox_events (next_attempt_at) WHERE state = 'pending';
