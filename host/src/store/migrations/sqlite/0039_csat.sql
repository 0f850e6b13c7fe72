-- Satisfaction ratings (issue 74, point 4; docs/api.md "Ratings (CSAT)"): whether the partner asks the
-- person to rate a conversation when it is closed, and the question; per conversation, when it was asked
-- (and of whose work: the assignee then), the score (1 to 5), the comment and when it was given.
ALTER TABLE partners ADD COLUMN csat_enabled BIGINT NOT NULL DEFAULT 0;
ALTER TABLE partners ADD COLUMN csat_question TEXT;
ALTER TABLE conversations ADD COLUMN csat_asked_at BIGINT;
ALTER TABLE conversations ADD COLUMN csat_agent_id BIGINT;
ALTER TABLE conversations ADD COLUMN csat_score BIGINT;
ALTER TABLE conversations ADD COLUMN csat_comment TEXT;
ALTER TABLE conversations ADD COLUMN csat_rated_at BIGINT;
-- The ratings of a partner's agents (their averages), and a person's question waiting for an answer.
CREATE INDEX conversations_csat_agent ON conversations (partner_id, csat_agent_id) WHERE csat_score IS NOT NULL;
CREATE INDEX conversations_csat_waiting ON conversations (phone, csat_asked_at) WHERE csat_asked_at IS NOT NULL AND csat_score IS NULL;
