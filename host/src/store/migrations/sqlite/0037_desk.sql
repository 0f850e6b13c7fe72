-- The agents' desk (issue 74, points 1 and 5; docs/console.md).
--
-- Labels a partner keeps (`/api/v1/labels`) and puts on its conversations (filter the list by one). A label
-- removed leaves the conversations that had it; a conversation removed (retention, erasure) takes its rows.
CREATE TABLE labels (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id  BIGINT NOT NULL REFERENCES partners(id),
    name        TEXT   NOT NULL,
    color       TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (partner_id, name)
);
CREATE TABLE conversation_labels (
    label_id        BIGINT NOT NULL REFERENCES labels(id),
    conversation_id BIGINT NOT NULL REFERENCES conversations(id),
    PRIMARY KEY (label_id, conversation_id)
);
CREATE INDEX conversation_labels_conversation ON conversation_labels (conversation_id);

-- Macros: several actions an agent applies to a conversation at once (a reply, labels, an assignee, a note,
-- closing), kept as the JSON list of those actions.
CREATE TABLE macros (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id  BIGINT NOT NULL REFERENCES partners(id),
    name        TEXT   NOT NULL,
    actions     TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    UNIQUE (partner_id, name)
);

-- Assignment: how the partner's new and reopened conversations find an agent (`manual`, `round_robin`,
-- `capacity`), each member's status (`online`, `away`, `offline`: only those online are given
-- conversations), their limit of open conversations (NULL: the partner's default) and when they were last
-- given one (round robin takes the one given one longest ago).
ALTER TABLE partners ADD COLUMN assignment TEXT NOT NULL DEFAULT 'manual';
ALTER TABLE partners ADD COLUMN default_capacity BIGINT NOT NULL DEFAULT 10;
ALTER TABLE members ADD COLUMN status TEXT NOT NULL DEFAULT 'offline';
ALTER TABLE members ADD COLUMN capacity BIGINT;
ALTER TABLE members ADD COLUMN last_assigned_at BIGINT NOT NULL DEFAULT 0;
