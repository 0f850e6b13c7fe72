-- End users (OTP login, presence), accounts and their partner links, account field definitions, the
-- delivery queue and the dev sink; plus the tables the /me lists read (conversations, bots, flow sessions).

CREATE TABLE accounts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    phone        TEXT    NOT NULL UNIQUE,
    state        TEXT    NOT NULL,
    display_name TEXT,
    claimed_at   BIGINT,
    created_at   BIGINT  NOT NULL
);

CREATE TABLE account_links (
    account_id BIGINT NOT NULL REFERENCES accounts(id),
    partner_id BIGINT NOT NULL REFERENCES partners(id),
    fields     TEXT   NOT NULL,
    linked_at  BIGINT NOT NULL,
    PRIMARY KEY (account_id, partner_id)
);
CREATE INDEX account_links_partner ON account_links (partner_id, account_id);

CREATE TABLE account_fields (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id BIGINT  NOT NULL REFERENCES partners(id),
    key        TEXT    NOT NULL,
    label      TEXT    NOT NULL,
    type       TEXT    NOT NULL,
    required   BIGINT  NOT NULL,
    options    TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    UNIQUE (partner_id, key)
);

CREATE TABLE otp_codes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    phone      TEXT    NOT NULL,
    purpose    TEXT    NOT NULL,
    code_hash  TEXT    NOT NULL,
    tries      BIGINT  NOT NULL DEFAULT 0,
    state      TEXT    NOT NULL,
    expires_at BIGINT  NOT NULL,
    created_at BIGINT  NOT NULL
);
CREATE INDEX otp_codes_phone ON otp_codes (phone, purpose, id);

CREATE TABLE presence (
    phone        TEXT   PRIMARY KEY,
    last_seen_at BIGINT NOT NULL
);

CREATE TABLE delivery_jobs (
    message_id      BIGINT PRIMARY KEY REFERENCES messages(id),
    next_attempt_at BIGINT NOT NULL,
    lease_until     BIGINT
);
CREATE INDEX delivery_jobs_due ON delivery_jobs (next_attempt_at);

CREATE TABLE dev_sink (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT    NOT NULL,
    phone   TEXT    NOT NULL,
    text    TEXT    NOT NULL,
    at      BIGINT  NOT NULL
);
CREATE INDEX dev_sink_phone ON dev_sink (phone, id);

ALTER TABLE messages ADD COLUMN media_id TEXT;
ALTER TABLE messages ADD COLUMN conversation_id BIGINT;

CREATE TABLE conversations (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    ref             TEXT    NOT NULL UNIQUE,
    partner_id      BIGINT  NOT NULL REFERENCES partners(id),
    phone           TEXT    NOT NULL,
    subject         TEXT,
    state           TEXT    NOT NULL,
    last_message_at BIGINT  NOT NULL,
    created_at      BIGINT  NOT NULL
);
CREATE INDEX conversations_phone ON conversations (phone, id);
CREATE INDEX conversations_partner ON conversations (partner_id, id);

CREATE TABLE bots (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    ref                 TEXT    NOT NULL UNIQUE,
    partner_id          BIGINT  NOT NULL REFERENCES partners(id),
    code                TEXT    NOT NULL,
    name                TEXT    NOT NULL,
    runtime_mode        TEXT    NOT NULL,
    webhook_url         TEXT,
    webhook_secret      TEXT    NOT NULL,
    channels            TEXT    NOT NULL,
    allowed_ips         TEXT,
    token_hash          TEXT    NOT NULL UNIQUE,
    token_prefix        TEXT    NOT NULL,
    component_digest    TEXT,
    created_at          BIGINT  NOT NULL,
    updated_at          BIGINT  NOT NULL,
    UNIQUE (partner_id, code)
);

CREATE TABLE flow_sessions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    ref          TEXT    NOT NULL UNIQUE,
    bot_id       BIGINT  NOT NULL REFERENCES bots(id),
    flow         TEXT,
    kind         TEXT    NOT NULL,
    phone        TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    title        TEXT,
    message_id   BIGINT,
    guest_state  TEXT,
    screen       TEXT,
    summary      TEXT,
    invited_at   BIGINT  NOT NULL,
    completed_at BIGINT
);
CREATE INDEX flow_sessions_phone ON flow_sessions (phone, id);
