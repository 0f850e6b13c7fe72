-- Members' passkeys (WebAuthn): the credential as webauthn-rs keeps it (its public key, counter and flags,
-- as JSON), found by its credential id when a member signs in with it. Removed with the member.
CREATE TABLE member_passkeys (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    member_id     BIGINT  NOT NULL REFERENCES members(id),
    name          TEXT    NOT NULL,
    credential_id TEXT    NOT NULL UNIQUE,
    passkey       TEXT    NOT NULL,
    created_at    BIGINT  NOT NULL,
    last_used_at  BIGINT
);
CREATE INDEX member_passkeys_member ON member_passkeys (member_id);

-- A passkey ceremony between its two requests (the challenge sent, the browser's answer awaited): the state
-- webauthn-rs needs to check the answer, under the digest of the token the browser holds, and the member who
-- began it (a registration; a sign-in's member is the owner of the passkey used); taken once, good for five
-- minutes.
CREATE TABLE passkey_ceremonies (
    token_hash  TEXT    PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('register', 'sign_in')),
    member_id   BIGINT  REFERENCES members(id),
    state       TEXT    NOT NULL,
    expires_at  BIGINT  NOT NULL
);
CREATE INDEX passkey_ceremonies_expiry ON passkey_ceremonies (expires_at);
