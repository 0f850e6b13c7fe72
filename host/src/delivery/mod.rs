//! Delivery: how an accepted message reaches its user. Channels are `inapp` (the hub), `whatsapp` and
//! `sms`; routing picks them (a claimed account with a device is reached in the hub, otherwise WhatsApp
//! then SMS; OTPs go straight to SMS when the user is not online); a worker claims queued messages from
//! the database, tries each channel in turn, and records every try as an attempt and every state change
//! as a `message.status` event, in one transaction per message.

pub mod meta_review;
pub mod pacing;
pub mod push;
pub mod receipts;
pub mod settings;
pub mod signed;
mod texts;
mod window;
mod worker;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;

use crate::channel_steps::Outgoing;
use crate::clock::{Millis, SharedClock};
use crate::config::Config;
use crate::names::{AttemptKind, AttemptState, Channel, MessageState};
use crate::preferences::{self, Honoured, is_marketing};
use crate::providers::{Provider, SendError, TemplateMessage};
use crate::store::deliveries::{Change, Finished, Job, NewAttempt, PutBack};
use crate::store::messages::{self, Message, ToDeliver};
use crate::store::{Db, devices, opt_outs, senders};

use crate::events;
pub use crate::messages::routing::{AFTER_HUB, Recipient, is_encrypted, plan};
use texts::rating_list;
pub use texts::{alert_text, app_link, fallback_text, sender};
pub use window::{find_whatsapp_template, whatsapp_typing, within_window};
use window::{whatsapp_template, window_open};
pub use worker::run_worker;

impl crate::messages::send::HubArrivals for Delivery {
    /// Web Push to the user's devices, beside the send.
    fn arrived(&self, message: Message) {
        self.push.notify(message);
    }
}

/// What delivery works with — the database, the clock, the settings, the channels' providers — and the
/// worker's wake-up signal. Built once before the shared state; the delivery worker and provider receipts
/// get this, never the whole state.
pub struct Delivery {
    pub db: Db,
    pub clock: SharedClock,
    pub config: Arc<Config>,
    pub sms: Arc<dyn Provider>,
    pub whatsapp: Arc<dyn Provider>,
    /// Meta's review of `whatsapp` templates, when the Cloud API and a business account are configured.
    pub meta_review: Option<meta_review::MetaReview>,
    /// Woken when a message is accepted, so delivery starts without waiting for the next poll.
    pub wake: Notify,
    /// Woken when a provider's webhook brings messages from users, so they are routed at once.
    pub inbound_wake: Notify,
    /// Web Push to the user's devices when a message reaches their hub.
    pub push: Arc<push::Push>,
    /// The providers' HTTP client (partners' own senders use it too).
    pub http: reqwest::Client,
    /// Partners' own senders as last read, for [`OWN_SENDER_TTL`] (`None`: the partner has none there).
    own: std::sync::Mutex<HashMap<(i64, Channel), (std::time::Instant, Option<Sending>)>>,
    /// The circuits of the senders this host sends from (a provider down, tried no more for a while).
    pub circuits: pacing::Circuits,
}

/// How long a partner's own sender is used as read before it is read again (a change made through another
/// host takes this long to reach this one; through this host, at once).
const OWN_SENDER_TTL: Duration = Duration::from_secs(5);

/// The provider a message goes out through and the sender it goes from (as opt-outs are kept: the address,
/// and the account it is of, empty for the host's own), and its messages a second.
#[derive(Clone)]
pub struct Sending {
    pub provider: Arc<dyn Provider>,
    pub sender: String,
    pub account: String,
    pub mps: u32,
}

impl Delivery {
    /// The providers the settings choose, over their own HTTP client.
    pub fn new(db: Db, clock: SharedClock, config: Arc<Config>, push: Arc<push::Push>) -> Arc<Delivery> {
        let http = crate::providers::http_client(&config);
        Arc::new(Delivery {
            sms: crate::providers::sms(&config, &db, &clock, &http),
            whatsapp: crate::providers::whatsapp(&config, &db, &clock, &http),
            meta_review: meta_review::MetaReview::from_config(&config, &http),
            wake: Notify::new(),
            inbound_wake: Notify::new(),
            push,
            http,
            own: std::sync::Mutex::default(),
            circuits: pacing::Circuits::default(),
            db,
            clock,
            config,
        })
    }

