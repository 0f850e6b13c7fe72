-- A partner's search of its conversations (store/search.rs) in one lookup: one text row per conversation
-- (rowid = its id) with the partner, the contact's phone, the subject and the words of every message either
-- side wrote in it, so that every word of a search is found anywhere in the conversation and the newest
-- conversations come first from the index itself. It takes the place of `conversations_search`, which held
-- the subject alone (a search then had to gather each message's conversation: slow for a common word).
-- engine-specific: an FTS5 table kept by triggers (PostgreSQL: a table of tsvectors with a GIN index).
CREATE VIRTUAL TABLE conversation_words USING fts5(
    partner, phone, words, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);
-- engine-specific
INSERT INTO conversation_words (rowid, partner, phone, words)
    SELECT c.id, c.partner_id, c.phone, concat_ws(' ', c.subject, (SELECT group_concat(concat_ws(' ',
        COALESCE(m.rendered_body, m.body), json_extract(m.content, '$.subject'),
        json_extract(m.content, '$.preview'), json_extract(m.content, '$.link.title'),
        json_extract(m.content, '$.link.label'), json_extract(m.content, '$.link.description'),
        json_extract(m.content, '$.media.filename'), json_extract(m.content, '$.flow.title')), ' ')
        FROM messages m WHERE m.conversation_id = c.id))
    FROM conversations c;
-- engine-specific: a contentless row cannot be added to, so a new message writes its conversation's row
-- again, from the subject and every message (the cost grows with the conversation: docs/performance.md).
CREATE TRIGGER conversation_words_conversation AFTER INSERT ON conversations BEGIN
    INSERT INTO conversation_words (rowid, partner, phone, words)
        VALUES (new.id, new.partner_id, new.phone, COALESCE(new.subject, '')); END;
-- engine-specific
CREATE TRIGGER conversation_words_message AFTER INSERT ON messages WHEN new.conversation_id IS NOT NULL BEGIN
    DELETE FROM conversation_words WHERE rowid = new.conversation_id; INSERT INTO conversation_words
        (rowid, partner, phone, words)
        SELECT c.id, c.partner_id, c.phone, concat_ws(' ', c.subject, (SELECT group_concat(concat_ws(' ',
            COALESCE(m.rendered_body, m.body), json_extract(m.content, '$.subject'),
            json_extract(m.content, '$.preview'), json_extract(m.content, '$.link.title'),
            json_extract(m.content, '$.link.label'), json_extract(m.content, '$.link.description'),
            json_extract(m.content, '$.media.filename'), json_extract(m.content, '$.flow.title')), ' ')
            FROM messages m WHERE m.conversation_id = c.id))
        FROM conversations c WHERE c.id = new.conversation_id; END;
-- engine-specific
DROP TRIGGER conversations_search_insert;
-- engine-specific
DROP TABLE conversations_search;
