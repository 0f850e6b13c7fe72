-- Text search over what users read (store/search.rs): each engine's own index. Here, a tsvector column
-- computed from the text of each message and conversation (the language-neutral 'simple' configuration: no
-- stemming, as SQLite's tokenizer), with a GIN index. Encrypted messages have no body: nothing to index.
-- engine-specific: tsvector columns and GIN indexes (SQLite: FTS5 virtual tables and triggers).
ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig,
    COALESCE(rendered_body, body, '') || ' ' || COALESCE(content::jsonb ->> 'subject', '') || ' '
    || COALESCE(content::jsonb ->> 'preview', '') || ' ' || COALESCE(content::jsonb #>> '{link,title}', '') || ' '
    || COALESCE(content::jsonb #>> '{link,label}', '') || ' ' || COALESCE(content::jsonb #>> '{link,description}', '')
    || ' ' || COALESCE(content::jsonb #>> '{media,filename}', '') || ' ' || COALESCE(content::jsonb #>> '{flow,title}', '')))
    STORED;
-- engine-specific
CREATE INDEX messages_search ON messages USING GIN (search);
-- engine-specific
ALTER TABLE conversations ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, COALESCE(subject, ''))) STORED;
-- engine-specific
CREATE INDEX conversations_search ON conversations USING GIN (search);
