-- Bots on WhatsApp and SMS (inbound.rs, channel_steps.rs). A bot can be its partner's entry bot on a channel
-- (`entry_channels`, a JSON list): a person who writes there with nothing else going on starts a session
-- with it, a chat — or the flow `entry_flow` when it is set.
ALTER TABLE bots ADD COLUMN entry_channels TEXT NOT NULL DEFAULT '[]';
ALTER TABLE bots ADD COLUMN entry_flow TEXT;

-- A session that runs on WhatsApp or SMS (`channel`; none: in the app): what it waits for there (`waiting`:
-- `{"menu": [[id, label], …]}`, so that "2" or a label answers it, or `{"form": screen}`) and when it last
-- moved (`active_at`: a session quiet for a day no longer takes the person's messages).
ALTER TABLE flow_sessions ADD COLUMN channel TEXT;
ALTER TABLE flow_sessions ADD COLUMN waiting TEXT;
ALTER TABLE flow_sessions ADD COLUMN active_at BIGINT;
CREATE INDEX flow_sessions_on_channel ON flow_sessions (phone, channel, active_at);

-- The bot an inbound message went to (a step of its session), beside `message_id` (a conversation's message).
ALTER TABLE inbound_messages ADD COLUMN session_id BIGINT REFERENCES flow_sessions(id);

-- Links that open one form screen of a session on WhatsApp or SMS in the app, without a login: the token is
-- kept as its SHA-256, used once, and lapses at `expires_at`.
CREATE TABLE form_links (
    token_hash TEXT   NOT NULL PRIMARY KEY,
    session_id BIGINT NOT NULL REFERENCES flow_sessions(id),
    screen     TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX form_links_session ON form_links (session_id);

-- WhatsApp's business-scoped user ids (BSUID, `user_id` in its webhooks): each with the phone it was last seen
-- with, so that a message that carries only the BSUID (a person who set a username) reaches that phone's
-- sessions and conversations. An inbound message keeps its BSUID too.
CREATE TABLE whatsapp_users (
    user_id TEXT   NOT NULL PRIMARY KEY,
    phone   TEXT   NOT NULL,
    seen_at BIGINT NOT NULL
);
ALTER TABLE inbound_messages ADD COLUMN user_id TEXT;

-- A partner's choice for agents' free-form answers to a WhatsApp user outside WhatsApp's 24-hour window:
-- refused (0, the default: send an approved template), or sent on by the other channels, the hub then SMS (1).
ALTER TABLE partners ADD COLUMN whatsapp_window_fallback BIGINT NOT NULL DEFAULT 0;

-- A partner's own sender on a channel (store/senders.rs), instead of the host's shared one: on WhatsApp its
-- phone number id (`address`), business account id (`account`), token and app secret; on SMS its Twilio
-- number or messaging service (`address`), account SID (`account`) and auth token. The token and the app
-- secret are sealed like the other secrets. Sends to the partner's users go from it; messages to it are the
-- partner's, verified with its own secret.
CREATE TABLE partner_senders (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id BIGINT NOT NULL REFERENCES partners(id),
    channel    TEXT   NOT NULL CHECK (channel IN ('whatsapp', 'sms')),
    address    TEXT   NOT NULL,
    account    TEXT   NOT NULL,
    token      TEXT   NOT NULL,
    app_secret TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (partner_id, channel),
    UNIQUE (channel, address)
);
