//! Closed sets of names that are stored and sent as strings (states, statuses, modes, channels): declared
//! once with [`string_enum!`], each gets one string form per variant, used alike by the database, the API,
//! the events and the OpenAPI document. Every set stored in a column is here, at the bottom of the house,
//! with the rules that are about the names alone (which state may follow which): the store reads and
//! writes them without knowing the domain modules that use them.

/// Declares a `Copy` enum whose variants each have one string form: `as_str` (a `const fn`, so SQL text can
/// be built from it at compile time), `parse`, `ALL`, `names`, `Display`, `FromStr` (its error names the
/// enum, the text and the names expected: the store's decode errors, the API's query filters), serde with the same strings, and the OpenAPI schema
/// (`ToSchema`) listing them.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        $vis enum $name {
            $( $(#[$variant_meta])* #[serde(rename = $text)] $variant, )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The variant with this string form, if any (exact, case-sensitive).
            pub fn parse(text: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.as_str() == text)
            }

            /// Every string form, in declaration order (for messages and the OpenAPI document's enums).
            pub fn names() -> Vec<&'static str> {
                $name::ALL.iter().map(|v| v.as_str()).collect()
            }
        }

        /// In the OpenAPI document: a string with exactly these values.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(text: &str) -> std::result::Result<$name, String> {
                $name::parse(text).ok_or_else(|| {
                    format!("unknown {} {text:?}: expected one of {}", stringify!($name), $name::names().join(", "))
                })
            }
        }
    };
}

pub(crate) use string_enum;

// Messages: where a message is, who sent it, what it carries, the channels it travels on, and its delivery attempts.

string_enum! {
    /// Where a message is (the `state` of a message record and of `message.status` events).
    pub enum MessageState {
        /// Accepted, waiting for the delivery worker.
        Queued = "queued",
        /// Handed to a channel (the hub, WhatsApp or SMS).
        Sent = "sent",
        /// In the user's app, or confirmed by the provider.
        Delivered = "delivered",
        /// Opened by the user (or marked read by the partner).
        Read = "read",
        /// Every channel failed.
        Failed = "failed",
        /// Accepted to be sent later (`send_at`): nothing is tried before then.
        Scheduled = "scheduled",
        /// Canceled by its sender before it went (a scheduled message).
        Canceled = "canceled",
    }
}

string_enum! {
    /// What a member of a partner may do: `owner` everything, members included; `admin` everything but
    /// members and the audit log; `agent` conversations and contacts only (see `members::allows`).
    pub enum MemberRole {
        Owner = "owner",
        Admin = "admin",
        Agent = "agent",
    }
}

string_enum! {
    /// Who sent a message: `out` from a partner (or a developer, or a bot) to a user, `in` from a user.
    pub enum Direction {
        Out = "out",
        In = "in",
    }
}

string_enum! {
    /// What a message carries.
    pub enum ContentType {
        Text = "text",
        Image = "image",
        Document = "document",
        Audio = "audio",
        Video = "video",
        Link = "link",
        Html = "html",
        System = "system",
    }
}

string_enum! {
    /// How a hub message is encrypted: only end to end.
    pub enum Encryption {
        E2e = "e2e",
    }
}

string_enum! {
    /// The end-to-end mode of a conversation message.
    pub enum E2eMode {
        Conversation = "conversation",
    }
}

string_enum! {
    /// The channels a message travels on (the `channel` of messages and attempts), a template is written
    /// for, and a bot answers on.
    pub enum Channel {
        /// The in-app hub inbox.
        Inapp = "inapp",
        Whatsapp = "whatsapp",
        Sms = "sms",
    }
}

string_enum! {
    /// What a delivery attempt carried: the message itself, or the opaque alert about an encrypted message
    /// for a user who is not in the app.
    pub enum AttemptKind {
        Delivery = "delivery",
        Alert = "alert",
    }
}

string_enum! {
    /// How a provider took an attempt: accepted (`sent`, later confirmed or failed by its receipts),
    /// refused (`failed`), or not tried because it could not carry this message (`skipped`: free-form
    /// WhatsApp text to someone outside the 24-hour window, `error` = `outside_24h_window`); or not yet
    /// (`waiting`, until its `retry_at`: the sender is paced or throttled, or the provider is down).
    pub enum AttemptState {
        Sent = "sent",
        Failed = "failed",
        Skipped = "skipped",
        Waiting = "waiting",
    }
}