    /// How `partner_id`'s messages go out on `channel` (WhatsApp or SMS): from the partner's own sender when
    /// it set one, else from the host's (`None` for the hub).
    pub async fn sending(&self, partner_id: Option<i64>, channel: Channel) -> Result<Option<Sending>, sqlx::Error> {
        let shared = self.provider(channel).map(|p| Sending {
            provider: p.clone(),
            sender: self.sender(channel),
            account: String::new(),
            mps: self.default_mps(channel),
        });
        let Some(partner_id) = partner_id.filter(|_| shared.is_some()) else { return Ok(shared) };
        let cached = self.own.lock().expect("not poisoned").get(&(partner_id, channel)).cloned();
        let own = match cached {
            Some((read_at, own)) if read_at.elapsed() < OWN_SENDER_TTL => own,
            _ => {
                let found = senders::of_partner(&self.db, partner_id, channel).await?;
                let own = found.map(|s| Sending {
                    provider: crate::providers::own_sender(&self.config, &self.http, &s),
                    mps: s.mps.unwrap_or_else(|| self.default_mps(channel)),
                    sender: s.address.clone(),
                    account: s.account.clone(),
                });
                let mut cache = self.own.lock().expect("not poisoned");
                cache.insert((partner_id, channel), (std::time::Instant::now(), own.clone()));
                own
            }
        };
        Ok(own.or(shared))
    }

    /// Whether `phone` opted out of the sender `partner_id`'s messages go from on `channel` (its own, or
    /// the host's).
    pub async fn opted_out(&self, partner_id: i64, channel: Channel, phone: &str) -> Result<bool, sqlx::Error> {
        let Some(sending) = self.sending(Some(partner_id), channel).await? else { return Ok(false) };
        Ok(opt_outs::reason(&self.db, phone, channel, &sending.account, &sending.sender).await?.is_some())
    }

    /// Sets a partner's own sender (`senders::register`: checked, proved at the provider, kept) and uses it on
    /// this host from now on.
    pub async fn set_own_sender(
        &self,
        partner_id: i64,
        channel: Channel,
        fields: &crate::senders::Fields,
    ) -> Result<senders::Sender, crate::senders::SenderError> {
        let sender =
            crate::senders::register(&self.db, &self.config, &self.http, partner_id, channel, fields, self.now())
                .await?;
        self.forget_senders(partner_id);
        Ok(sender)
    }

    /// Removes a partner's own sender on `channel` (its messages go from the host's again, on this host at
    /// once); `false` when it had none.
    pub async fn remove_own_sender(&self, partner_id: i64, channel: Channel) -> Result<bool, sqlx::Error> {
        if !senders::remove(&self.db, partner_id, channel).await? {
            return Ok(false);
        }
        self.forget_senders(partner_id);
        Ok(true)
    }

    /// Forgets what was read of a partner's own senders (they were just changed on this host).
    pub fn forget_senders(&self, partner_id: i64) {
        self.own.lock().expect("not poisoned").retain(|(p, _), _| *p != partner_id);
    }

    pub fn now(&self) -> Millis {
        self.clock.now_ms()
    }

    /// The host's messages a second for a sender on `channel` (`HUBBUB_WHATSAPP_MPS`, `HUBBUB_SMS_MPS`).
    pub fn default_mps(&self, channel: Channel) -> u32 {
        match channel {
            Channel::Sms => self.config.sms_mps,
            _ => self.config.whatsapp_mps,
        }
    }

    fn provider(&self, channel: Channel) -> Option<&Arc<dyn Provider>> {
        match channel {
            Channel::Inapp => None,
            Channel::Whatsapp => Some(&self.whatsapp),
            Channel::Sms => Some(&self.sms),
        }
    }

    /// Our sender on `channel`, as opt-outs are kept: the Twilio number or messaging service, the WhatsApp
    /// phone number id (`dev` for the development sink, which has none).
    pub fn sender(&self, channel: Channel) -> String {
        let configured = match channel {
            Channel::Inapp => None,
            Channel::Whatsapp => self.config.whatsapp_phone_number_id.as_deref(),
            Channel::Sms => self.config.twilio_from.as_deref(),
        };
        configured.map(str::trim).filter(|s| !s.is_empty()).unwrap_or("dev").to_string()
    }

    /// Our SMS sender that a message to or from our number `ours` concerns, as opt-outs are kept: the
    /// messaging service when the host sends through one (`MG…`: any number of its pool), the development
    /// sink's `dev` when it has no number, else that number.
    pub fn sms_sender(&self, ours: &str) -> String {
        let configured = self.sender(Channel::Sms);
        if configured.starts_with("MG") || configured == "dev" { configured } else { ours.trim().to_string() }
    }
}

/// Messages claimed at once by one worker.
const CLAIM_BATCH: i64 = 128;

/// What a delivery did, to write; and the alert slot to give back once that is written (an alert that
/// could not be sent).
struct Done {
    finished: Finished,
    release_alert: Option<(i64, String)>,
    /// A message now in the hub: pushed to the user's devices once written.
    notify: Option<Message>,
}

impl Done {
    /// What to write, with no alert slot to give back and nothing to push.
    fn only(finished: Finished) -> Done {
        Done { finished, release_alert: None, notify: None }
    }
}

/// What a job records when it has not (yet) tried a channel or moved its message.
fn unchanged(delivery: &Delivery, job: &Job, message: Message) -> Finished {
    Finished {
        message,
        attempts: Vec::new(),
        change: None,
        at: delivery.now(),
        event: events::message_status,
        follow_up: None,
        ends_job: true,
        put_back: None,
        clears_waiting: job.waits > 0,
        attempt_event: None,
        fallback: false,
    }
}

