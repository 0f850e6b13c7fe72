-- Web Push subscriptions: one per device of a user (the browser's PushSubscription: its endpoint at the push
-- service, the device's P-256 key and authentication secret, base64url). A push service's 404 or 410 deletes
-- the row.
CREATE TABLE push_subscriptions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    phone       TEXT    NOT NULL,
    device_uuid TEXT    NOT NULL,
    endpoint    TEXT    NOT NULL UNIQUE,
    p256dh      TEXT    NOT NULL,
    auth        TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL,
    UNIQUE (phone, device_uuid)
);
