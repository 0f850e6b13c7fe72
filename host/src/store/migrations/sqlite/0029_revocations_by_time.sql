-- "Sign out everywhere" as each host sees it (store/tokens.rs): a host keeps what it has read of each phone's
-- revocation and, every couple of seconds, reads only the revocations written since its last look — by
-- `before_s`, which is the moment each was written (a second ahead).
CREATE INDEX user_token_revocations_before ON user_token_revocations (before_s);