/// Seconds a partner's messages wait out a provider's outage before the chain moves on, when it set none.
pub const DEFAULT_PROVIDER_RETRY_S: i64 = 60;

/// How a chain of channel tries ended.
enum Chain {
    /// It went through (the last try sent) or ran out of channels: every try made.
    Ended(Vec<(Channel, Outcome)>),
    /// It waits on `channel` (paced, throttled, its provider down) until `until`: the tries made before.
    Waits { tries: Vec<(Channel, Outcome)>, wait: Wait },
}

/// Where a chain waits: on which channel, why, until when, and since when its provider is down.
struct Wait {
    channel: Channel,
    why: &'static str,
    until: Millis,
    reason: Option<String>,
    outage_since: Option<Millis>,
}

/// Whether a try on `channel` of the job waits (paced, throttled; a provider down within the partner's retry
/// budget of `budget_ms`, counted from the outage's first failure), or is what it is (a provider down past
/// the budget: failed).
fn wait_or_settle(
    delivery: &Delivery,
    job: &Job,
    channel: Channel,
    outcome: Outcome,
    budget_ms: i64,
) -> Result<Outcome, Wait> {
    match outcome {
        Outcome::Wait { why, until, reason } => Err(Wait { channel, why, until, reason, outage_since: None }),
        Outcome::Down(reason) => {
            let now = delivery.now();
            let since = job.outage_since.filter(|_| job.chain_from == Some(channel)).unwrap_or(now);
            if now - since >= budget_ms {
                return Ok(Outcome::Failed(reason));
            }
            let backoff = (1000_i64 << job.waits.clamp(0, 4)).min(15_000);
            let until = (now + backoff).min(since + budget_ms);
            Err(Wait { channel, why: UNAVAILABLE, until, reason: Some(reason), outage_since: Some(since) })
        }
        outcome => Ok(outcome),
    }
}

/// The partner's retry budget for a provider's outage, in milliseconds.
fn budget_ms(provider_retry_s: Option<i64>) -> i64 {
    provider_retry_s.unwrap_or(DEFAULT_PROVIDER_RETRY_S).max(0) * 1000
}

/// Tries `channels` in turn (from where the job's chain waited, if it did) until one sends: `send` tries one.
/// A channel that must wait (paced, throttled) stops the chain there; so does a provider that is down, for
/// the partner's retry budget (`budget_s`, counted from the outage's first failure); then the chain goes on.
async fn run_chain<'a, F, Fut>(
    delivery: &Delivery,
    job: &Job,
    channels: &[Channel],
    budget_s: Option<i64>,
    mut send: F,
) -> Result<Chain, sqlx::Error>
where
    F: FnMut(Channel) -> Fut,
    Fut: std::future::Future<Output = Result<Outcome, sqlx::Error>> + 'a,
{
    let start = job.chain_from.and_then(|c| channels.iter().position(|x| *x == c)).unwrap_or(0);
    let mut tries = Vec::new();
    for &channel in &channels[start..] {
        let outcome = match channel {
            Channel::Inapp => Outcome::Sent(String::new()),
            _ => send(channel).await?,
        };
        match wait_or_settle(delivery, job, channel, outcome, budget_ms(budget_s)) {
            Err(wait) => return Ok(Chain::Waits { tries, wait }),
            Ok(outcome) => {
                let sent = outcome.is_sent();
                tries.push((channel, outcome));
                if sent {
                    break;
                }
            }
        }
    }
    Ok(Chain::Ended(tries))
}

/// The job waits: the tries made, the waiting one (why, until when), and the job put back until then, to
/// go on from `channel`.
fn waiting(finished: &mut Finished, kind: AttemptKind, tries: Vec<(Channel, Outcome)>, wait: Wait) {
    let Wait { channel, why, until, reason, outage_since } = wait;
    finished.attempts.extend(tries.into_iter().map(|(c, o)| attempt(kind, c, o)));
    finished.attempts.push(NewAttempt {
        kind,
        channel,
        state: AttemptState::Waiting,
        error: Some(why.to_string()),
        provider_ref: None,
        retry_at: Some(until),
    });
    if let Some(reason) = reason {
        tracing::debug!(message_id = finished.message.id, channel = channel.as_str(), why, reason, "delivery waits");
    }
    finished.ends_job = false;
    finished.put_back = Some(PutBack { at: until, chain_from: channel, outage_since });
}

