-- What each end user's app is told, live (GET /api/v1/me/events): one row per event, numbered per user.
-- The number is taken from user_event_seqs under that row's lock, so one user's events commit in the order
-- of their numbers and a stream reading "after N" never skips one. Rows are kept 24 hours.
CREATE TABLE user_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    phone      TEXT   NOT NULL,
    seq        BIGINT NOT NULL,
    kind       TEXT   NOT NULL,
    subject_id BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (phone, seq)
);
CREATE INDEX user_events_created ON user_events (created_at);

CREATE TABLE user_event_seqs (
    phone TEXT   PRIMARY KEY,
    last  BIGINT NOT NULL
);

-- Single-use tickets that open an event stream (a browser's EventSource cannot send a bearer header):
-- stored as digests, valid for a minute, carrying the token they were asked for with.
CREATE TABLE stream_tickets (
    ticket_hash TEXT   PRIMARY KEY,
    phone       TEXT   NOT NULL,
    device      TEXT,
    token_iat   BIGINT NOT NULL,
    token_exp   BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT
);
CREATE INDEX stream_tickets_expires ON stream_tickets (expires_at);
