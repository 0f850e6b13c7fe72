//! Delivery: how an accepted message reaches its user. Channels are `inapp` (the hub), `whatsapp` and
//! `sms`; routing picks them (a claimed account with a device is reached in the hub, otherwise WhatsApp
//! then SMS; OTPs go straight to SMS when the user is not online); a worker claims queued messages from
//! the database, tries each channel in turn, and records every try as an attempt and every state change
//! as a `message.status` event, in one transaction per message.

pub mod meta_review;
pub mod push;
pub mod receipts;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::channel_steps::Outgoing;
use crate::clock::{Millis, SharedClock};
use crate::config::Config;
use crate::names::{AttemptKind, AttemptState, Channel, MessageState};
use crate::providers::{Provider, TemplateMessage};
use crate::store::deliveries::{Change, Finished, NewAttempt};
use crate::store::leases::{Held, Leased};
use crate::store::messages::{self, Message, ToDeliver};
use crate::store::writer::GroupCommit;
use crate::store::{Db, deliveries, devices, opt_outs, senders, templates, whatsapp};

use crate::events;
pub use crate::messages::routing::{AFTER_HUB, Recipient, is_encrypted, plan};

impl crate::messages::send::HubArrivals for Delivery {
    /// Web Push to the user's devices, beside the send.
    fn arrived(&self, message: Message) {
        self.push.notify(message, None);
    }
}

/// Where the app opens a message: `/m/{ref}` (after the user signs in, when needed).
pub fn app_link(public_url: &str, m: &Message) -> String {
    format!("{}/m/{}", public_url.trim_end_matches('/'), m.reference)
}

/// The text sent by SMS or WhatsApp: the body (or rendered template), with a link into the app for flow
/// invitations, newsletters and stored media (URL media and links go to their own URL). An encrypted message
/// is never described: the text only says one is waiting, and links to it in the app.
pub fn fallback_text(m: &Message, partner_name: &str, public_url: &str) -> String {
    if is_encrypted(m) {
        return alert_text(partner_name, public_url, m);
    }
    let in_app = app_link(public_url, m);
    let body = m.body.as_deref().unwrap_or("").trim();
    let text = match m.content_type.as_str() {
        "link" => {
            let link = &m.content["link"];
            let lead = [Some(body), link["title"].as_str()].into_iter().flatten().find(|s| !s.is_empty()).unwrap_or("");
            format!("{lead} {}", link["url"].as_str().unwrap_or(&in_app))
        }
        "image" | "document" | "audio" | "video" => {
            let url = m.content["media"]["url"].as_str().unwrap_or("");
            let url = if url.starts_with("https://") || url.starts_with("http://") { url.to_string() } else { in_app };
            format!("{body} {url}")
        }
        "html" => {
            let title = [m.content["subject"].as_str(), m.content["preview"].as_str()]
                .into_iter()
                .flatten()
                .find(|s| !s.is_empty())
                .unwrap_or("A new newsletter");
            format!("{title} {in_app}")
        }
        _ => match m.content["flow"]["ref"].as_str() {
            // A flow invitation opens its form.
            Some(flow) => format!("{body} {}/forms/{flow}", public_url.trim_end_matches('/')),
            None => body.to_string(),
        },
    };
    format!("{partner_name}: {}", text.trim())
}

/// The opaque alert about an encrypted message: who sent it and the link that opens it in the app, never
/// what it says.
pub fn alert_text(partner_name: &str, public_url: &str, m: &Message) -> String {
    format!(
        "{partner_name} sent you a new message. It is waiting in your Hubbub inbox: open the app to read it: {}",
        app_link(public_url, m)
    )
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
}

/// How long a partner's own sender is used as read before it is read again (a change made through another
/// host takes this long to reach this one; through this host, at once).
const OWN_SENDER_TTL: Duration = Duration::from_secs(5);

