-- Delivery that respects the providers (docs/providers.md, "Pacing and throttles").
--
-- One row per paced budget: a sender's messages a second (`wa:`/`sms:` account and address) or WhatsApp's
-- pair rate (`pair:` with the person's phone). Times in microseconds of the hosts' clock: `next_at` is the
-- first free slot, `queue_at` the end of the line of messages that wait for one (they come back at their
-- turn instead of all at once), `went` what the last reservation did (1: it took a slot; 0: it joined the line).
CREATE TABLE pacing (
    key      TEXT   PRIMARY KEY,
    next_at  BIGINT NOT NULL,
    queue_at BIGINT NOT NULL,
    went     BIGINT NOT NULL
);

-- A delivery that waits (paced, throttled, a provider down) is put back: the channel its chain goes on
-- from, when the provider's outage began for it (the partner's retry budget counts from then), and how many
-- times it waited (the backoff grows with it).
ALTER TABLE delivery_jobs ADD COLUMN chain_from TEXT;
ALTER TABLE delivery_jobs ADD COLUMN outage_since BIGINT;
ALTER TABLE delivery_jobs ADD COLUMN waits BIGINT NOT NULL DEFAULT 0;

-- An attempt that waits (`state` 'waiting') says until when.
ALTER TABLE delivery_attempts ADD COLUMN retry_at BIGINT;

-- A partner's own sender's messages a second (NULL: the host's default for its channel).
ALTER TABLE partner_senders ADD COLUMN mps BIGINT;

-- Seconds a partner's messages wait out a provider's outage before the chain moves on (NULL: 60).
ALTER TABLE partners ADD COLUMN provider_retry_s BIGINT;

-- A message sent later (`send_at` on `POST /messages`): `scheduled` until then, its delivery job due then.
ALTER TABLE messages ADD COLUMN send_at BIGINT;

-- A broadcast sent later: `scheduled` until then (its fan-out starts then), `canceled` if canceled before.
ALTER TABLE broadcasts ADD COLUMN send_at BIGINT;

-- Partners that asked for a `message.attempt` webhook event for every WhatsApp and SMS try (1).
ALTER TABLE partners ADD COLUMN attempt_events BIGINT NOT NULL DEFAULT 0;

-- Meta's messaging limit: business-initiated messages to new people a rolling 24 hours, per business
-- account (every number of it shares the count). `account` as senders keep it ('' for the host's own);
-- `daily_limit` NULL: unlimited; `quality` what Meta's last `phone_number_quality_update` said.
CREATE TABLE messaging_limits (
    account     TEXT   PRIMARY KEY,
    daily_limit BIGINT,
    quality     TEXT,
    updated_at  BIGINT NOT NULL
);
-- The people a business account reached first in the last 24 hours (a template to someone whose window is
-- closed): the count a limit is held to.
CREATE TABLE whatsapp_initiated (
    account TEXT   NOT NULL,
    phone   TEXT   NOT NULL,
    at      BIGINT NOT NULL,
    PRIMARY KEY (account, phone)
);
CREATE INDEX whatsapp_initiated_recent ON whatsapp_initiated (account, at);

-- What a partner's WhatsApp messages do when the limit is reached: 'wait' for room, or go by 'sms'.
ALTER TABLE partners ADD COLUMN over_limit TEXT NOT NULL DEFAULT 'wait';
