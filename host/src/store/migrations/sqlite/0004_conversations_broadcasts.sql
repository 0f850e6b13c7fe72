-- Broadcasts and their fan-out (one message per recipient, never two: unique (broadcast_id, phone)).
CREATE TABLE broadcasts (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id    BIGINT  NOT NULL REFERENCES partners(id),
    audience      TEXT    NOT NULL,
    content_type  TEXT    NOT NULL,
    body          TEXT,
    rendered_body TEXT,
    template_code TEXT,
    lang          TEXT,
    priority      TEXT    NOT NULL,
    content       TEXT    NOT NULL,
    media_id      TEXT,
    state         TEXT    NOT NULL,
    total         BIGINT,
    sent          BIGINT  NOT NULL DEFAULT 0,
    failed        BIGINT  NOT NULL DEFAULT 0,
    cursor        BIGINT  NOT NULL DEFAULT 0,
    lease_until   BIGINT,
    created_at    BIGINT  NOT NULL,
    completed_at  BIGINT
);
CREATE INDEX broadcasts_partner ON broadcasts (partner_id, id);
CREATE INDEX broadcasts_due ON broadcasts (state, id);

ALTER TABLE messages ADD COLUMN broadcast_id BIGINT;
CREATE UNIQUE INDEX messages_broadcast_phone ON messages (broadcast_id, phone);
CREATE INDEX messages_conversation ON messages (conversation_id, id);
CREATE INDEX accounts_state ON accounts (state, id);
