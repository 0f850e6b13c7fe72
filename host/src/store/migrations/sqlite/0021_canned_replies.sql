-- Canned replies: the answers a partner's agents send often, kept per partner under a short name the agent
-- picks in the console's reply box.
CREATE TABLE canned_replies (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id BIGINT NOT NULL REFERENCES partners(id),
    shortcut   TEXT   NOT NULL,
    body       TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX canned_replies_shortcut ON canned_replies (partner_id, shortcut);
