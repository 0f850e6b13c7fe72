-- A partner's search of its conversations (store/search.rs) in one lookup: one row per conversation with the
-- partner and the words of its subject and of every message either side wrote in it (a tsvector, positions
-- stripped), so that every word of a search is found anywhere in the conversation through one GIN index.
-- It takes the place of `conversations.search`, which held the subject alone (a search then had to gather
-- each message's conversation: slow for a common word).
-- engine-specific: a table of tsvectors kept by triggers (SQLite: an FTS5 table).
CREATE TABLE conversation_words (
    conversation_id BIGINT   PRIMARY KEY REFERENCES conversations(id),
    partner_id      BIGINT   NOT NULL,
    words           tsvector NOT NULL
);
-- engine-specific
INSERT INTO conversation_words (conversation_id, partner_id, words)
    SELECT c.id, c.partner_id, strip(to_tsvector('simple'::regconfig, COALESCE(c.subject, ''))) || COALESCE((
        SELECT array_to_tsvector(array_agg(DISTINCT u.lexeme)) FROM messages m, unnest(m.search) u
        WHERE m.conversation_id = c.id), ''::tsvector)
    FROM conversations c;
-- engine-specific
CREATE INDEX conversation_words_words ON conversation_words USING GIN (words);
-- engine-specific: a new conversation's subject, then each message's words added to its conversation's.
CREATE FUNCTION conversation_words_conversation() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    INSERT INTO conversation_words (conversation_id, partner_id, words) VALUES (NEW.id, NEW.partner_id,
        strip(to_tsvector('simple'::regconfig, COALESCE(NEW.subject, '')))); RETURN NULL; END $$;
-- engine-specific
CREATE TRIGGER conversation_words_conversation AFTER INSERT ON conversations
    FOR EACH ROW EXECUTE FUNCTION conversation_words_conversation();
-- engine-specific: a message's words are added (its conversation's row made if it has none); a conversation
-- whose words would pass a tsvector's 1 MB keeps those it has, and the message is written all the same.
CREATE FUNCTION conversation_words_message() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    INSERT INTO conversation_words AS w (conversation_id, partner_id, words)
        VALUES (NEW.conversation_id, NEW.partner_id, strip(NEW.search))
        ON CONFLICT (conversation_id) DO UPDATE SET words = w.words || excluded.words; RETURN NULL; EXCEPTION
        WHEN program_limit_exceeded THEN RETURN NULL; END $$;
-- engine-specific
CREATE TRIGGER conversation_words_message AFTER INSERT ON messages
    FOR EACH ROW WHEN (NEW.conversation_id IS NOT NULL) EXECUTE FUNCTION conversation_words_message();
-- engine-specific
DROP INDEX conversations_search;
-- engine-specific
ALTER TABLE conversations DROP COLUMN search;
