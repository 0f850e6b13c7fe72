-- WhatsApp templates reviewed by Meta: the id the Cloud API gave a submitted template, so its status
-- (a webhook or the background poll) finds it.
ALTER TABLE templates ADD COLUMN provider_template_id TEXT;
CREATE INDEX templates_provider_template_id ON templates (provider_template_id);

-- The 24-hour customer-service window: when each phone last wrote to the business on WhatsApp. Free-form
-- WhatsApp text goes only inside it; outside it, only approved templates do.
CREATE TABLE whatsapp_windows (
    phone           TEXT   PRIMARY KEY,
    last_inbound_at BIGINT NOT NULL
);
