-- Text search over what users read (store/search.rs): each engine's own index. Here, FTS5 tables without
-- a copy of the text (contentless), one row per message or conversation (rowid = its id): the owner's phone
-- and the words, filled by triggers as rows are written. Encrypted messages have no body: nothing to index.
-- engine-specific: FTS5 virtual tables and triggers (PostgreSQL: tsvector columns and GIN indexes).
CREATE VIRTUAL TABLE messages_search USING fts5(
    phone, words, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);
-- engine-specific
CREATE TRIGGER messages_search_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_search (rowid, phone, words) VALUES (new.id, new.phone, concat_ws(' ',
        COALESCE(new.rendered_body, new.body), json_extract(new.content, '$.subject'),
        json_extract(new.content, '$.preview'), json_extract(new.content, '$.link.title'),
        json_extract(new.content, '$.link.label'), json_extract(new.content, '$.link.description'),
        json_extract(new.content, '$.media.filename'), json_extract(new.content, '$.flow.title'))); END;
-- engine-specific
INSERT INTO messages_search (rowid, phone, words)
    SELECT id, phone, concat_ws(' ', COALESCE(rendered_body, body), json_extract(content, '$.subject'),
        json_extract(content, '$.preview'), json_extract(content, '$.link.title'),
        json_extract(content, '$.link.label'), json_extract(content, '$.link.description'),
        json_extract(content, '$.media.filename'), json_extract(content, '$.flow.title'))
    FROM messages;
-- engine-specific
CREATE VIRTUAL TABLE conversations_search USING fts5(
    phone, words, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);
-- engine-specific
CREATE TRIGGER conversations_search_insert AFTER INSERT ON conversations BEGIN
    INSERT INTO conversations_search (rowid, phone, words) VALUES (new.id, new.phone, COALESCE(new.subject, '')); END;
-- engine-specific
INSERT INTO conversations_search (rowid, phone, words) SELECT id, phone, COALESCE(subject, '') FROM conversations;
