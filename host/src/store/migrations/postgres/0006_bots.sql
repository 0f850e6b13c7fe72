-- Bot components (the uploaded bytes, so any host can load them) and what a session waits to show.
CREATE TABLE components (
    digest      TEXT   PRIMARY KEY,
    bytes       BYTEA  NOT NULL,
    size        BIGINT NOT NULL,
    flows       TEXT   NOT NULL,
    uploaded_at BIGINT NOT NULL
);

ALTER TABLE bots ADD COLUMN component_uploaded_at BIGINT;
ALTER TABLE flow_sessions ADD COLUMN pending_steps TEXT;
