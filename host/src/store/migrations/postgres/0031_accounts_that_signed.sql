-- Hardening III (docs/security.md, "Provider webhooks"). A provider's signature speaks for one account: the
-- host's own (`account` '') or a partner's own sender's (its Twilio account SID, or its WhatsApp business
-- account id). What a signed webhook sets is kept by the account that received it, so a partner's signature
-- reaches only what is its own: the messages people send (`inbound_messages.account`), opt-outs, and the phone
-- each WhatsApp username (BSUID) was seen with.
ALTER TABLE inbound_messages ADD COLUMN account TEXT NOT NULL DEFAULT '';
UPDATE inbound_messages SET account = (
    SELECT s.account FROM partner_senders s WHERE s.channel = inbound_messages.channel AND s.address = inbound_messages.sender
) WHERE EXISTS (
    SELECT 1 FROM partner_senders s WHERE s.channel = inbound_messages.channel AND s.address = inbound_messages.sender
);

CREATE TABLE opt_outs_by_account (
    phone   TEXT   NOT NULL,
    channel TEXT   NOT NULL CHECK (channel IN ('whatsapp', 'sms')),
    account TEXT   NOT NULL,
    sender  TEXT   NOT NULL,
    reason  TEXT   NOT NULL,
    at      BIGINT NOT NULL,
    PRIMARY KEY (phone, channel, account, sender)
);
INSERT INTO opt_outs_by_account (phone, channel, account, sender, reason, at)
SELECT o.phone, o.channel, COALESCE(s.account, ''), o.sender, o.reason, o.at
FROM opt_outs o LEFT JOIN partner_senders s ON s.channel = o.channel AND s.address = o.sender;
-- An opt-out of an address a partner held is kept for the host's own too: should that address have been the
-- host's (a sender taken before partners' own senders were checked), its people stay opted out.
INSERT INTO opt_outs_by_account (phone, channel, account, sender, reason, at)
SELECT o.phone, o.channel, '', o.sender, o.reason, o.at
FROM opt_outs o JOIN partner_senders s ON s.channel = o.channel AND s.address = o.sender;
DROP TABLE opt_outs;
ALTER TABLE opt_outs_by_account RENAME TO opt_outs;

-- Each pairing is the receiving number's (`sender`, of `account`); rebuilt from the messages kept: each
-- number's latest message with a phone for that BSUID (one grouped pass, not a lookup per message).
CREATE TABLE whatsapp_users_by_number (
    account TEXT   NOT NULL,
    sender  TEXT   NOT NULL,
    user_id TEXT   NOT NULL,
    phone   TEXT   NOT NULL,
    seen_at BIGINT NOT NULL,
    PRIMARY KEY (account, sender, user_id)
);
INSERT INTO whatsapp_users_by_number (account, sender, user_id, phone, seen_at)
SELECT i.account, i.sender, i.user_id, i.phone, i.received_at
FROM inbound_messages i JOIN (
    SELECT MAX(id) AS id FROM inbound_messages
    WHERE channel = 'whatsapp' AND user_id IS NOT NULL AND phone <> ''
    GROUP BY account, sender, user_id
) latest ON latest.id = i.id;
DROP TABLE whatsapp_users;
ALTER TABLE whatsapp_users_by_number RENAME TO whatsapp_users;

-- WhatsApp's 24-hour window is a number's (Meta keeps one per business number): kept per the number (and
-- account) a person wrote to. The windows open when this ran are kept for any number (`account` and `sender`
-- empty) for the hours they have left.
CREATE TABLE whatsapp_windows_by_number (
    account         TEXT   NOT NULL,
    sender          TEXT   NOT NULL,
    phone           TEXT   NOT NULL,
    last_inbound_at BIGINT NOT NULL,
    PRIMARY KEY (account, sender, phone)
);
INSERT INTO whatsapp_windows_by_number (account, sender, phone, last_inbound_at)
SELECT '', '', phone, last_inbound_at FROM whatsapp_windows;
DROP TABLE whatsapp_windows;
ALTER TABLE whatsapp_windows_by_number RENAME TO whatsapp_windows;

-- An API key acts with the role of the member who made it (`created_by`; none: made by the command line or
-- by an owner's key before there were roles, an owner's). The audit log names the key a call was made with.
ALTER TABLE partner_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'owner' CHECK (role IN ('owner', 'admin', 'agent'));
ALTER TABLE partner_keys ADD COLUMN created_by BIGINT;
ALTER TABLE audit_log ADD COLUMN key_id BIGINT;
-- Keys members made in the console before this: their maker is the member the audit log names for the
-- `POST /api/v1/api-keys` answered 201 as the key was made (within 5 seconds), and they take that member's
-- role now. Keys made with another key were not audited: they stay owners' (docs/security.md says so).
UPDATE partner_keys SET created_by = (
    SELECT a.member_id FROM audit_log a
    WHERE a.partner_id = partner_keys.partner_id AND a.action = 'POST /api/v1/api-keys' AND a.status = 201
      AND a.member_id IS NOT NULL AND a.at >= partner_keys.created_at AND a.at <= partner_keys.created_at + 5000
    ORDER BY a.at LIMIT 1
);
UPDATE partner_keys SET role = (SELECT m.role FROM members m WHERE m.id = partner_keys.created_by)
WHERE created_by IS NOT NULL AND EXISTS (SELECT 1 FROM members m WHERE m.id = partner_keys.created_by);

-- A conversation keeps the account its person's latest message came through (`''`: the app, or the host's
-- own senders): a message to the host's shared number goes on only in a conversation of the app's or the
-- shared numbers', never in one a partner's own number holds (its signature could have forged it). Kept from
-- each conversation's latest message that came by a provider.
ALTER TABLE conversations ADD COLUMN account TEXT NOT NULL DEFAULT '';
UPDATE conversations SET account = latest.account FROM (
    SELECT m.conversation_id AS conversation_id, i.account AS account
    FROM inbound_messages i JOIN messages m ON m.id = i.message_id
    WHERE i.id IN (
        SELECT MAX(i2.id) FROM inbound_messages i2 JOIN messages m2 ON m2.id = i2.message_id
        WHERE m2.conversation_id IS NOT NULL GROUP BY m2.conversation_id
    )
) latest WHERE latest.conversation_id = conversations.id AND latest.account <> '';
