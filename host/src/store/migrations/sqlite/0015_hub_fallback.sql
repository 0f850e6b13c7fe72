-- The fallback after the hub: when no device of the user got an in-app message within a window, it goes on
-- to WhatsApp, then SMS. The window in seconds: NULL = the next level's (message → partner → the host's
-- HUBBUB_HUB_FALLBACK_AFTER_S), -1 = the hub only.
ALTER TABLE messages ADD COLUMN fallback_after_s BIGINT;
ALTER TABLE partners ADD COLUMN hub_fallback_after_s BIGINT;
-- When the fallback of a message started (once: the claim that keeps a device and the timer from both
-- sending it).
ALTER TABLE messages ADD COLUMN hub_fallback_at BIGINT;
