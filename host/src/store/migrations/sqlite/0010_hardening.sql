-- Hardening (security review).

-- A developer sign-up's e-mail travels with its one-time code and is applied only when that code is
-- verified.
ALTER TABLE otp_codes ADD COLUMN payload TEXT;

-- Each partner names the account for itself; one partner's name is never shown to another.
ALTER TABLE account_links ADD COLUMN display_name TEXT;
UPDATE account_links SET display_name = (SELECT a.display_name FROM accounts a WHERE a.id = account_links.account_id);

-- Inbound bot events carrying a `webhook-id`, so a replayed event is recognised and ignored.
CREATE TABLE bot_inbound_events (
    bot_id      BIGINT NOT NULL REFERENCES bots(id),
    event_id    TEXT   NOT NULL,
    received_at BIGINT NOT NULL,
    PRIMARY KEY (bot_id, event_id)
);
CREATE INDEX bot_inbound_events_received ON bot_inbound_events (received_at);

-- Steps a webhook-mode bot answered, one row each (appended, never rewritten), until the app takes them.
CREATE TABLE flow_pending_steps (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id BIGINT  NOT NULL REFERENCES flow_sessions(id),
    step       TEXT    NOT NULL
);
CREATE INDEX flow_pending_steps_session ON flow_pending_steps (session_id, id);
-- engine-specific: JSON array functions differ.
INSERT INTO flow_pending_steps (session_id, step)
    SELECT s.id, j.value FROM flow_sessions s, json_each(s.pending_steps) j
    WHERE s.pending_steps IS NOT NULL ORDER BY s.id, j.key;
UPDATE flow_sessions SET pending_steps = NULL;
