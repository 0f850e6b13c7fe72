-- Business hours and SLAs (issue 74, points 2 and 3; docs/api.md "Business hours and SLAs").
--
-- A partner's business hours (the JSON of `business_hours::Hours`: its time zone, each weekday's intervals,
-- its holidays; NULL: always in), the automatic reply sent outside them (NULL: none), and its SLA targets
-- in seconds of business time (NULL: none).
ALTER TABLE partners ADD COLUMN business_hours TEXT;
ALTER TABLE partners ADD COLUMN away_message TEXT;
ALTER TABLE partners ADD COLUMN sla_first_response_s BIGINT;
ALTER TABLE partners ADD COLUMN sla_next_response_s BIGINT;

-- A conversation's automatic reply (when it last went: once per closed period), its first agent reply,
-- and the SLA running on it now: which (`first_response`, `next_response`), due when, breached when.
ALTER TABLE conversations ADD COLUMN away_replied_at BIGINT;
ALTER TABLE conversations ADD COLUMN first_response_at BIGINT;
ALTER TABLE conversations ADD COLUMN sla_kind TEXT;
ALTER TABLE conversations ADD COLUMN sla_due_at BIGINT;
ALTER TABLE conversations ADD COLUMN sla_breached_at BIGINT;
-- What the breach worker looks for: SLAs running and not breached yet, by due time (partial: few rows).
CREATE INDEX conversations_sla_due ON conversations (sla_due_at) WHERE sla_due_at IS NOT NULL AND sla_breached_at IS NULL;
