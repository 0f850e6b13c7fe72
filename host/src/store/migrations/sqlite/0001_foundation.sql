-- Foundation: partners, messages (with state history and delivery attempts), media, templates, the
-- webhook outbox and service settings. Times are Unix epoch milliseconds (BIGINT).

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE partners (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    code           TEXT    NOT NULL UNIQUE,
    name           TEXT    NOT NULL,
    is_platform    BIGINT  NOT NULL DEFAULT 0,
    key_hash       TEXT    NOT NULL UNIQUE,
    key_prefix     TEXT    NOT NULL,
    webhook_url    TEXT,
    webhook_secret TEXT,
    created_at     BIGINT  NOT NULL
);

CREATE TABLE media (
    id         TEXT    PRIMARY KEY,
    partner_id BIGINT  NOT NULL REFERENCES partners(id),
    filename   TEXT,
    mimetype   TEXT,
    size       BIGINT  NOT NULL,
    sha256     TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    created_at BIGINT  NOT NULL
);

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    ref             TEXT    NOT NULL UNIQUE,
    partner_id      BIGINT  NOT NULL REFERENCES partners(id),
    phone           TEXT    NOT NULL,
    direction       TEXT    NOT NULL,
    content_type    TEXT    NOT NULL,
    body            TEXT,
    rendered_body   TEXT,
    template_code   TEXT,
    lang            TEXT,
    priority        TEXT    NOT NULL,
    content         TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    channel         TEXT,
    seq             BIGINT  NOT NULL DEFAULT 0,
    idempotency_key TEXT,
    request_hash    TEXT,
    created_at      BIGINT  NOT NULL,
    updated_at      BIGINT  NOT NULL,
    UNIQUE (partner_id, idempotency_key)
);
CREATE INDEX messages_partner_id ON messages (partner_id, id);
CREATE INDEX messages_phone ON messages (phone, id);

CREATE TABLE message_states (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id BIGINT  NOT NULL REFERENCES messages(id),
    seq        BIGINT  NOT NULL,
    state      TEXT    NOT NULL,
    channel    TEXT,
    at         BIGINT  NOT NULL,
    UNIQUE (message_id, seq)
);

CREATE TABLE delivery_attempts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id BIGINT  NOT NULL REFERENCES messages(id),
    channel    TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    error      TEXT,
    at         BIGINT  NOT NULL
);
CREATE INDEX delivery_attempts_message ON delivery_attempts (message_id, id);

CREATE TABLE templates (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id       BIGINT  NOT NULL REFERENCES partners(id),
    code             TEXT    NOT NULL,
    channel          TEXT    NOT NULL,
    lang             TEXT    NOT NULL,
    category         TEXT    NOT NULL,
    body             TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    variables        TEXT    NOT NULL,
    rejection_reason TEXT,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    UNIQUE (partner_id, code, channel, lang)
);

CREATE TABLE outbox_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id     TEXT    NOT NULL UNIQUE,
    target          TEXT    NOT NULL,
    target_id       BIGINT  NOT NULL,
    event           TEXT    NOT NULL,
    payload         TEXT    NOT NULL,
    ordering_key    TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    attempts        BIGINT  NOT NULL DEFAULT 0,
    last_status     BIGINT,
    last_error      TEXT,
    next_attempt_at BIGINT  NOT NULL,
    lease_until     BIGINT,
    created_at      BIGINT  NOT NULL,
    updated_at      BIGINT  NOT NULL
);
CREATE INDEX outbox_events_due ON outbox_events (state, next_attempt_at);
CREATE INDEX outbox_events_target ON outbox_events (target, target_id, id);

CREATE TABLE devices (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    device_uuid      TEXT    NOT NULL UNIQUE,
    phone            TEXT    NOT NULL,
    platform         TEXT,
    identity_key_pub TEXT,
    key_version      BIGINT  NOT NULL DEFAULT 0,
    last_seen_at     BIGINT,
    created_at       BIGINT  NOT NULL
);
CREATE INDEX devices_phone ON devices (phone);
