-- Provider delivery receipts: the provider's id of each SMS/WhatsApp attempt (Twilio's MessageSid, the
-- WhatsApp message id), so a status callback finds its message.
ALTER TABLE delivery_attempts ADD COLUMN provider_ref TEXT;
CREATE INDEX delivery_attempts_provider_ref ON delivery_attempts (channel, provider_ref);

-- A job queued again by a receipt: `sms` (WhatsApp failed after accepting the message: try SMS) or
-- `alert_sms` (the WhatsApp alert failed after acceptance: send it by SMS).
ALTER TABLE delivery_jobs ADD COLUMN resume TEXT;