/// Delivers one claimed message: routes it, tries its channels, and answers what to record (or, when a
/// channel must wait, the message put back until then, still `queued`).
async fn deliver(delivery: &Delivery, job: &Job, found: ToDeliver) -> Result<Done, sqlx::Error> {
    let db = &delivery.db;
    let message = found.message;
    let opted_out = found.opted_out;
    let message_id = message.id;
    let scheduled = message.state == MessageState::Scheduled;
    if message.state != MessageState::Queued && !scheduled {
        // Already moved on (e.g. the user's app fetched it first, its sender canceled it): the job ends.
        return Ok(Done::only(unchanged(delivery, job, message)));
    }
    let recipient = Recipient {
        claimed: found.claimed,
        has_device: found.has_device,
        online: found.last_seen.is_some_and(|t| delivery.now() - t < delivery.config.offline_after_s as i64 * 1000),
        writes_from: found.conversation_channel,
    };
    let honoured = &found.honoured;
    if let Some(why) = honoured.refusal(is_marketing(&message.content)) {
        return Ok(Done::only(refused(delivery, job, message, why)));
    }
    let mut channels = plan(&message.priority, recipient);
    // A channel the person refuses (or a partner they muted) is skipped: the message waits in the hub.
    let held = |c: &Channel| skipped_by_choice(honoured, &message, *c).is_some();
    if channels.iter().any(held) && !channels.contains(&Channel::Inapp) {
        channels.push(Channel::Inapp);
    }
    let partner_name = found.partner_name;

    let chain = run_chain(delivery, job, &channels, found.provider_retry_s, |channel| {
        send_message(delivery, channel, &message, &partner_name, opted_out, honoured)
    })
    .await?;
    let attempts = match chain {
        Chain::Ended(attempts) => attempts,
        Chain::Waits { tries, wait } => {
            let mut finished = unchanged(delivery, job, message);
            waiting(&mut finished, AttemptKind::Delivery, tries, wait);
            // Its time came: no longer scheduled, it waits its turn as any queued message.
            if scheduled {
                let (from, to) = (&[MessageState::Scheduled][..], MessageState::Queued);
                finished.change = Some(Change::State { from, to, channel: None });
            }
            return Ok(Done::only(finished));
        }
    };

    // An encrypted message now waiting in the hub of an offline user: the opaque alert, by WhatsApp then
    // SMS, once per partner and user per offline period (the slot is taken before sending).
    let mut alerts: Vec<(Channel, Outcome)> = Vec::new();
    let mut release_alert = None;
    let in_hub = matches!(attempts.last(), Some((Channel::Inapp, Outcome::Sent(_))));
    // No alert in the person's quiet hours, nor on a channel they refuse (none when they muted the partner).
    let alert_may_go =
        honoured.quiet_until(delivery.now(), &message.priority, is_marketing(&message.content)).is_none();
    if in_hub && is_encrypted(&message) && !recipient.online && alert_may_go {
        let now = delivery.now();
        let last_seen = found.last_seen.unwrap_or(0);
        if devices::claim_alert(db, message.partner_id, &message.phone, message_id, last_seen, now).await? {
            let text = alert_text(&partner_name, &delivery.config.public_url, &message);
            let taken = [Channel::Whatsapp, Channel::Sms].into_iter();
            for channel in taken.filter(|c| skipped_by_choice(honoured, &message, *c).is_none()) {
                let to = (Some(message.partner_id), channel, message.phone.as_str());
                let outcome = send_on(delivery, to, None, None, &text, opted_out, true).await?.now_or_never();
                let sent = outcome.is_sent();
                alerts.push((channel, outcome));
                if sent {
                    break;
                }
            }
            if !alerts.iter().any(|(_, outcome)| outcome.is_sent()) {
                release_alert = Some((message.partner_id, message.phone.clone()));
            }
        }
    }

    let last = attempts.last().map(|(c, _)| *c);
    let (to, channel) = match attempts.last() {
        Some((channel, Outcome::Sent(_))) => (MessageState::Sent, Some(*channel)),
        _ => (MessageState::Failed, last),
    };
    crate::messages::routing::count(last, to);
    let tries = attempts
        .into_iter()
        .map(|(c, o)| attempt(AttemptKind::Delivery, c, o))
        .chain(alerts.into_iter().map(|(c, o)| attempt(AttemptKind::Alert, c, o)))
        .collect();
    let change = Some(Change::State { from: &[MessageState::Queued, MessageState::Scheduled], to, channel });
    let (window, default_window) = (found.fallback_after_s, delivery.config.hub_fallback_after_s);
    // Muted: the hub only, no fallback after it.
    let hub_only = skipped_by_choice(honoured, &message, Channel::Whatsapp) == Some(preferences::MUTED_BY_USER);
    let follow_up = match in_hub && !hub_only {
        true => crate::messages::routing::after_hub(
            &message.priority,
            &message.content,
            window,
            default_window,
            delivery.now(),
        ),
        false => None,
    };
    let notify = in_hub.then(|| message.clone());
    Ok(Done {
        notify,
        finished: Finished {
            message,
            attempts: tries,
            change,
            at: delivery.now(),
            event: events::message_status,
            follow_up,
            ends_job: true,
            put_back: None,
            clears_waiting: job.waits > 0,
            attempt_event: None,
            fallback: false,
        },
        release_alert,
    })
}