impl ContentType {
    /// The types whose message carries a file (`media_url` or `media_base64`).
    pub fn is_media(self) -> bool {
        matches!(self, ContentType::Image | ContentType::Document | ContentType::Audio | ContentType::Video)
    }
}

impl MessageState {
    /// The states an outgoing message passes through to the user's app, in order.
    pub const HUB_PATH: [MessageState; 4] =
        [MessageState::Queued, MessageState::Sent, MessageState::Delivered, MessageState::Read];
    /// Its place on [`MessageState::HUB_PATH`]; `None` off it (failed, or a user's own message).
    pub fn hub_step(self) -> Option<usize> {
        MessageState::HUB_PATH.iter().position(|s| *s == self)
    }

    /// The states of a message the user's app does not have yet.
    pub const UNDELIVERED: [MessageState; 2] = [MessageState::Queued, MessageState::Sent];
    /// The states a message can be marked read from.
    pub const BEFORE_READ: [MessageState; 3] = [MessageState::Queued, MessageState::Sent, MessageState::Delivered];

    /// The first state of a message: outgoing messages wait for delivery; a user's own message has reached
    /// the partner.
    pub fn initial(direction: Direction) -> MessageState {
        match direction {
            Direction::Out => MessageState::Queued,
            Direction::In => MessageState::Delivered,
        }
    }
}

impl MemberRole {
    /// How much a role may do: an owner above an admin above an agent.
    pub fn rank(self) -> u8 {
        match self {
            MemberRole::Owner => 2,
            MemberRole::Admin => 1,
            MemberRole::Agent => 0,
        }
    }
}

// Support conversations.

string_enum! {
    /// Where a support conversation is.
    pub enum ConversationState {
        /// Waiting for an agent (the user wrote last).
        Open = "open",
        /// Waiting for the user (an agent replied last).
        Pending = "pending",
        /// Closed by the partner; the user's next message reopens it.
        Closed = "closed",
    }
}

string_enum! {
    /// How a partner's new and reopened conversations find an agent.
    pub enum AssignmentMode {
        /// Agents take or are given conversations by hand; nothing is assigned by itself.
        Manual = "manual",
        /// Each goes to the online agent given one longest ago, below their capacity.
        RoundRobin = "round_robin",
        /// Each goes to the online agent with the fewest open conversations, below their capacity.
        Capacity = "capacity",
    }
}

string_enum! {
    /// Which SLA runs on a conversation waiting for the partner's agents.
    pub enum SlaKind {
        /// The person's first message waits for any agent reply.
        FirstResponse = "first_response",
        /// The person wrote again after an agent's reply.
        NextResponse = "next_response",
    }
}

string_enum! {
    /// Whether a member takes conversations now: only those `online` are given new ones; going `offline`
    /// hands theirs that are not closed back to the queue (or to another agent online).
    pub enum AgentStatus {
        Online = "online",
        Away = "away",
        Offline = "offline",
    }
}

string_enum! {
    /// What became of a message a user sent from WhatsApp or SMS (`inbound`).
    pub enum InboundState {
        /// Kept, not routed yet.
        Received = "received",
        /// Now a user's message in a support conversation.
        Routed = "routed",
        /// A STOP keyword: the phone opted out of the sender.
        OptedOut = "opted_out",
        /// A START keyword: the opt-out cleared.
        OptedIn = "opted_in",
        /// No partner to give it to (the sender got one polite reply).
        Unrouted = "unrouted",
        /// A kind of message not carried yet (kept as it came).
        Unsupported = "unsupported",
        /// Routing it failed again and again (kept; see the host's log).
        Failed = "failed",
    }
}

// Payments of bots' payment steps, and the moves between their states.

string_enum! {
    /// Where a payment is.
    pub enum PaymentState {
        /// Created; the user has not paid yet.
        RequiresPayment = "requires_payment",
        /// The provider has the payment but not its result yet (e.g. a bank transfer).
        Processing = "processing",
        /// Paid.
        Succeeded = "succeeded",
        /// Refused by the provider (or declined on the dev checkout).
        Failed = "failed",
        /// Abandoned: the checkout expired or the user cancelled it.
        Canceled = "canceled",
        /// Paid, then refunded in full.
        Refunded = "refunded",
    }
}

string_enum! {
    /// Who takes a payment.
    pub enum ProviderName {
        /// The checkout page the host serves itself (development).
        Dev = "dev",
        /// Stripe Checkout.
        Stripe = "stripe",
    }
}

