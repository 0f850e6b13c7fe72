-- People's preferences (docs/preferences.md): what reaches them and when, set in the app
-- (`/api/v1/me/preferences`).
--
-- One row per person who set something: their IANA time zone, their quiet hours (minutes after their
-- midnight, `quiet_start` to `quiet_end`, across midnight when the end is the smaller; NULL: none set, the
-- partner's default window applies), and the channels they take (1) or refuse (0).
CREATE TABLE preferences (
    phone       TEXT   PRIMARY KEY,
    time_zone   TEXT,
    quiet_start BIGINT,
    quiet_end   BIGINT,
    whatsapp    BIGINT NOT NULL DEFAULT 1,
    sms         BIGINT NOT NULL DEFAULT 1,
    updated_at  BIGINT NOT NULL
);

-- What a person chose for one partner: muted (1: the hub only, no push, no WhatsApp or SMS), blocked (1:
-- nothing from the partner reaches them; its sends fail with `blocked_by_user`), marketing (0: no marketing
-- templates or broadcasts from it).
CREATE TABLE partner_preferences (
    phone      TEXT   NOT NULL,
    partner_id BIGINT NOT NULL REFERENCES partners (id) ON DELETE CASCADE,
    muted      BIGINT NOT NULL DEFAULT 0,
    blocked    BIGINT NOT NULL DEFAULT 0,
    marketing  BIGINT NOT NULL DEFAULT 1,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (phone, partner_id)
);

-- A partner's default quiet window, for people who set none: minutes after midnight in `quiet_time_zone`
-- (the person's own time zone when they set one).
ALTER TABLE partners ADD COLUMN quiet_start BIGINT;
ALTER TABLE partners ADD COLUMN quiet_end BIGINT;
ALTER TABLE partners ADD COLUMN quiet_time_zone TEXT;

-- Why a message failed without a try, in the person's words (`blocked_by_user`, `marketing_refused`).
ALTER TABLE messages ADD COLUMN error TEXT;