/// What became of one channel try.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The provider took it (its message id; empty for the hub).
    Sent(String),
    /// The provider refused it (or, for a send that cannot wait, could not take it now).
    Failed(String),
    /// Not tried: the channel cannot carry this message to this person now.
    Skipped(&'static str),
    /// Not yet: the sender is paced ([`PACED`]: its turn comes at `until`) or the provider throttled it
    /// ([`THROTTLED`]; `reason` in the provider's words).
    Wait { why: &'static str, until: Millis, reason: Option<String> },
    /// The provider is down (5xx, a timeout, no connection, its circuit open).
    Down(String),
}

impl Outcome {
    pub(crate) fn is_sent(&self) -> bool {
        matches!(self, Outcome::Sent(_))
    }

    /// The outcome of a send that cannot wait (a bot's answer, an alert, a reply to a stranger): what did
    /// not go now failed.
    pub(crate) fn now_or_never(self) -> Outcome {
        match self {
            Outcome::Wait { why, reason, .. } => Outcome::Failed(reason.unwrap_or_else(|| why.to_string())),
            Outcome::Down(reason) => Outcome::Failed(reason),
            outcome => outcome,
        }
    }
}

/// Why an attempt waits: its sender's rate is spent until its turn.
pub const PACED: &str = "paced";

/// Why an attempt waits: the provider asked us to slow down.
pub const THROTTLED: &str = "throttled";

/// Why an attempt waits: the provider is down, and the partner's retry budget is not spent.
pub const UNAVAILABLE: &str = "provider_unavailable";

/// Why a free-form WhatsApp text was not tried (Meta refuses it: error 131047).
pub const OUTSIDE_WINDOW: &str = "outside_24h_window";

/// Why a try was not made: the person opted out of this sender on this channel (SMS's STOP, WhatsApp's
/// block).
pub const OPTED_OUT: &str = "opted_out";

/// One try of `message` on WhatsApp or SMS: as its approved WhatsApp template when it has one, else as
/// text.
async fn send_message(
    delivery: &Delivery,
    channel: Channel,
    message: &Message,
    partner_name: &str,
    opted_out: bool,
    honoured: &Honoured,
) -> Result<Outcome, sqlx::Error> {
    if let Some(held) = held_by_choice(delivery, honoured, message, channel) {
        return Ok(held);
    }
    let template = whatsapp_template(delivery, channel, message).await?;
    let text = match template {
        Some(_) => String::new(),
        None => fallback_text(message, partner_name, &delivery.config.public_url),
    };
    let to = (Some(message.partner_id), channel, message.phone.as_str());
    // A satisfaction question goes to WhatsApp as a list of its scale (the row a person picks comes back as
    // its number, as an SMS answer does).
    let interactive = match (channel, message.content.get("rating")) {
        (Channel::Whatsapp, Some(_)) if template.is_none() => Some(rating_list(&text)),
        _ => None,
    };
    send_on(delivery, to, template, interactive.as_ref(), &text, opted_out, is_urgent(&message.priority)).await
}

/// Why the person's choices skip a try of `message` on `channel`: a channel they refuse, or its partner
/// muted (the hub only) — a message in a conversation they opened is an answer, which muting keeps.
fn skipped_by_choice(honoured: &Honoured, message: &Message, channel: Channel) -> Option<&'static str> {
    let why = honoured.skips(channel)?;
    (why != preferences::MUTED_BY_USER || message.conversation_id.is_none()).then_some(why)
}

/// What the person's choices make of a try of `message` on `channel` now: skipped (a channel they refuse, a
/// partner they muted), or waiting out their quiet hours; `None`: it may go.
fn held_by_choice(delivery: &Delivery, honoured: &Honoured, message: &Message, channel: Channel) -> Option<Outcome> {
    if let Some(why) = skipped_by_choice(honoured, message, channel) {
        return Some(Outcome::Skipped(why));
    }
    let until = honoured.quiet_until(delivery.now(), &message.priority, is_marketing(&message.content))?;
    Some(Outcome::Wait { why: preferences::QUIET_HOURS, until, reason: None })
}

/// What a job records for a message its person refused (blocked its partner, or its marketing): `failed`,
/// with why, never tried.
fn refused(delivery: &Delivery, job: &Job, message: Message, why: &'static str) -> Finished {
    let from = &[MessageState::Queued, MessageState::Scheduled][..];
    let message = Message { error: Some(why.to_string()), ..message };
    Finished {
        change: Some(Change::State { from, to: MessageState::Failed, channel: None }),
        ..unchanged(delivery, job, message)
    }
}

/// Whether messages of `priority` go ahead of the line at a saturated sender: codes and chat.
pub fn is_urgent(priority: &str) -> bool {
    priority == "otp" || priority == "chat"
}