impl PaymentState {
    /// Whether a payment may move from `self` to `to`. A final state never moves back (an event that
    /// arrives late, such as a `processing` after `succeeded`, changes nothing); only `succeeded` is
    /// refunded.
    pub fn may_become(self, to: PaymentState) -> bool {
        use PaymentState::*;
        matches!(
            (self, to),
            (RequiresPayment, Processing | Succeeded | Failed | Canceled)
                | (Processing, Succeeded | Failed | Canceled)
                | (Succeeded, Refunded)
        )
    }

    /// The `payment-status` the guest gets for this outcome (WIT `hubbub:bot/payments`): `confirmed`,
    /// `declined` or `cancelled`; `None` for states the guest is not told about.
    pub fn guest_status(self) -> Option<&'static str> {
        match self {
            PaymentState::Succeeded => Some("confirmed"),
            PaymentState::Failed => Some("declined"),
            PaymentState::Canceled => Some("cancelled"),
            _ => None,
        }
    }
}

// Flow and chat sessions of bots.

string_enum! {
    /// Where a session is.
    pub enum SessionState {
        /// A flow the user was invited to and has not opened.
        Invited = "invited",
        InProgress = "in_progress",
        /// A finished flow: its card is read-only.
        Completed = "completed",
    }
}

string_enum! {
    /// What a session is: a flow invitation, or an in-app chat with a bot.
    pub enum SessionKind {
        Flow = "flow",
        Chat = "chat",
    }
}

// Webhook deliveries (the outbox).

string_enum! {
    /// Where the delivery of one event to its webhook is.
    pub enum DeliveryState {
        /// Waiting for its (next) attempt.
        Pending = "pending",
        /// The endpoint answered 2xx.
        Succeeded = "succeeded",
        /// Every attempt failed (or there is no endpoint): no more tries unless retried by hand.
        Dead = "dead",
    }
}

// Templates and their review.

string_enum! {
    /// Where a template is in its review (its `status`): written as a `draft`, submitted (`pending`),
    /// then `approved` or `rejected` (a rejected template may be edited and submitted again).
    pub enum TemplateStatus {
        Draft = "draft",
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
    }
}

impl TemplateStatus {
    /// A review decision, which the partner hears of as a `template.status` event.
    pub fn is_decision(self) -> bool {
        matches!(self, TemplateStatus::Approved | TemplateStatus::Rejected)
    }

    /// Whether a template in this status may be submitted for review.
    pub fn can_submit(self) -> bool {
        matches!(self, TemplateStatus::Draft | TemplateStatus::Rejected)
    }
}

string_enum! {
    /// What a template is for (WhatsApp's categories).
    pub enum Category {
        Utility = "utility",
        Marketing = "marketing",
        Authentication = "authentication",
    }
}

// Bots.

string_enum! {
    /// Where a bot's answers come from: `local`, its Wasm component run by this host in the sandbox, or
    /// `webhook`, the partner's own server, called with signed events and answering through the inbound
    /// webhook.
    #[derive(Default)]
    pub enum RuntimeMode {
        #[default]
        Local = "local",
        Webhook = "webhook",
    }
}

// End-user accounts.

string_enum! {
    /// Whether the user has signed in (claimed the account) yet.
    pub enum AccountState {
        Unclaimed = "unclaimed",
        Claimed = "claimed",
    }
}

// The end user's live events (`GET /me/events`).

string_enum! {
    /// What an event of a user's stream says changed; its body is what the app renders.
    pub enum UserEventKind {
        /// A hub message arrived (the inbox row).
        MessageCreated = "message.created",
        /// A hub message changed state (read or unread on another device, delivered).
        MessageUpdated = "message.updated",
        /// A message in one of the user's support conversations (either side's).
        ConversationMessage = "conversation.message",
        /// A support conversation changed state.
        ConversationUpdated = "conversation.updated",
        /// The other side of a support conversation is writing (an agent, to the person; the person in the
        /// app, to the agents): shown for a few seconds, never replayed once stale.
        ConversationTyping = "conversation.typing",
        /// A flow or chat session has something new (a bot's steps, a payment's outcome).
        FlowUpdated = "flow.updated",
        /// The user's account changed.
        AccountUpdated = "account.updated",
        /// A partner's webhook deliveries were tried (on the partner's own log, for the console's delivery
        /// log: the subject is the newest delivery's row id; the event carries nothing else).
        WebhookDeliveries = "webhook.deliveries",
    }
}

