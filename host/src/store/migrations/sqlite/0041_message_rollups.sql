-- What a partner's messages came to, hour by hour (issue 74, point 9; `GET /api/v1/analytics/messages`):
-- per channel (`''`: not yet sent), template (`''`: none) and broadcast (0: none), each state change counted
-- as it happens. A change writes a delta row in its own transaction (an insert: no row that two senders
-- wait for); the rollup worker folds the deltas into `message_rollups` every second, and the figures are read
-- from both, never by scanning messages.
CREATE TABLE message_rollups (
    partner_id   BIGINT NOT NULL,
    hour         BIGINT NOT NULL,
    channel      TEXT NOT NULL,
    template     TEXT NOT NULL,
    broadcast_id BIGINT NOT NULL,
    accepted     BIGINT NOT NULL DEFAULT 0,
    sent         BIGINT NOT NULL DEFAULT 0,
    delivered    BIGINT NOT NULL DEFAULT 0,
    read         BIGINT NOT NULL DEFAULT 0,
    read_ms      BIGINT NOT NULL DEFAULT 0,
    failed       BIGINT NOT NULL DEFAULT 0,
    received     BIGINT NOT NULL DEFAULT 0,
    paid         BIGINT NOT NULL DEFAULT 0,
    fallbacks    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (partner_id, hour, channel, template, broadcast_id)
);
-- The same by UTC day (`day`: its start), folded with the hours: a report by the day over a year reads
-- 24 times fewer rows.
CREATE TABLE message_rollups_daily (
    partner_id   BIGINT NOT NULL,
    day          BIGINT NOT NULL,
    channel      TEXT NOT NULL,
    template     TEXT NOT NULL,
    broadcast_id BIGINT NOT NULL,
    accepted     BIGINT NOT NULL DEFAULT 0,
    sent         BIGINT NOT NULL DEFAULT 0,
    delivered    BIGINT NOT NULL DEFAULT 0,
    read         BIGINT NOT NULL DEFAULT 0,
    read_ms      BIGINT NOT NULL DEFAULT 0,
    failed       BIGINT NOT NULL DEFAULT 0,
    received     BIGINT NOT NULL DEFAULT 0,
    paid         BIGINT NOT NULL DEFAULT 0,
    fallbacks    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (partner_id, day, channel, template, broadcast_id)
);
CREATE TABLE message_rollup_deltas (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id   BIGINT NOT NULL,
    hour         BIGINT NOT NULL,
    channel      TEXT NOT NULL,
    template     TEXT NOT NULL,
    broadcast_id BIGINT NOT NULL,
    accepted     BIGINT NOT NULL DEFAULT 0,
    sent         BIGINT NOT NULL DEFAULT 0,
    delivered    BIGINT NOT NULL DEFAULT 0,
    read         BIGINT NOT NULL DEFAULT 0,
    read_ms      BIGINT NOT NULL DEFAULT 0,
    failed       BIGINT NOT NULL DEFAULT 0,
    received     BIGINT NOT NULL DEFAULT 0,
    paid         BIGINT NOT NULL DEFAULT 0,
    fallbacks    BIGINT NOT NULL DEFAULT 0
);
-- What the partner pays a message on WhatsApp and by SMS, in millionths of its currency (the cost of its
-- fallbacks in the figures); null: not set.
ALTER TABLE partners ADD COLUMN price_currency TEXT;
ALTER TABLE partners ADD COLUMN price_whatsapp_micros BIGINT;
ALTER TABLE partners ADD COLUMN price_sms_micros BIGINT;