/// The provider a message goes out through and the sender it goes from (as opt-outs are kept: the address,
/// and the account it is of, empty for the host's own).
#[derive(Clone)]
pub struct Sending {
    pub provider: Arc<dyn Provider>,
    pub sender: String,
    pub account: String,
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
        });
        let Some(partner_id) = partner_id.filter(|_| shared.is_some()) else { return Ok(shared) };
        let cached = self.own.lock().expect("not poisoned").get(&(partner_id, channel)).cloned();
        let own = match cached {
            Some((read_at, own)) if read_at.elapsed() < OWN_SENDER_TTL => own,
            _ => {
                let found = senders::of_partner(&self.db, partner_id, channel).await?;
                let own = found.map(|s| Sending {
                    provider: crate::providers::own_sender(&self.config, &self.http, &s),
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

    /// Forgets what was read of a partner's own senders (they were just changed on this host).
    pub fn forget_senders(&self, partner_id: i64) {
        self.own.lock().expect("not poisoned").retain(|(p, _), _| *p != partner_id);
    }

    pub fn now(&self) -> Millis {
        self.clock.now_ms()
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

/// Claims and delivers due messages until `stop`. Each claimed message is routed and sent on its own
/// task; what it did (attempts, state change and `message.status` event, the job's end) is written by one
/// group commit, so the messages finishing together share a transaction (see `store::writer`). On
/// PostgreSQL several claim loops run at once (`Db::write_lanes`; `SKIP LOCKED` keeps them apart), so a
/// slow batch does not hold up the next.
pub async fn run_worker(delivery: Arc<Delivery>, stop: CancellationToken) {
    let lease_ms = delivery.config.lease_ms.max(100) as i64;
    let held = Held::new(Leased::DeliveryJobs);
    held.keep_alive(delivery.db.clone(), delivery.clock.clone(), lease_ms, stop.clone());
    let finisher = deliveries::finisher(delivery.db.clone());
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..delivery.db.write_lanes() {
        loops.spawn(claim_loop(delivery.clone(), held.clone(), finisher.clone(), lease_ms, stop.clone()));
    }
    while loops.join_next().await.is_some() {}
}

async fn claim_loop(
    delivery: Arc<Delivery>,
    held: Arc<Held>,
    finisher: GroupCommit<Finished, ()>,
    lease_ms: i64,
    stop: CancellationToken,
) {
    let poll = Duration::from_millis(delivery.config.delivery_poll_ms.max(10));
    loop {
        let claimed = match deliveries::claim_due(&delivery.db, delivery.now(), lease_ms, CLAIM_BATCH).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "claiming deliveries failed");
                Vec::new()
            }
        };
        let full = claimed.len() as i64 == CLAIM_BATCH;
        held.hold(claimed.iter().map(|job| job.message_id));
        // The claimed messages and their recipients, in one read.
        let ids: Vec<i64> = claimed.iter().map(|job| job.message_id).collect();
        let mut found = match messages::find_to_deliver(&delivery.db, &ids).await {
            Ok(found) => found,
            Err(e) => {
                // Their leases run out and another pass takes them.
                tracing::warn!(error = %e, "reading claimed deliveries failed; will retry");
                ids.iter().for_each(|id| held.release(*id));
                Default::default()
            }
        };
        let mut running = tokio::task::JoinSet::new();
        for job in claimed {
            let (delivery, held, finisher) = (delivery.clone(), held.clone(), finisher.clone());
            let Some(found) = found.remove(&job.message_id) else {
                held.release(job.message_id);
                continue;
            };
            running.spawn(async move {
                let id = job.message_id;
                let done = match job.resume.as_deref() {
                    None => deliver(&delivery, found).await,
                    Some(resume) => continue_after_receipt(&delivery, found, resume).await,
                };
                let result = match done {
                    Ok(done) => {
                        let alert = done.release_alert;
                        let written = finisher.write(done.finished).await;
                        // Now in the hub: the user's devices hear of it, beside this worker.
                        if let (Ok(()), Some((message, partner_name))) = (&written, done.notify) {
                            delivery.push.notify(message, Some(partner_name));
                        }
                        if let (Ok(()), Some((partner_id, phone))) = (&written, alert) {
                            devices::release_alert(&delivery.db, partner_id, &phone, id).await.map(drop)
                        } else {
                            written
                        }
                    }
                    Err(e) => Err(e),
                };
                // Finished (its job is gone) or failed (its lease runs out and another pass retries it).
                held.release(id);
                if let Err(e) = result {
                    tracing::warn!(message_id = id, error = %e, "delivery failed; will retry");
                }
            });
        }
        while running.join_next().await.is_some() {}
        if full {
            continue;
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = delivery.wake.notified() => {}
            _ = tokio::time::sleep(poll) => {}
        }
    }
}

/// What a delivery did, to write; and the alert slot to give back once that is written (an alert that
/// could not be sent).
struct Done {
    finished: Finished,
    release_alert: Option<(i64, String)>,
    /// A message now in the hub, and its partner's name: pushed to the user's devices once written.
    notify: Option<(Message, String)>,
}

impl Done {
    /// What to write, with no alert slot to give back and nothing to push.
    fn only(finished: Finished) -> Done {
        Done { finished, release_alert: None, notify: None }
    }
}

/// What a job records when it has not (yet) tried a channel or moved its message.
fn unchanged(delivery: &Delivery, message: Message) -> Finished {
    Finished {
        message,
        attempts: Vec::new(),
        change: None,
        at: delivery.now(),
        event: events::message_status,
        follow_up: None,
        ends_job: true,
    }
}

/// Delivers one claimed message: routes it, tries its channels, and answers what to record.
async fn deliver(delivery: &Delivery, found: ToDeliver) -> Result<Done, sqlx::Error> {
    let db = &delivery.db;
    let message = found.message;
    let opted_out = found.opted_out;
    let message_id = message.id;
    if message.state != MessageState::Queued {
        // Already moved on (e.g. the user's app fetched it first): the job ends.
        return Ok(Done::only(unchanged(delivery, message)));
    }
    let recipient = Recipient {
        claimed: found.claimed,
        has_device: found.has_device,
        online: found.last_seen.is_some_and(|t| delivery.now() - t < delivery.config.offline_after_s as i64 * 1000),
        writes_from: found.conversation_channel,
    };
    let channels = plan(&message.priority, recipient);
    let partner_name = found.partner_name;

    let mut attempts: Vec<(Channel, Outcome)> = Vec::new();
    for channel in channels {
        let outcome = match channel {
            Channel::Inapp => Outcome::Sent(String::new()),
            _ => send_message(delivery, channel, &message, &partner_name, opted_out).await?,
        };
        let sent = outcome.is_sent();
        attempts.push((channel, outcome));
        if sent {
            break;
        }
    }

    // An encrypted message now waiting in the hub of an offline user: the opaque alert, by WhatsApp then
    // SMS, once per partner and user per offline period (the slot is taken before sending).
    let mut alerts: Vec<(Channel, Outcome)> = Vec::new();
    let mut release_alert = None;
    let in_hub = matches!(attempts.last(), Some((Channel::Inapp, Outcome::Sent(_))));
    if in_hub && is_encrypted(&message) && !recipient.online {
        let now = delivery.now();
        let last_seen = found.last_seen.unwrap_or(0);
        if devices::claim_alert(db, message.partner_id, &message.phone, message_id, last_seen, now).await? {
            let text = alert_text(&partner_name, &delivery.config.public_url, &message);
            for channel in [Channel::Whatsapp, Channel::Sms] {
                let outcome =
                    send_on(delivery, Some(message.partner_id), channel, &message.phone, None, &text, opted_out)
                        .await?;
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
    let change = Some(Change::State { from: &[MessageState::Queued], to, channel });
    let (window, default_window) = (found.fallback_after_s, delivery.config.hub_fallback_after_s);
    let follow_up = match in_hub {
        true => crate::messages::routing::after_hub(
            &message.priority,
            &message.content,
            window,
            default_window,
            delivery.now(),
        ),
        false => None,
    };
    let notify = in_hub.then(|| (message.clone(), partner_name.clone()));
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
        },
        release_alert,
    })
}

/// What became of one channel try.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The provider took it (its message id; empty for the hub).
    Sent(String),
    /// The provider refused it, or could not be reached.
    Failed(String),
    /// Not tried: the channel cannot carry this message to this person now.
    Skipped(&'static str),
}

impl Outcome {
    pub(crate) fn is_sent(&self) -> bool {
        matches!(self, Outcome::Sent(_))
    }
}

impl From<Result<String, String>> for Outcome {
    fn from(result: Result<String, String>) -> Self {
        match result {
            Ok(id) => Outcome::Sent(id),
            Err(reason) => Outcome::Failed(reason),
        }
    }
}

/// Why a free-form WhatsApp text was not tried (Meta refuses it: error 131047).
pub const OUTSIDE_WINDOW: &str = "outside_24h_window";

/// How long after a person's last WhatsApp message free-form text may still reach them.
const WINDOW_MS: Millis = 24 * 60 * 60 * 1000;

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
) -> Result<Outcome, sqlx::Error> {
    let template = whatsapp_template(delivery, channel, message).await?;
    let text = match template {
        Some(_) => String::new(),
        None => fallback_text(message, partner_name, &delivery.config.public_url),
    };
    send_on(delivery, Some(message.partner_id), channel, &message.phone, template, &text, opted_out).await
}

/// Sends `template`, or else free-form `text`, on WhatsApp or SMS — unless the person opted out of our
/// sender there, or (free-form on WhatsApp's Cloud API) has not written in the last 24 hours: then the try
/// is skipped, saying why, and the next channel takes over. `opted_out`: the phone opted out of something
/// (the delivery's read of the message says so; which sender and channel is looked up only then).
pub(crate) async fn send_on(
    delivery: &Delivery,
    partner_id: Option<i64>,
    channel: Channel,
    phone: &str,
    template: Option<TemplateMessage>,
    text: &str,
    opted_out: bool,
) -> Result<Outcome, sqlx::Error> {
    let Some(sending) = delivery.sending(partner_id, channel).await? else {
        return Ok(Outcome::Failed(format!("{} has no provider", channel.as_str())));
    };
    if let Some(reason) = skip_reason(delivery, &sending, channel, phone, template.as_ref(), opted_out).await? {
        return Ok(Outcome::Skipped(reason));
    }
    Ok(match template {
        Some(template) => sending.provider.send_template(phone, &template).await.into(),
        None => sending.provider.send(phone, text).await.into(),
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
    if let Some(reason) = skip_reason(delivery, &sending, channel, phone, None, true).await? {
        return Ok(messages.iter().map(|_| Outcome::Skipped(reason)).collect());
    }
    let provider = &sending.provider;
    let mut outcomes = Vec::with_capacity(messages.len());
    for message in messages {
        outcomes.push(match message {
            Outgoing::Text(text) => provider.send(phone, text).await.into(),
            Outgoing::Interactive { interactive, text } => {
                provider.send_interactive(phone, interactive, text).await.into()
            }
        });
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

/// The partner's `whatsapp` template of `code` in `lang` (default `en`) that may be sent (approved by Meta
/// when the Cloud API is the provider): such a template reaches a person outside the 24-hour window.
pub async fn find_whatsapp_template(
    delivery: &Delivery,
    partner_id: i64,
    code: &str,
    lang: Option<&str>,
) -> Result<Option<templates::Template>, sqlx::Error> {
    let reviewed_by_meta = delivery.whatsapp.has_free_form_window();
    templates::find_whatsapp_for_send(&delivery.db, partner_id, code, lang.unwrap_or("en"), reviewed_by_meta).await
}

/// Whether `phone` wrote in the last 24 hours to the WhatsApp number `partner_id`'s messages go from (its own,
/// or the host's): free-form text may reach them from it.
pub async fn within_window(delivery: &Delivery, partner_id: i64, phone: &str) -> Result<bool, sqlx::Error> {
    let Some(sending) = delivery.sending(Some(partner_id), Channel::Whatsapp).await? else { return Ok(false) };
    window_open(delivery, &sending, phone).await
}

/// Whether `phone` wrote to the number of `sending` in the last 24 hours.
async fn window_open(delivery: &Delivery, sending: &Sending, phone: &str) -> Result<bool, sqlx::Error> {
    let last = whatsapp::last_inbound(&delivery.db, &sending.account, &sending.sender, phone).await?;
    Ok(last.is_some_and(|at| delivery.now() - at < WINDOW_MS))
}

/// The approved WhatsApp template a WhatsApp try of a template message goes out as (any time, inside the
/// window or not): the partner's `whatsapp` template of the same code and language, approved by Meta when
/// the Cloud API is the provider, with the message's variables as its parameters.
async fn whatsapp_template(
    delivery: &Delivery,
    channel: Channel,
    message: &Message,
) -> Result<Option<TemplateMessage>, sqlx::Error> {
    let (Channel::Whatsapp, Some(code)) = (channel, message.template_code.as_deref()) else {
        return Ok(None);
    };
    let Some(template) = find_whatsapp_template(delivery, message.partner_id, code, message.lang.as_deref()).await?
    else {
        return Ok(None);
    };
    let vars = message.content.get("vars").and_then(Value::as_object).cloned().unwrap_or_default();
    let Ok(text) = crate::template::render(&template.body, &vars, crate::messages::compose::MAX_BODY_BYTES) else {
        return Ok(None);
    };
    let parameters = template
        .variables
        .iter()
        .map(|name| match vars.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        })
        .collect();
    Ok(Some(TemplateMessage {
        name: crate::providers::meta_template_name(&template.code),
        lang: template.lang,
        parameters,
        text,
        marketing: template.category == crate::names::Category::Marketing.as_str(),
    }))
}

/// The attempt row of one channel try: `sent` with the provider's id, `failed` or `skipped` with the reason.
fn attempt(kind: AttemptKind, channel: Channel, outcome: Outcome) -> NewAttempt {
    let (state, error, provider_ref) = match outcome {
        Outcome::Sent(id) => (AttemptState::Sent, None, Some(id).filter(|id| !id.is_empty())),
        Outcome::Failed(reason) => (AttemptState::Failed, Some(reason), None),
        Outcome::Skipped(reason) => (AttemptState::Skipped, Some(reason.to_string()), None),
    };
    NewAttempt { kind, channel, state, error, provider_ref }
}

/// Continues a chain a failure receipt broke off (see `receipts::apply`): the SMS after a message that
/// WhatsApp accepted and then could not deliver (`sms`), or the SMS alert after such a WhatsApp alert
/// (`alert_sms`). A message the app has fetched meanwhile needs nothing more.
async fn continue_after_receipt(delivery: &Delivery, found: ToDeliver, resume: &str) -> Result<Done, sqlx::Error> {
    if resume == AFTER_HUB {
        return after_hub(delivery, found).await;
    }
    let (message, partner_name, opted_out) = (found.message, found.partner_name, found.opted_out);
    let alert = resume == "alert_sms";
    let still_out = message.state == MessageState::Sent && message.channel == Some(Channel::Whatsapp);
    let mut finished = unchanged(delivery, message);
    if !alert && !still_out {
        return Ok(Done::only(finished));
    }
    let message = &finished.message;
    let text = if alert {
        alert_text(&partner_name, &delivery.config.public_url, message)
    } else {
        fallback_text(message, &partner_name, &delivery.config.public_url)
    };
    let outcome =
        send_on(delivery, Some(message.partner_id), Channel::Sms, &message.phone, None, &text, opted_out).await?;
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
async fn after_hub(delivery: &Delivery, found: ToDeliver) -> Result<Done, sqlx::Error> {
    let (message, partner_name, opted_out) = (found.message, found.partner_name, found.opted_out);
    let waiting = message.state == MessageState::Sent && message.channel == Some(Channel::Inapp);
    let mut finished = unchanged(delivery, message);
    if !waiting || !messages::claim_hub_fallback(&delivery.db, finished.message.id, delivery.now()).await? {
        return Ok(Done::only(finished));
    }
    let message = &finished.message;
    for channel in [Channel::Whatsapp, Channel::Sms] {
        let outcome = send_message(delivery, channel, message, &partner_name, opted_out).await?;
        let sent = outcome.is_sent();
        finished.attempts.push(attempt(AttemptKind::Delivery, channel, outcome));
        if sent {
            finished.change = Some(Change::Channel(channel));
            break;
        }
    }
    finished.at = delivery.now();
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