impl UserEventKind {
    /// The kinds whose subject is a message (a stream sends that message with the event).
    pub const ABOUT_A_MESSAGE: [UserEventKind; 3] =
        [UserEventKind::MessageCreated, UserEventKind::MessageUpdated, UserEventKind::ConversationMessage];

    /// Whether an event of this kind is about a message ([`UserEventKind::ABOUT_A_MESSAGE`]).
    pub fn is_about_a_message(self) -> bool {
        UserEventKind::ABOUT_A_MESSAGE.contains(&self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_string_form<T>(all: &[T], as_str: fn(T) -> &'static str, parse: fn(&str) -> Option<T>)
    where
        T: Copy + PartialEq + std::fmt::Debug + std::fmt::Display + serde::Serialize + serde::de::DeserializeOwned,
    {
        for &v in all {
            let text = as_str(v);
            assert_eq!(serde_json::to_value(v).unwrap(), text);
            assert_eq!(serde_json::from_value::<T>(text.into()).unwrap(), v);
            assert_eq!(parse(text), Some(v));
            assert_eq!(v.to_string(), text);
            assert_eq!(parse(&text.to_uppercase()), None, "{text}: parsing is exact");
        }
        assert_eq!(parse(""), None);
    }

    #[test]
    fn every_declared_name_has_one_string_form() {
        one_string_form(MessageState::ALL, MessageState::as_str, MessageState::parse);
        one_string_form(Direction::ALL, Direction::as_str, Direction::parse);
        one_string_form(ConversationState::ALL, ConversationState::as_str, ConversationState::parse);
        one_string_form(InboundState::ALL, InboundState::as_str, InboundState::parse);
        one_string_form(TemplateStatus::ALL, TemplateStatus::as_str, TemplateStatus::parse);
        one_string_form(RuntimeMode::ALL, RuntimeMode::as_str, RuntimeMode::parse);
        one_string_form(Channel::ALL, Channel::as_str, Channel::parse);
        one_string_form(AttemptKind::ALL, AttemptKind::as_str, AttemptKind::parse);
        one_string_form(AttemptState::ALL, AttemptState::as_str, AttemptState::parse);
        one_string_form(ContentType::ALL, ContentType::as_str, ContentType::parse);
        one_string_form(Encryption::ALL, Encryption::as_str, Encryption::parse);
        one_string_form(E2eMode::ALL, E2eMode::as_str, E2eMode::parse);
        one_string_form(Category::ALL, Category::as_str, Category::parse);
        one_string_form(AccountState::ALL, AccountState::as_str, AccountState::parse);
        one_string_form(DeliveryState::ALL, DeliveryState::as_str, DeliveryState::parse);
        one_string_form(SessionState::ALL, SessionState::as_str, SessionState::parse);
        one_string_form(SessionKind::ALL, SessionKind::as_str, SessionKind::parse);
        one_string_form(UserEventKind::ALL, UserEventKind::as_str, UserEventKind::parse);
        one_string_form(MemberRole::ALL, MemberRole::as_str, MemberRole::parse);
        one_string_form(AssignmentMode::ALL, AssignmentMode::as_str, AssignmentMode::parse);
        one_string_form(AgentStatus::ALL, AgentStatus::as_str, AgentStatus::parse);
        one_string_form(SlaKind::ALL, SlaKind::as_str, SlaKind::parse);
        assert_eq!(Channel::names(), ["inapp", "whatsapp", "sms"]);
        assert_eq!(E2eMode::Conversation.as_str(), crate::encryption::MODE_CONVERSATION);
        assert_eq!(MessageState::names(), ["queued", "sent", "delivered", "read", "failed", "scheduled", "canceled"]);
        assert_eq!(
            "sending".parse::<MessageState>(),
            Err("unknown MessageState \"sending\": expected one of queued, sent, delivered, read, failed, scheduled, \
                 canceled"
                .to_string())
        );
    }

    #[test]
    fn outgoing_messages_start_queued_and_incoming_ones_delivered() {
        assert_eq!(MessageState::initial(Direction::Out), MessageState::Queued);
        assert_eq!(MessageState::initial(Direction::In), MessageState::Delivered);
        assert_eq!(MessageState::HUB_PATH[..3], MessageState::BEFORE_READ);
    }

    #[test]
    fn rejected_templates_may_be_submitted_again_and_decisions_are_told() {
        assert!(TemplateStatus::Rejected.can_submit() && !TemplateStatus::Pending.can_submit());
        assert!(TemplateStatus::Approved.is_decision() && !TemplateStatus::Draft.is_decision());
    }
}
