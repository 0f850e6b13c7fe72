-- What a partner's conversations came to, hour by hour and agent by agent (issue 74, point 9;
-- `GET /api/v1/analytics/conversations`): kept as it happens, in the transaction of each change, so that the
-- figures are read from these rows and never by scanning conversations. `agent_id` 0: no member (the
-- partner key, nobody assigned).
CREATE TABLE conversation_rollups (
    partner_id        BIGINT NOT NULL,
    hour              BIGINT NOT NULL,
    agent_id          BIGINT NOT NULL,
    opened            BIGINT NOT NULL DEFAULT 0,
    resolved          BIGINT NOT NULL DEFAULT 0,
    resolution_ms     BIGINT NOT NULL DEFAULT 0,
    first_responses   BIGINT NOT NULL DEFAULT 0,
    first_response_ms BIGINT NOT NULL DEFAULT 0,
    sla_breaches      BIGINT NOT NULL DEFAULT 0,
    ratings           BIGINT NOT NULL DEFAULT 0,
    rating_sum        BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (partner_id, hour, agent_id)
);