/// Sends `template`, or else free-form `text`, on WhatsApp or SMS to `(partner, channel, phone)` — unless the
/// person opted out of our sender there, or (free-form on WhatsApp's Cloud API) has not written in the last
/// 24 hours: then the try is skipped, saying why, and the next channel takes over. `opted_out`: the phone
/// opted out of something (the delivery's read of the message says so; which sender and channel is looked
/// up only then). The send waits for its sender's pace ([`pacing::before_send`]; `urgent` goes ahead of the
/// line) and may answer that it must wait longer, or that the provider throttled it or is down.
pub(crate) async fn send_on(
    delivery: &Delivery,
    to: (Option<i64>, Channel, &str),
    template: Option<TemplateMessage>,
    interactive: Option<&Value>,
    text: &str,
    opted_out: bool,
    urgent: bool,
) -> Result<Outcome, sqlx::Error> {
    let (partner_id, channel, phone) = to;
    let Some(sending) = delivery.sending(partner_id, channel).await? else {
        return Ok(Outcome::Failed(format!("{} has no provider", channel.as_str())));
    };
    if let Some(reason) = skip_reason(delivery, &sending, channel, phone, template.as_ref(), opted_out).await? {
        return Ok(Outcome::Skipped(reason));
    }
    let key = pacing::sender_key(channel, &sending);
    if delivery.circuits.is_open(&key, delivery.now()) {
        return Ok(Outcome::Down(format!("{}: the provider is down (circuit open)", channel.as_str())));
    }
    // A template to someone whose window is closed starts a conversation: Meta's daily limit counts it.
    if channel == Channel::Whatsapp
        && template.is_some()
        && sending.provider.paced()
        && !window_open(delivery, &sending, phone).await?
        && let Some(over) = over_limit(delivery, partner_id, &sending, phone).await?
    {
        return Ok(over);
    }
    if let pacing::Pace::Later { until } = pacing::before_send(delivery, &sending, channel, phone, urgent).await? {
        return Ok(Outcome::Wait { why: PACED, until, reason: None });
    }
    let result = match (template, interactive) {
        (Some(template), _) => sending.provider.send_template(phone, &template).await,
        (None, Some(interactive)) => sending.provider.send_interactive(phone, interactive, text).await,
        (None, None) => sending.provider.send(phone, text).await,
    };
    settle(delivery, &sending, channel, &key, result).await
}

/// Why an attempt waits, or is skipped: its WhatsApp business account reached its daily limit of new people.
pub const OVER_DAILY_LIMIT: &str = "over_daily_limit";

/// When `sending`'s business account has no room today for one more person (`phone`, not counted yet): the
/// try waits for room, or is skipped for SMS, as the partner chose (`over_limit`). `None`: there is room,
/// and `phone` is counted.
async fn over_limit(
    delivery: &Delivery,
    partner_id: Option<i64>,
    sending: &Sending,
    phone: &str,
) -> Result<Option<Outcome>, sqlx::Error> {
    use crate::store::limits::{self, Room};
    let limit = match limits::of(&delivery.db, &sending.account).await? {
        Some(kept) => kept.daily_limit,
        None => delivery.config.default_daily_limit(),
    };
    let now = delivery.now();
    let Room::Full { until } = limits::take(&delivery.db, &sending.account, phone, limit, now).await? else {
        return Ok(None);
    };
    metrics::counter!("hubbub_whatsapp_over_daily_limit_total").increment(1);
    let by_sms = match partner_id {
        Some(id) => crate::store::partners::over_limit(&delivery.db, id).await? == "sms",
        None => false,
    };
    Ok(Some(match by_sms {
        true => Outcome::Skipped(OVER_DAILY_LIMIT),
        false => Outcome::Wait { why: OVER_DAILY_LIMIT, until, reason: None },
    }))
}

/// What a provider's answer makes of a try: sent or refused; a throttle holds the sender back and the try
/// waits; an outage counts toward the sender's circuit.
async fn settle(
    delivery: &Delivery,
    sending: &Sending,
    channel: Channel,
    key: &str,
    result: Result<String, SendError>,
) -> Result<Outcome, sqlx::Error> {
    Ok(match result {
        Ok(id) => {
            delivery.circuits.answered(key);
            Outcome::Sent(id)
        }
        Err(SendError::Refused(reason)) => {
            delivery.circuits.answered(key);
            Outcome::Failed(reason)
        }
        Err(SendError::Throttled { reason, retry_after_ms }) => {
            delivery.circuits.answered(key);
            let until = pacing::throttled(delivery, sending, channel, retry_after_ms).await?;
            Outcome::Wait { why: THROTTLED, until, reason: Some(reason) }
        }
        Err(SendError::Unavailable(reason)) => {
            delivery.circuits.failed(key, delivery.now());
            Outcome::Down(reason)
        }
    })
}

