-- End-to-end encryption: partner agent devices, conversation content-key wraps (ciphertext only) and the
-- opaque offline alerts (at most one per partner and user per offline period).
CREATE TABLE agent_devices (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id       BIGINT NOT NULL REFERENCES partners(id),
    device_uuid      TEXT   NOT NULL,
    identity_key_pub TEXT   NOT NULL,
    platform         TEXT,
    key_version      BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    UNIQUE (partner_id, device_uuid)
);

CREATE TABLE conversation_keys (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id BIGINT NOT NULL REFERENCES conversations(id),
    key_version     BIGINT NOT NULL,
    device_kind     TEXT   NOT NULL,
    device_uuid     TEXT   NOT NULL,
    wrap            TEXT   NOT NULL,
    wrap_nonce      TEXT   NOT NULL,
    sender_eph_pub  TEXT   NOT NULL,
    uploaded_by     TEXT   NOT NULL,
    created_at      BIGINT NOT NULL,
    UNIQUE (conversation_id, key_version, device_kind, device_uuid)
);

CREATE TABLE e2e_alerts (
    partner_id BIGINT NOT NULL,
    phone      TEXT   NOT NULL,
    message_id BIGINT NOT NULL,
    sent_at    BIGINT NOT NULL,
    PRIMARY KEY (partner_id, phone)
);

-- What an attempt was for: `delivery` of the message, or the opaque `alert` about an encrypted one.
ALTER TABLE delivery_attempts ADD COLUMN kind TEXT NOT NULL DEFAULT 'delivery';
