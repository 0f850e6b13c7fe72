-- The people of a partner: members with a role (owner, admin, agent), who join by a single-use invitation
-- and sign in by phone and one-time code into a cookie session; and the audit log of what members changed.
-- Invitation and session tokens are stored as SHA-256 digests only. Times are epoch milliseconds.
CREATE TABLE members (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id  BIGINT  NOT NULL REFERENCES partners(id),
    phone       TEXT    NOT NULL,
    name        TEXT,
    role        TEXT    NOT NULL CHECK (role IN ('owner', 'admin', 'agent')),
    created_at  BIGINT  NOT NULL,
    UNIQUE (partner_id, phone)
);
CREATE INDEX members_phone ON members (phone);

CREATE TABLE member_invitations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id  BIGINT  NOT NULL REFERENCES partners(id),
    role        TEXT    NOT NULL CHECK (role IN ('owner', 'admin', 'agent')),
    token_hash  TEXT    NOT NULL UNIQUE,
    invited_by  BIGINT  REFERENCES members(id),
    created_at  BIGINT  NOT NULL,
    expires_at  BIGINT  NOT NULL,
    used_at     BIGINT,
    used_by     BIGINT  REFERENCES members(id)
);
CREATE INDEX member_invitations_partner ON member_invitations (partner_id, id);

CREATE TABLE member_sessions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    member_id    BIGINT  NOT NULL REFERENCES members(id),
    token_hash   TEXT    NOT NULL UNIQUE,
    created_at   BIGINT  NOT NULL,
    last_seen_at BIGINT  NOT NULL,
    ends_at      BIGINT  NOT NULL,
    ended_at     BIGINT,
    address      TEXT,
    user_agent   TEXT
);
CREATE INDEX member_sessions_member ON member_sessions (member_id, id);

CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    partner_id  BIGINT  NOT NULL REFERENCES partners(id),
    member_id   BIGINT  REFERENCES members(id),
    action      TEXT    NOT NULL,
    target      TEXT    NOT NULL,
    status      INTEGER NOT NULL,
    address     TEXT,
    at          BIGINT  NOT NULL
);
CREATE INDEX audit_log_partner ON audit_log (partner_id, id);