/// Sends a bot's steps to a person on WhatsApp or SMS (`channel_steps`), in order: reply buttons, a list or
/// a link button where the provider has them, else their text — unless the person opted out, or is outside
/// WhatsApp's window, as for [`send_on`] (looked up once for all of them). One outcome per message.
pub(crate) async fn send_outgoing(
    delivery: &Delivery,
    partner_id: i64,
    channel: Channel,
    phone: &str,
    messages: &[Outgoing],
) -> Result<Vec<Outcome>, sqlx::Error> {
    let Some(sending) = delivery.sending(Some(partner_id), channel).await? else {
        let why = format!("{} has no provider", channel.as_str());
        return Ok(messages.iter().map(|_| Outcome::Failed(why.clone())).collect());
    };
    // A bot answers the person's own message: a partner they blocked says nothing, a channel they refuse
    // carries nothing (muting keeps answers, as in a conversation).
    let honoured = crate::store::preferences::honoured(&delivery.db, phone, partner_id).await?;
    let by_choice = honoured.refusal(false).or(honoured.skips(channel).filter(|w| *w != preferences::MUTED_BY_USER));
    if let Some(reason) = by_choice {
        return Ok(messages.iter().map(|_| Outcome::Skipped(reason)).collect());
    }
    if let Some(reason) = skip_reason(delivery, &sending, channel, phone, None, true).await? {
        return Ok(messages.iter().map(|_| Outcome::Skipped(reason)).collect());
    }
    let provider = &sending.provider;
    let key = pacing::sender_key(channel, &sending);
    let mut outcomes = Vec::with_capacity(messages.len());
    for message in messages {
        // A bot's answer is chat: it takes the sender's next slot, ahead of the line.
        pacing::before_send(delivery, &sending, channel, phone, true).await?;
        let result = match message {
            Outgoing::Text(text) => provider.send(phone, text).await,
            Outgoing::Interactive { interactive, text } => provider.send_interactive(phone, interactive, text).await,
        };
        outcomes.push(settle(delivery, &sending, channel, &key, result).await?.now_or_never());
    }
    Ok(outcomes)
}

/// Why a try on `channel` is not made: the person opted out of our sender there (WhatsApp's "stopped
/// marketing messages" keeps out marketing templates only), or free-form content on the Cloud API outside
/// the 24-hour window.
async fn skip_reason(
    delivery: &Delivery,
    sending: &Sending,
    channel: Channel,
    phone: &str,
    template: Option<&TemplateMessage>,
    opted_out: bool,
) -> Result<Option<&'static str>, sqlx::Error> {
    if opted_out
        && let Some(reason) = opt_outs::reason(&delivery.db, phone, channel, &sending.account, &sending.sender).await?
    {
        let marketing_only = reason == opt_outs::MARKETING;
        if !marketing_only || template.is_some_and(|t| t.marketing) {
            return Ok(Some(OPTED_OUT));
        }
    }
    if template.is_none() && sending.provider.has_free_form_window() && !window_open(delivery, sending, phone).await? {
        return Ok(Some(OUTSIDE_WINDOW));
    }
    Ok(None)
}

/// The attempt row of one channel try: `sent` with the provider's id, `failed` or `skipped` with the reason
/// (a try that would wait but cannot, failed).
fn attempt(kind: AttemptKind, channel: Channel, outcome: Outcome) -> NewAttempt {
    let (state, error, provider_ref) = match outcome.now_or_never() {
        Outcome::Sent(id) => (AttemptState::Sent, None, Some(id).filter(|id| !id.is_empty())),
        Outcome::Skipped(reason) => (AttemptState::Skipped, Some(reason.to_string()), None),
        Outcome::Failed(reason) | Outcome::Down(reason) => (AttemptState::Failed, Some(reason), None),
        Outcome::Wait { why, .. } => (AttemptState::Failed, Some(why.to_string()), None),
    };
    NewAttempt { kind, channel, state, error, provider_ref, retry_at: None }
}

/// Continues a chain a failure receipt broke off (see `receipts::apply`): the SMS after a message that
/// WhatsApp accepted and then could not deliver (`sms`), or the SMS alert after such a WhatsApp alert
/// (`alert_sms`). A message the app has fetched meanwhile needs nothing more.
async fn continue_after_receipt(
    delivery: &Delivery,
    job: &Job,
    found: ToDeliver,
    resume: &str,
) -> Result<Done, sqlx::Error> {
    if resume == AFTER_HUB {
        return after_hub(delivery, job, found).await;
    }
    let (message, partner_name, opted_out) = (found.message, found.partner_name, found.opted_out);
    let alert = resume == "alert_sms";
    let still_out = message.state == MessageState::Sent && message.channel == Some(Channel::Whatsapp);
    let mut finished = unchanged(delivery, job, message);
    if !alert && !still_out {
        return Ok(Done::only(finished));
    }
    let message = &finished.message;
    let text = if alert {
        alert_text(&partner_name, &delivery.config.public_url, message)
    } else {
        fallback_text(message, &partner_name, &delivery.config.public_url)
    };
    let to = (Some(message.partner_id), Channel::Sms, message.phone.as_str());
    let honoured = &found.honoured;
    let marketing = is_marketing(&message.content);
    let outcome = match skipped_by_choice(honoured, message, Channel::Sms).or(honoured.refusal(marketing)) {
        Some(why) => Outcome::Skipped(why),
        None => match held_by_choice(delivery, honoured, message, Channel::Sms) {
            Some(held) => held,
            None => send_on(delivery, to, None, None, &text, opted_out, alert || is_urgent(&message.priority)).await?,
        },
    };
    // The message's SMS waits its turn (or for its provider), as a first delivery would; an alert does not.
    let outcome = match alert {
        true => outcome.now_or_never(),
        false => match wait_or_settle(delivery, job, Channel::Sms, outcome, budget_ms(found.provider_retry_s)) {
            Ok(outcome) => outcome,
            Err(wait) => {
                waiting(&mut finished, AttemptKind::Delivery, Vec::new(), wait);
                return Ok(Done::only(finished));
            }
        },
    };
    let sent = outcome.is_sent();
    let release_alert = (alert && !sent).then(|| (message.partner_id, message.phone.clone()));
    if !alert {
        finished.change = Some(if sent {
            Change::Channel(Channel::Sms)
        } else {
            Change::State { from: &[MessageState::Sent], to: MessageState::Failed, channel: Some(Channel::Sms) }
        });
    }
    let kind = if alert { AttemptKind::Alert } else { AttemptKind::Delivery };
    finished.attempts.push(attempt(kind, Channel::Sms, outcome));
    finished.at = delivery.now();
    Ok(Done { finished, release_alert, notify: None })
}

