-- Developer accounts: sign-up by phone, API and session keys (digests only), their webhook.
CREATE TABLE developers (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    phone          TEXT    NOT NULL UNIQUE,
    email          TEXT,
    verified_at    BIGINT,
    webhook_url    TEXT,
    webhook_secret TEXT,
    created_at     BIGINT  NOT NULL
);

CREATE TABLE developer_keys (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    developer_id BIGINT  NOT NULL REFERENCES developers(id),
    key_hash     TEXT    NOT NULL UNIQUE,
    prefix       TEXT    NOT NULL UNIQUE,
    kind         TEXT    NOT NULL,
    expires_at   BIGINT,
    revoked_at   BIGINT,
    created_at   BIGINT  NOT NULL
);
CREATE INDEX developer_keys_developer ON developer_keys (developer_id, id);

ALTER TABLE messages ADD COLUMN developer_id BIGINT;
CREATE INDEX messages_developer ON messages (developer_id, created_at);
