-- What a partner keeps (docs/data.md, `/api/v1/settings/retention`): days to keep its hub messages with their
-- attempts, its conversations' messages, its media, its webhook deliveries and its bots' sessions; NULL keeps
-- them as long as the host does (`HUBBUB_RETENTION_MAX_DAYS`, forever when unset). The retention worker
-- (retention.rs) removes what is older, a small batch at a time.
ALTER TABLE partners ADD COLUMN keep_messages_days BIGINT;
ALTER TABLE partners ADD COLUMN keep_conversations_days BIGINT;
ALTER TABLE partners ADD COLUMN keep_media_days BIGINT;
ALTER TABLE partners ADD COLUMN keep_webhook_deliveries_days BIGINT;
ALTER TABLE partners ADD COLUMN keep_bot_sessions_days BIGINT;

-- Work one host does at a time when several share the database (the retention purge): the host named by a
-- turn's holder does it until `lease_until`, renewing as it goes; another takes the turn once it ran out.
CREATE TABLE host_turns (
    name        TEXT   PRIMARY KEY,
    holder      TEXT   NOT NULL,
    lease_until BIGINT NOT NULL
);

-- A partner's media by age, for the purge (media are written rarely: the index costs sends nothing).
CREATE INDEX media_partner_age ON media (partner_id, created_at);

-- What a message's or session's removal (retention, erasure) looks up: the inbound messages and bot sessions
-- that name it (partial: most rows name none).
CREATE INDEX inbound_messages_message ON inbound_messages (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX inbound_messages_session ON inbound_messages (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX flow_sessions_message ON flow_sessions (message_id) WHERE message_id IS NOT NULL;

-- A person's exports of their data (`POST /api/v1/me/export`): a zip of every record about them and their
-- files, prepared in the background, downloaded from a link signed by the host that lapses at `expires_at`
-- (24 hours after it was ready), when the row goes. `state`: preparing, ready or failed.
-- engine-specific: the archive's type (BYTEA on PostgreSQL).
CREATE TABLE person_exports (
    id          TEXT   PRIMARY KEY,
    phone       TEXT   NOT NULL,
    state       TEXT   NOT NULL,
    archive     BLOB,
    size        BIGINT,
    error       TEXT,
    created_at  BIGINT NOT NULL,
    ready_at    BIGINT,
    expires_at  BIGINT
);
CREATE INDEX person_exports_phone ON person_exports (phone, created_at);
