-- The agents' inbox: a conversation is assigned to one member (or none), and agents keep internal notes on
-- it that the user never sees (not in /me, not in the user's events, not in webhooks).
ALTER TABLE conversations ADD COLUMN assignee_id BIGINT REFERENCES members(id);
CREATE INDEX conversations_assignee ON conversations (partner_id, assignee_id, id);

CREATE TABLE conversation_notes (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id BIGINT  NOT NULL REFERENCES conversations(id),
    member_id       BIGINT  REFERENCES members(id),
    body            TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL
);
CREATE INDEX conversation_notes_conversation ON conversation_notes (conversation_id, id);
