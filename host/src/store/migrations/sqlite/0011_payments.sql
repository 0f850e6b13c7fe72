-- Payments the host owns: a guest's payment step becomes a payment with a provider checkout; only a verified
-- provider outcome (or the dev checkout) moves it and tells the guest, once.
CREATE TABLE payments (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    ref                TEXT   NOT NULL UNIQUE,
    partner_id         BIGINT NOT NULL REFERENCES partners(id),
    bot_id             BIGINT NOT NULL REFERENCES bots(id),
    session_id         BIGINT NOT NULL REFERENCES flow_sessions(id),
    phone              TEXT   NOT NULL,
    guest_id           TEXT   NOT NULL,
    amount_minor       BIGINT NOT NULL,
    currency           TEXT   NOT NULL,
    description        TEXT   NOT NULL,
    state              TEXT   NOT NULL,
    seq                BIGINT NOT NULL,
    provider           TEXT   NOT NULL,
    provider_ref       TEXT,
    provider_payment   TEXT,
    checkout_url       TEXT,
    guest_notified_at  BIGINT,
    refund_requested_at BIGINT,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);
CREATE INDEX payments_partner ON payments (partner_id, id);
CREATE INDEX payments_provider_ref ON payments (provider, provider_ref);
CREATE INDEX payments_provider_payment ON payments (provider, provider_payment);

-- Provider events already applied (Stripe event ids): a repeated delivery changes nothing.
CREATE TABLE payment_provider_events (
    provider    TEXT   NOT NULL,
    event_id    TEXT   NOT NULL,
    received_at BIGINT NOT NULL,
    PRIMARY KEY (provider, event_id)
);