/// The fallback after the hub: a message still only `sent` in the hub (no device got it: it is not
/// `delivered`) goes on to WhatsApp, then SMS, as further attempts. The fallback is claimed first, so a device
/// that gets the message at the same moment either ends the chain (it came first) or finds it on its way.
async fn after_hub(delivery: &Delivery, job: &Job, found: ToDeliver) -> Result<Done, sqlx::Error> {
    let (message, partner_name, opted_out) = (found.message, found.partner_name, found.opted_out);
    let honoured = &found.honoured;
    let in_hub_only = message.state == MessageState::Sent && message.channel == Some(Channel::Inapp);
    // The channels the person takes from this partner now (they may have muted it, or blocked it, since).
    let channels: Vec<Channel> = [Channel::Whatsapp, Channel::Sms]
        .into_iter()
        .filter(|c| skipped_by_choice(honoured, &message, *c).is_none())
        .collect();
    let refused = honoured.refusal(is_marketing(&message.content)).is_some();
    let mut finished = Finished { fallback: true, ..unchanged(delivery, job, message) };
    // A job that waited has claimed the fallback already.
    if !in_hub_only
        || refused
        || channels.is_empty()
        || (job.waits == 0 && !messages::claim_hub_fallback(&delivery.db, finished.message.id, delivery.now()).await?)
    {
        return Ok(Done::only(finished));
    }
    let message = finished.message.clone();
    let chain = run_chain(delivery, job, &channels, found.provider_retry_s, |channel| {
        send_message(delivery, channel, &message, &partner_name, opted_out, honoured)
    })
    .await?;
    finished.at = delivery.now();
    match chain {
        Chain::Ended(tries) => {
            if let Some((channel, _)) = tries.last().filter(|(_, o)| o.is_sent()) {
                finished.change = Some(Change::Channel(*channel));
            }
            finished.attempts.extend(tries.into_iter().map(|(c, o)| attempt(AttemptKind::Delivery, c, o)));
        }
        Chain::Waits { tries, wait } => waiting(&mut finished, AttemptKind::Delivery, tries, wait),
    }
    Ok(Done::only(finished))
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn r(claimed: bool, has_device: bool, online: bool) -> Recipient {
        Recipient { claimed, has_device, online, writes_from: None }
    }

    #[test]
    fn routing_follows_the_contract() {
        use Channel::*;
        assert_eq!(plan("notification", r(true, true, false)), vec![Inapp]);
        assert_eq!(plan("notification", r(true, false, false)), vec![Whatsapp, Sms]);
        assert_eq!(plan("notification", r(false, true, true)), vec![Whatsapp, Sms]);
        assert_eq!(plan("otp", r(true, true, true)), vec![Inapp]);
        assert_eq!(plan("otp", r(true, true, false)), vec![Sms]);
        assert_eq!(plan("otp", r(false, false, false)), vec![Sms]);
        // An answer to a user who wrote from WhatsApp or SMS goes back there, app or not.
        let from = |channel, app| Recipient { writes_from: Some(channel), ..r(true, app, true) };
        assert_eq!(plan("notification", from(Whatsapp, false)), vec![Whatsapp, Sms]);
        assert_eq!(plan("notification", from(Whatsapp, true)), vec![Whatsapp, Sms, Inapp]);
        assert_eq!(plan("notification", from(Sms, false)), vec![Sms]);
        assert_eq!(plan("notification", from(Sms, true)), vec![Sms, Inapp]);
        assert_eq!(plan("notification", from(Inapp, true)), vec![Inapp]);
        assert_eq!(plan("otp", from(Sms, true)), vec![Inapp]);
    }
}
