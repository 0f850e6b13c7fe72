-- Provider delivery receipts: the provider's id of each SMS/WhatsApp attempt (Twilio's MessageSid, the
-- WhatsApp message id), so a status callback finds its message.
ALTER TABLE delivery_attempts ADD COLUMN provider_ref TEXT;
CREATE INDEX delivery_attempts_provider_ref ON delivery_attempts (channel, provider_ref);
