-- Messages users send from WhatsApp or SMS (inbound.rs): each kept once, by its provider's id (a webhook
-- retried or replayed changes nothing), answered at once and routed after: `received`, then `routed` (it
-- became `message_id` in a conversation), `opted_out` / `opted_in` (a STOP or START keyword), `unrouted`
-- (no partner to give it to: the sender got one polite reply, `replied`), `unsupported` (a kind of
-- message not carried yet, kept in `content`) or `failed` (routing it failed `attempts` times: kept, and
-- holding up no other).
CREATE TABLE inbound_messages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    channel      TEXT    NOT NULL CHECK (channel IN ('whatsapp', 'sms')),
    provider_ref TEXT    NOT NULL,
    phone        TEXT    NOT NULL,
    sender       TEXT    NOT NULL,
    body         TEXT,
    content      TEXT    NOT NULL,
    context_ref  TEXT,
    state        TEXT    NOT NULL CHECK (state IN ('received', 'routed', 'opted_out', 'opted_in', 'unrouted', 'unsupported', 'failed')),
    attempts     BIGINT  NOT NULL DEFAULT 0,
    message_id   BIGINT  REFERENCES messages(id),
    replied      BIGINT  NOT NULL DEFAULT 0,
    received_at  BIGINT  NOT NULL,
    routed_at    BIGINT,
    UNIQUE (channel, provider_ref)
);
CREATE INDEX inbound_messages_waiting ON inbound_messages (state, id);
CREATE INDEX inbound_messages_phone ON inbound_messages (phone, channel, id);

-- Who asked not to hear from a sender on a channel: SMS's STOP keywords (cleared by START), WhatsApp's
-- block (error 131050, cleared when the person writes again). Sends skip that channel for them.
CREATE TABLE opt_outs (
    phone   TEXT   NOT NULL,
    channel TEXT   NOT NULL CHECK (channel IN ('whatsapp', 'sms')),
    sender  TEXT   NOT NULL,
    reason  TEXT   NOT NULL,
    at      BIGINT NOT NULL,
    PRIMARY KEY (phone, channel, sender)
);

-- The channel the user last wrote to a conversation from (`whatsapp`, `sms`; none: the app): agents'
-- replies go back on it.
ALTER TABLE conversations ADD COLUMN channel TEXT;
