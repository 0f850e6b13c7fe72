-- The second security review.

-- Media an end user uploaded (their phone; NULL: a partner's): served as a download only, and counted
-- against the user's upload quota.
ALTER TABLE media ADD COLUMN uploaded_by TEXT;
CREATE INDEX media_uploaded_by ON media (uploaded_by, created_at);

-- The client address a one-time code was asked from: the send limit counts per phone and address, under
-- a higher per-phone ceiling, so one address cannot lock a phone's owner out.
ALTER TABLE otp_codes ADD COLUMN client_addr TEXT;

-- "Sign out everywhere": a user's tokens issued before `before_s` (seconds since the epoch) are refused
-- on every host.
CREATE TABLE user_token_revocations (
    phone    TEXT   PRIMARY KEY,
    before_s BIGINT NOT NULL
);
