-- Several API keys per partner, so a key can be replaced without downtime: create a new one, move the
-- clients to it, revoke the old one. Keys are stored as SHA-256 digests with a displayable prefix; a revoked
-- key keeps its row (who had it, when it stopped). Authentication reads this table; `partners.key_hash` keeps
-- the key the partner was created with (or last rotated to), for the record only.
CREATE TABLE partner_keys (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id   BIGINT  NOT NULL REFERENCES partners(id),
    name         TEXT    NOT NULL,
    key_hash     TEXT    NOT NULL UNIQUE,
    key_prefix   TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX partner_keys_partner ON partner_keys (partner_id, id);

INSERT INTO partner_keys (partner_id, name, key_hash, key_prefix, created_at)
SELECT id, 'default', key_hash, key_prefix, created_at FROM partners;
