-- A message's words (store/search.rs) in a table of their own, written once as the message is written.
-- They were a stored generated column of `messages`, which PostgreSQL computes again at every update of the
-- row — each state change of every message parsed its content and rebuilt its tsvector — and, since a
-- state change is not a HOT update (the state is indexed), each also added an entry to the GIN index.
-- Messages' words never change after they are written (a flow card's update keeps its title), as on SQLite.
-- engine-specific: a table of tsvectors kept by a trigger (SQLite's FTS5 rows were already written once).
CREATE TABLE message_words (
    message_id BIGINT   PRIMARY KEY REFERENCES messages(id),
    words      tsvector NOT NULL
);
-- engine-specific
INSERT INTO message_words (message_id, words) SELECT id, search FROM messages WHERE search <> ''::tsvector;
-- engine-specific
CREATE INDEX message_words_words ON message_words USING GIN (words);
-- engine-specific: a new message's words, computed once, for its own search and its conversation's; a
-- conversation whose words would pass a tsvector's 1 MB keeps those it has (the message is written all the
-- same).
CREATE FUNCTION message_words_insert() RETURNS trigger LANGUAGE plpgsql AS $$ DECLARE
    fields jsonb := NEW.content::jsonb; said tsvector; BEGIN
    said := to_tsvector('simple'::regconfig, COALESCE(NEW.rendered_body, NEW.body, '') || ' '
        || COALESCE(fields ->> 'subject', '') || ' ' || COALESCE(fields ->> 'preview', '') || ' '
        || COALESCE(fields #>> '{link,title}', '') || ' ' || COALESCE(fields #>> '{link,label}', '') || ' '
        || COALESCE(fields #>> '{link,description}', '') || ' ' || COALESCE(fields #>> '{media,filename}', '')
        || ' ' || COALESCE(fields #>> '{flow,title}', '')); IF said <> ''::tsvector THEN
        INSERT INTO message_words (message_id, words) VALUES (NEW.id, said); END IF; IF NEW.conversation_id
        IS NOT NULL THEN BEGIN INSERT INTO conversation_words AS w (conversation_id, partner_id, words)
            VALUES (NEW.conversation_id, NEW.partner_id, strip(said))
            ON CONFLICT (conversation_id) DO UPDATE SET words = w.words || excluded.words; EXCEPTION
        WHEN program_limit_exceeded THEN NULL; END; END IF; RETURN NULL; END $$;
-- engine-specific
CREATE TRIGGER message_words_insert AFTER INSERT ON messages FOR EACH ROW EXECUTE FUNCTION message_words_insert();
-- engine-specific
DROP TRIGGER conversation_words_message ON messages;
-- engine-specific
DROP FUNCTION conversation_words_message();
-- engine-specific: the GIN index `messages_search` goes with the column.
ALTER TABLE messages DROP COLUMN search;
