//! Messages users send from WhatsApp or SMS. A provider's webhook hands each one over (its text, or what
//! the person tapped) and is answered at once; the message is kept once by its provider's id
//! (`store::inbound`), and a worker routes it after (`docs/providers.md`, "Messages from users"):
//!
//! 1. SMS's opt-out keywords (`STOP`, `UNSUBSCRIBE`, …, and `START`, …) set or clear the phone's opt-out of
//!    the number it was sent to, and go no further;
//! 2. the phone's bot session on that channel that moved in the last day and is not completed (with the
//!    partner of our WhatsApp message it replies to, `context.id`, when there is one) gets it as the next
//!    event: a tapped reply button or list row, a number or a label of the menu waiting is the choice,
//!    anything else is text; while a form waits, the form's link is sent again;
//! 3. an open or pending support conversation of the phone (the one that moved last, with any partner) gets
//!    it as the user's message, marked with its channel, and the agents' answers go back on that channel;
//! 4. otherwise it is for a partner: the partner of `context.id`, else the platform partner, else the
//!    partner the phone was linked to last — when the phone is linked to a partner at all. That partner's
//!    entry bot on the channel starts a session there (its chat, or its entry flow); without one, a new
//!    support conversation is opened;
//! 5. a phone linked to no partner gets one polite reply a day on that channel, never more.
//!
//! A bot's steps go out on the session's channel ([`deliver`], rendered by `channel_steps`); a form screen
//! goes as a link that opens it in the app, once, without a login (`form_links`). Files (WhatsApp images,
//! documents, audio, video, stickers; SMS `MediaUrl`s) are fetched from the provider and kept as Hubbub
//! media, and go to support as in 3 and 4 (a bot takes text and choices only). Other kinds of message
//! (reactions, …) are kept (`unsupported`) and reach no one.
//!
//! A message sent to a partner's own number (`store::senders`) is that partner's in 2 to 4, whoever else
//! the phone knows; the partner of `context.id` comes next.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::channel_steps;
use crate::clock::Millis;
use crate::delivery::{self, Delivery, receipts};
use crate::events;
use crate::flows::{FlowError, Flows};
use crate::messages::compose::{self, SendMessage};
use crate::names::{Channel, ContentType, ConversationState, Direction, InboundState};
use crate::payments::Payments;
use crate::providers::FetchError;
use crate::runtime::{GuestEvent, Runtime};
use crate::secrets::{digest, random_alnum};
use crate::senders::Ours;
use crate::store::bots::{self, Bot};
use crate::store::flows::{self as sessions, Session};
use crate::store::inbound::{self, Inbound, NewInbound};
use crate::store::messages::NewMessage;
use crate::store::writer::GroupCommit;
use crate::store::{accounts, conversations, deliveries, form_links, messages, opt_outs, senders, whatsapp};

/// Twilio's standard opt-out keywords (a message that is only one of them, in any case).
const STOP_WORDS: [&str; 7] = ["stop", "stopall", "unsubscribe", "cancel", "end", "quit", "optout"];
/// Twilio's standard opt-in keywords.
const START_WORDS: [&str; 3] = ["start", "yes", "unstop"];

/// The reply to a person whose message no partner can be given (one a day at most).
pub const UNROUTED_REPLY: &str = "Hubbub: we could not tell which organisation this message is for, so no one \
    will read it. Please write to them from their app or website.";

/// What an opt-out keyword asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyword {
    Stop,
    Start,
}

/// The opt-out keyword a text is, if it is only one word (any case; punctuation or an emoji around it
/// allowed: "Stop!", "STOP 🛑").
pub fn keyword(text: &str) -> Option<Keyword> {
    let word = text.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    if STOP_WORDS.contains(&word.as_str()) {
        Some(Keyword::Stop)
    } else if START_WORDS.contains(&word.as_str()) {
        Some(Keyword::Start)
    } else {
        None
    }
}

/// The message of a Twilio inbound webhook (its form's pairs) to our sender `ours` (the one the webhook's
/// signature speaks for), or what is missing.
pub fn from_twilio(ours: &Ours, params: &[(String, String)], now: Millis) -> Result<NewInbound, String> {
    let get = |k: &str| receipts::twilio_param(params, k).map(str::trim).filter(|v| !v.is_empty());
    let sid = get("MessageSid").or(get("SmsSid")).ok_or("MessageSid is required")?;
    let phone = get("From").ok_or("From is required")?;
    if !crate::validate::is_e164(phone) {
        return Err(format!("From must be a phone number in E.164 form, not {phone}"));
    }
    get("To").ok_or("To is required")?;
    let media: Vec<Value> = (0..get("NumMedia").and_then(|n| n.parse::<usize>().ok()).unwrap_or(0).min(10))
        .filter_map(|i| {
            let url = get(&format!("MediaUrl{i}"))?;
            Some(json!({"url": url, "mimetype": get(&format!("MediaContentType{i}"))}))
        })
        .collect();
    let body = get("Body").map(str::to_string);
    Ok(NewInbound {
        channel: Channel::Sms,
        provider_ref: sid.to_string(),
        phone: phone.to_string(),
        user_id: None,
        sender: ours.address.clone(),
        account: ours.account.clone(),
        content: json!({"type": if media.is_empty() { "text" } else { "media" }, "body": body, "media": media}),
        body,
        context_ref: None,
        received_at: now,
    })
}

/// The messages of a WhatsApp Cloud API webhook (`entry[].changes[].value.messages[]`) to one of `ours`
/// (see `receipts::whatsapp_values`), each with the phone number id it was sent to
/// (`value.metadata.phone_number_id`). The text routed is the message's
/// text, the title of the reply button or list row tapped, a template's quick-reply text, or a location or
/// contact card written out; other kinds (media, stickers, …) have none and are kept as they came.
///
/// Who wrote is `from` (the phone) and the business-scoped user id (BSUID: the message's `from_user_id`, or
/// `user_id` of the sender's entry in `contacts`); a person with a username may come with the BSUID only:
/// the phone is left empty then, for [`receive`] to find.
pub fn from_whatsapp(ours: &[Ours], payload: &Value, now: Millis) -> Vec<NewInbound> {
    let mut out = Vec::new();
    for (value, our) in receipts::whatsapp_values(ours, payload) {
        let contacts = value["contacts"].as_array().cloned().unwrap_or_default();
        for m in value["messages"].as_array().into_iter().flatten() {
            let Some(id) = m["id"].as_str() else { continue };
            let phone = m["from"].as_str().and_then(receipts::whatsapp_phone);
            let contact = contacts.iter().find(|c| c["wa_id"].as_str().is_some_and(|w| Some(w) == m["from"].as_str()));
            let contact = contact.or(contacts.first().filter(|_| contacts.len() == 1));
            let user_id = m["from_user_id"]
                .as_str()
                .or(contact.and_then(|c| c["user_id"].as_str()))
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(str::to_string);
            if phone.is_none() && user_id.is_none() {
                continue;
            }
            let phone = phone.unwrap_or_default();
            let at = m["timestamp"].as_str().and_then(|s| s.parse::<i64>().ok()).map(|s| s.saturating_mul(1000));
            out.push(NewInbound {
                channel: Channel::Whatsapp,
                provider_ref: id.to_string(),
                phone,
                user_id,
                sender: our.address.clone(),
                account: our.account.clone(),
                body: whatsapp_text(m),
                content: m.clone(),
                context_ref: m["context"]["id"].as_str().map(str::to_string),
                received_at: at.unwrap_or(now).min(now),
            });
        }
    }
    out
}

/// The text a WhatsApp message carries, by its type.
fn whatsapp_text(m: &Value) -> Option<String> {
    let text = match m["type"].as_str()? {
        "text" => m["text"]["body"].as_str()?.to_string(),
        "interactive" => {
            let i = &m["interactive"];
            i["button_reply"]["title"].as_str().or(i["list_reply"]["title"].as_str())?.to_string()
        }
        "button" => m["button"]["text"].as_str()?.to_string(),
        "location" => {
            let l = &m["location"];
            let (lat, long) = (l["latitude"].as_f64()?, l["longitude"].as_f64()?);
            let place = [l["name"].as_str(), l["address"].as_str()].into_iter().flatten().collect::<Vec<_>>();
            format!("Location: {} https://maps.google.com/?q={lat},{long}", place.join(", ")).replace(":  ", ": ")
        }
        "contacts" => {
            let cards = m["contacts"].as_array()?.iter().map(|c| {
                let name = c["name"]["formatted_name"].as_str().unwrap_or("");
                let phones: Vec<&str> =
                    c["phones"].as_array().into_iter().flatten().filter_map(|p| p["phone"].as_str()).collect();
                format!("{name} {}", phones.join(", ")).trim().to_string()
            });
            format!("Contact: {}", cards.collect::<Vec<_>>().join("; "))
        }
        _ => return None,
    };
    Some(text).filter(|t| !t.trim().is_empty())
}

/// Keeps what a webhook brought, in one transaction: `true` for each message not seen before. A person
/// writing on WhatsApp opens their 24-hour window at once (the answer may be quick).
///
/// A WhatsApp message's business-scoped user id is kept with its phone, for the number that received it;
/// one that came with the id only gets the phone it was last seen with by that number — or none, when it
/// never was (then it reaches no one: see [`route`]).
pub async fn receive(delivery: &Delivery, received: &[NewInbound]) -> Result<usize, sqlx::Error> {
    if received.is_empty() {
        return Ok(0);
    }
    let mut new = 0;
    // The phones this webhook's own messages gave their user ids, by the number that received them (not
    // committed yet, so not read back).
    let mut phones: HashMap<(String, String, String), String> = HashMap::new();
    let mut tx = delivery.db.begin().await?;
    for m in received {
        let mut m = m.clone();
        let (account, sender) = (m.account.clone(), m.sender.clone());
        match (&m.user_id, m.phone.is_empty()) {
            (Some(user_id), false) => {
                whatsapp::remember_user_in(&mut tx, &account, &sender, user_id, &m.phone, m.received_at).await?;
                phones.insert((account, sender, user_id.clone()), m.phone.clone());
            }
            (Some(user_id), true) => {
                m.phone = match phones.get(&(account.clone(), sender.clone(), user_id.clone())) {
                    Some(phone) => phone.clone(),
                    None => {
                        whatsapp::phone_of_user(&delivery.db, &account, &sender, user_id).await?.unwrap_or_default()
                    }
                };
            }
            (None, _) => {}
        }
        if m.channel == Channel::Whatsapp && !m.phone.is_empty() {
            whatsapp::record_inbound_in(&mut tx, &m.phone, m.received_at).await?;
        }
        new += usize::from(inbound::record_in(&mut tx, &m).await?);
    }
    tx.commit().await?;
    if new > 0 {
        delivery.inbound_wake.notify_one();
    }
    Ok(new)
}

/// What routing inbound messages works with: delivery (the database, the clock, the providers) and what
/// runs bots (their runtime, payments, the group commit of their progress).
#[derive(Clone)]
pub struct Routing {
    pub delivery: Arc<Delivery>,
    pub runtime: Runtime,
    pub payments: Arc<Payments>,
    pub progress: GroupCommit<sessions::Step, ()>,
}

impl Routing {
    /// The flow engine over these.
    pub fn flows(&self) -> Flows<'_> {
        Flows {
            db: &self.delivery.db,
            clock: &self.delivery.clock,
            runtime: &self.runtime,
            payments: &self.payments,
            progress: &self.progress,
        }
    }
}

/// Routes the kept messages until `stop`, as they come: read when a webhook kept one (or every
/// `delivery_poll_ms`, from the oldest: what failed and waits to be tried again, what a host that stopped left
/// behind) and handed to their phone's routing at once ([`Pipeline`]) — no message waits for a slower
/// phone's. On `stop`, the messages being routed are finished and no other is started.
pub async fn run_worker(routing: Routing, stop: CancellationToken) {
    let delivery = routing.delivery.clone();
    let poll = Duration::from_millis(delivery.config.delivery_poll_ms.max(10));
    let mut pipeline = Pipeline::new(routing, stop.clone());
    // Where the next read starts: past the newest read, back to the oldest at each poll.
    let mut cursor = 0;
    let mut rescan = tokio::time::interval(poll);
    rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        pipeline.reap();
        let full = pipeline.taken() >= MAX_TAKEN;
        if !full {
            match pipeline.read(&mut cursor).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "reading inbound messages failed; will retry"),
            }
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = delivery.inbound_wake.notified() => {}
            // Room to read more once a phone is done.
            Some(done) = pipeline.tasks.join_next(), if full => {
                ended(done);
            }
            _ = rescan.tick() => {
                cursor = 0;
            }
        }
    }
    pipeline.finish().await;
}

/// Routes every message waiting now, and answers how many were routed once all are done (what
/// [`run_worker`] does as they come, for one read of the whole log).
pub async fn route_waiting(routing: &Routing) -> Result<usize, sqlx::Error> {
    let mut pipeline = Pipeline::new(routing.clone(), CancellationToken::new());
    let mut cursor = 0;
    while pipeline.read(&mut cursor).await? {}
    Ok(pipeline.finish().await)
}

/// Messages read at once.
const BATCH: usize = 64;

/// Phones whose messages are routed at once (each phone's in order, one after another); the others wait
/// their turn in the order they were read.
const PHONES_AT_ONCE: usize = 16;

/// Messages read and not routed yet, at most: past it, the worker reads more as phones finish.
const MAX_TAKEN: usize = 1024;

/// The messages read and not routed yet, by phone. A phone here has a task routing its messages, in order.
#[derive(Default)]
struct Queues {
    phones: HashMap<String, VecDeque<Inbound>>,
    /// The ids in a queue (being routed, or waiting behind it): a read from the oldest skips them.
    taken: HashSet<i64>,
}

/// Routes messages as they are handed over: a task per phone with messages, at most [`PHONES_AT_ONCE`]
/// routing at once; a message for a phone whose task runs joins its queue. A message that cannot be routed
/// now (its database write failed) is counted ([`inbound::failed`]) and left waiting with those of its phone
/// behind it, for a later read from the oldest; it holds up no other phone, and after
/// [`inbound::MAX_ATTEMPTS`] it is set aside (`failed`), so that one that can never be routed cannot hold up
/// those behind it for good.
struct Pipeline {
    routing: Routing,
    queues: Arc<Mutex<Queues>>,
    slots: Arc<tokio::sync::Semaphore>,
    /// Each phone's task, answering how many of its messages it routed.
    tasks: tokio::task::JoinSet<usize>,
    stop: CancellationToken,
}

impl Pipeline {
    fn new(routing: Routing, stop: CancellationToken) -> Pipeline {
        Pipeline {
            routing,
            queues: Arc::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(PHONES_AT_ONCE)),
            tasks: tokio::task::JoinSet::new(),
            stop,
        }
    }

    /// Messages read and not routed yet.
    fn taken(&self) -> usize {
        lock(&self.queues).taken.len()
    }

    /// Reads the next waiting messages after `cursor` (which moves past them) and hands each over; answers
    /// whether there may be more (a whole batch was read).
    async fn read(&mut self, cursor: &mut i64) -> Result<bool, sqlx::Error> {
        let batch = inbound::waiting_after(&self.routing.delivery.db, *cursor, BATCH as i64).await?;
        let more = batch.len() == BATCH;
        for m in batch {
            *cursor = (*cursor).max(m.id);
            self.take(m);
        }
        Ok(more)
    }

    /// Hands `m` to its phone's task (starting one when the phone has none); nothing when it is taken already.
    fn take(&mut self, m: Inbound) {
        let mut queues = lock(&self.queues);
        if !queues.taken.insert(m.id) {
            return;
        }
        if let Some(queue) = queues.phones.get_mut(&m.phone) {
            queue.push_back(m);
            return;
        }
        let phone = m.phone.clone();
        queues.phones.insert(phone.clone(), VecDeque::from([m]));
        drop(queues);
        let (routing, queues, slots, stop) =
            (self.routing.clone(), self.queues.clone(), self.slots.clone(), self.stop.clone());
        self.tasks.spawn(route_phone(routing, queues, slots, stop, phone));
    }

    /// Forgets the phones' tasks that are done.
    fn reap(&mut self) {
        while let Some(done) = self.tasks.try_join_next() {
            ended(done);
        }
    }

    /// Waits for every phone's task; answers how many messages they routed.
    async fn finish(mut self) -> usize {
        let mut routed = 0;
        while let Some(done) = self.tasks.join_next().await {
            routed += ended(done);
        }
        routed
    }
}

/// How many messages a phone's task routed (none when it panicked, which is logged).
fn ended(done: Result<usize, tokio::task::JoinError>) -> usize {
    done.unwrap_or_else(|e| {
        tracing::error!(error = %e, "an inbound routing task ended");
        0
    })
}

fn lock(queues: &Mutex<Queues>) -> std::sync::MutexGuard<'_, Queues> {
    queues.lock().expect("inbound queues poisoned")
}

/// One phone's task: once it has a slot, routes the phone's messages in order until its queue is empty (or
/// one fails, or the host stops); answers how many it routed.
async fn route_phone(
    routing: Routing,
    queues: Arc<Mutex<Queues>>,
    slots: Arc<tokio::sync::Semaphore>,
    stop: CancellationToken,
    phone: String,
) -> usize {
    let slot = tokio::select! {
        slot = slots.acquire_owned() => slot.ok(),
        _ = stop.cancelled() => None,
    };
    // Done, failed or stopped: what is left of the phone's queue waits for a later read, in its order.
    let release = |queues: &mut Queues| {
        for m in queues.phones.remove(&phone).unwrap_or_default() {
            queues.taken.remove(&m.id);
        }
    };
    let mut routed = 0;
    loop {
        let next = {
            let mut queues = lock(&queues);
            match queues.phones.get(&phone).and_then(VecDeque::front) {
                Some(m) if slot.is_some() && !stop.is_cancelled() => m.clone(),
                _ => {
                    release(&mut queues);
                    return routed;
                }
            }
        };
        if let Err(e) = route(&routing, &next).await {
            tracing::warn!(inbound = next.id, error = %e, "routing an inbound message failed; will retry");
            let db = &routing.delivery.db;
            if let Err(e) = inbound::failed(db, next.id, routing.delivery.now()).await {
                tracing::warn!(inbound = next.id, error = %e, "an inbound message's failure could not be counted");
            }
            release(&mut lock(&queues));
            return routed;
        }
        routed += 1;
        let mut queues = lock(&queues);
        queues.taken.remove(&next.id);
        queues.phones.get_mut(&phone).map(VecDeque::pop_front);
    }
}

/// Routes one message (see the module's documentation): what it becomes is read first, then written in one
/// transaction with the message's own change of state, so a message another host took meanwhile changes
/// nothing here.
pub async fn route(routing: &Routing, m: &Inbound) -> Result<(), sqlx::Error> {
    let delivery = &*routing.delivery;
    let (db, now) = (&delivery.db, delivery.now());
    if m.phone.is_empty() {
        // A WhatsApp user known only by a business-scoped id never seen with a phone: no account, no partner,
        // and no number to answer on. Kept, reaching no one.
        let mut tx = db.begin().await?;
        if inbound::settle_in(&mut tx, m.id, InboundState::Unrouted, None, now).await? {
            tx.commit().await?;
        }
        return Ok(());
    }
    let body = m.body.as_deref().map(str::trim).filter(|b| !b.is_empty());
    // Whose the message is, when that is known before looking at sessions and conversations: the partner
    // whose own number received it, else the partner of our message it replies to. Read once here.
    let receiving = receiving_partner(delivery, m).await?;
    let partner = match receiving {
        Some(partner) => Some(partner),
        None => context_partner(delivery, m).await?,
    };
    let files = files_of(m);
    if !files.is_empty() {
        // Files go to support (a bot takes text and choices only), fetched and kept as Hubbub media.
        let requests = fetch_files(delivery, receiving, m, &files, body).await?;
        let whose = whose(delivery, partner, m, true).await?;
        let outcome = outcome(delivery, m, whose, requests).await?;
        return settle(delivery, m, outcome).await;
    }
    let keyword = body.filter(|_| m.channel == Channel::Sms).and_then(keyword);
    if keyword.is_none() && body.is_some() {
        if let Some(session) = sessions::active_on_channel(db, &m.phone, m.channel, partner, now - DAY_MS).await? {
            return to_session(routing, m, session).await;
        }
    }
    let text = |body: &str| vec![SendMessage { body: Some(body.to_string()), ..Default::default() }];
    let outcome = match (keyword, body) {
        // A keyword is also a word to an agent the user is talking to ("Cancel", "Yes"): it goes on in the
        // conversation there is, and opens none.
        (Some(keyword), Some(body)) => {
            match outcome(delivery, m, whose(delivery, partner, m, false).await?, text(body)).await? {
                Outcome::Append(c, messages) => Outcome::Keyword(keyword, Some((c, messages))),
                _ => Outcome::Keyword(keyword, None),
            }
        }
        (_, None) => Outcome::Unsupported,
        (None, Some(body)) => {
            let whose = whose(delivery, partner, m, true).await?;
            // A new conversation's first message starts the partner's entry bot there, when it has one.
            if let Whose::New(partner_id) = whose
                && let Some(bot) = bots::entry_bot(db, partner_id, m.channel.as_str()).await?
            {
                return start_entry(routing, m, &bot).await;
            }
            outcome(delivery, m, whose, text(body)).await?
        }
    };
    settle(delivery, m, outcome).await
}

/// Writes what `m` became, in one transaction with its own change of state (see [`route`]); a person
/// linked to no partner then gets the polite reply.
async fn settle(delivery: &Delivery, m: &Inbound, outcome: Outcome) -> Result<(), sqlx::Error> {
    let (db, now) = (&delivery.db, delivery.now());
    let mut tx = db.begin().await?;
    let (state, message_id) = match outcome {
        Outcome::Keyword(keyword, also) => {
            let state = match keyword {
                Keyword::Stop => {
                    opt_outs::set_in(&mut tx, &m.phone, m.channel, &m.account, &m.sender, "stop", now).await?;
                    InboundState::OptedOut
                }
                Keyword::Start => {
                    opt_outs::clear_in(&mut tx, &m.phone, m.channel, &m.account, &m.sender).await?;
                    InboundState::OptedIn
                }
            };
            let message_id = match also {
                Some((c, messages)) => Some(append(&mut tx, c, messages, now).await?),
                None => None,
            };
            (state, message_id)
        }
        Outcome::Unsupported => (InboundState::Unsupported, None),
        Outcome::NoPartner => (InboundState::Unrouted, None),
        Outcome::Append(c, messages) => (InboundState::Routed, Some(append(&mut tx, c, messages, now).await?)),
        Outcome::Open(mut messages) => {
            let reference = format!("conv_{}", random_alnum(24));
            let first = messages.remove(0);
            let (c, message) =
                conversations::open_in(&mut tx, &reference, None, first, now, events::conversation_message).await?;
            if !messages.is_empty() {
                append(&mut tx, c.id, messages, now).await?;
            }
            (InboundState::Routed, Some(message.id))
        }
    };
    // Writing again on WhatsApp undoes a block: they want to hear from us.
    if m.channel == Channel::Whatsapp {
        opt_outs::clear_in(&mut tx, &m.phone, m.channel, &m.account, &m.sender).await?;
    }
    if !inbound::settle_in(&mut tx, m.id, state, message_id, now).await? {
        return Ok(());
    }
    tx.commit().await?;
    if state == InboundState::Unrouted
        && !inbound::replied_since(db, &m.phone, m.channel, now - DAY_MS).await?
        && delivery::send_on(delivery, None, m.channel, &m.phone, None, UNROUTED_REPLY, true).await?.is_sent()
    {
        inbound::mark_replied(db, m.id).await?;
    }
    Ok(())
}

/// The user's messages in conversation `c`, in the transaction: the id of the first.
async fn append(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    c: i64,
    messages: Vec<NewMessage>,
    now: Millis,
) -> Result<i64, sqlx::Error> {
    let mut first = None;
    for message in messages {
        let event = events::conversation_message;
        match conversations::append_in(tx, c, message, ConversationState::Open, now, event).await? {
            messages::Created::New(message) => first = first.or(Some(message.id)),
            _ => return Err(sqlx::Error::Protocol("an inbound message carries no idempotency key".into())),
        }
    }
    first.ok_or_else(|| sqlx::Error::Protocol("no message to append".into()))
}

/// A file a person sent: the provider's reference to it (a WhatsApp media id, a Twilio `MediaUrl`), what
/// kind of message it makes, and what the provider said of it.
#[derive(Debug, Clone, PartialEq)]
struct File {
    reference: String,
    kind: ContentType,
    filename: Option<String>,
    mimetype: Option<String>,
    /// WhatsApp's caption of it.
    caption: Option<String>,
}

/// The files of `m`: a WhatsApp image, document, audio, video or sticker; an SMS's `MediaUrl`s.
fn files_of(m: &Inbound) -> Vec<File> {
    let c = &m.content;
    match m.channel {
        Channel::Whatsapp => {
            let kind = match c["type"].as_str() {
                Some("image" | "sticker") => ContentType::Image,
                Some("document") => ContentType::Document,
                Some("audio") => ContentType::Audio,
                Some("video") => ContentType::Video,
                _ => return Vec::new(),
            };
            let media = &c[c["type"].as_str().unwrap_or_default()];
            let Some(id) = media["id"].as_str() else { return Vec::new() };
            let text = |k: &str| media[k].as_str().map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
            vec![File {
                reference: id.to_string(),
                kind,
                filename: text("filename"),
                mimetype: text("mime_type"),
                caption: text("caption"),
            }]
        }
        _ => c["media"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| {
                let mimetype = f["mimetype"].as_str().map(str::to_string);
                let kind = match mimetype.as_deref().and_then(|t| t.split('/').next()) {
                    Some("image") => ContentType::Image,
                    Some("audio") => ContentType::Audio,
                    Some("video") => ContentType::Video,
                    _ => ContentType::Document,
                };
                Some(File { reference: f["url"].as_str()?.to_string(), kind, filename: None, mimetype, caption: None })
            })
            .collect(),
    }
}

/// The messages `m`'s files become: each fetched from the provider (at most `HUBBUB_BODY_LIMIT` bytes) and
/// kept as Hubbub media, the first with the text that came with them — with the credentials of the partner
/// whose own number received them (`receiving`), else the host's. A file that cannot be fetched for
/// good (too large, gone) becomes a line saying so; one the provider cannot give now fails the routing,
/// which is tried again.
async fn fetch_files(
    delivery: &Delivery,
    receiving: Option<i64>,
    m: &Inbound,
    files: &[File],
    body: Option<&str>,
) -> Result<Vec<SendMessage>, sqlx::Error> {
    use base64::Engine;
    let Some(sending) = delivery.sending(receiving, m.channel).await? else { return Ok(Vec::new()) };
    let provider = &sending.provider;
    let limit = delivery.config.body_limit;
    let mut requests = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let text = file.caption.clone().or(body.filter(|_| i == 0).map(str::to_string));
        match provider.fetch_media(&file.reference, limit).await {
            Ok(fetched) => requests.push(SendMessage {
                content_type: Some(file.kind),
                body: text,
                media_base64: Some(base64::engine::general_purpose::STANDARD.encode(&fetched.bytes)),
                media_filename: file.filename.clone(),
                media_mimetype: file.mimetype.clone().or(fetched.mimetype),
                ..Default::default()
            }),
            Err(FetchError::Transient(why)) => {
                return Err(sqlx::Error::Protocol(format!("a file could not be fetched now: {why}")));
            }
            Err(FetchError::Permanent(why)) => {
                tracing::warn!(inbound = m.id, reason = %why, "a file a person sent could not be kept");
                let what = match file.kind {
                    ContentType::Image => "a picture",
                    ContentType::Audio => "a recording",
                    ContentType::Video => "a video",
                    _ => "a file",
                };
                let note = format!("(The user sent {what} that could not be kept: {why}.)");
                let line = match text {
                    Some(text) => format!("{text}\n{note}"),
                    None => note,
                };
                requests.push(SendMessage { body: Some(line), ..Default::default() });
            }
        }
    }
    Ok(requests)
}

/// How long a form link opens its form (a person who comes back later writes again and gets a new one).
pub const FORM_LINK_TTL_MS: Millis = 60 * 60 * 1000;

/// Takes `m` for a step of `session` (in a transaction with the end of a WhatsApp block, as in [`route`]):
/// `false` when another host took it first.
async fn settle_to_session(delivery: &Delivery, m: &Inbound, session: &Session) -> Result<bool, sqlx::Error> {
    let mut tx = delivery.db.begin().await?;
    if !inbound::settle_to_session_in(&mut tx, m.id, session.id, delivery.now()).await? {
        return Ok(false);
    }
    if m.channel == Channel::Whatsapp {
        opt_outs::clear_in(&mut tx, &m.phone, m.channel, &m.account, &m.sender).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// The id of the reply button or list row tapped (a template's quick reply: its payload).
fn tapped(m: &Inbound) -> Option<&str> {
    let c = &m.content;
    c["interactive"]["button_reply"]["id"]
        .as_str()
        .or(c["interactive"]["list_reply"]["id"].as_str())
        .or(c["button"]["payload"].as_str())
}

/// Routes `m` to the bot session that runs on its channel: the menu's choice it names, or its text; while a
/// form waits, its link again.
async fn to_session(routing: &Routing, m: &Inbound, session: Session) -> Result<(), sqlx::Error> {
    let delivery = &*routing.delivery;
    if !settle_to_session(delivery, m, &session).await? {
        return Ok(());
    }
    let waiting = session.waiting.clone().unwrap_or(Value::Null);
    let menu: Vec<(String, String)> = serde_json::from_value(waiting["menu"].clone()).unwrap_or_default();
    let body = m.body.as_deref().unwrap_or("").trim();
    let Some(bot) = bots::find_by_id(&delivery.db, session.bot_id).await? else { return Ok(()) };
    let event = match channel_steps::chosen(&menu, body, tapped(m)) {
        Some(id) => GuestEvent::Select(id),
        None if waiting.get("form").is_some() => {
            let screen = json!({"type": "flow_screen", "screen": session.screen.clone().unwrap_or(Value::Null)});
            return deliver(delivery, bot.partner_id, &session, &[screen]).await;
        }
        None => GuestEvent::Text(body.to_string()),
    };
    let result = routing.flows().handle_with(&bot, &session, event).await;
    after_bot(routing, m, &bot, &session, result.map(|p| p.steps), !menu.is_empty()).await
}

/// Starts a session of the partner's entry bot on `m`'s channel (its entry flow, or a chat) and sends its
/// first steps there. The session and `m`'s routing are written together, so another host routing `m` too
/// starts none.
async fn start_entry(routing: &Routing, m: &Inbound, bot: &Bot) -> Result<(), sqlx::Error> {
    let delivery = &*routing.delivery;
    let now = delivery.now();
    let flow = bot.entry_flow.as_deref();
    let reference = format!("{}_{}", if flow.is_some() { "flow" } else { "sess" }, random_alnum(24));
    let mut tx = delivery.db.begin().await?;
    let session = sessions::open_on_channel_in(&mut tx, &reference, bot.id, flow, &m.phone, m.channel, now).await?;
    if !inbound::settle_to_session_in(&mut tx, m.id, session.id, now).await? {
        return Ok(());
    }
    if m.channel == Channel::Whatsapp {
        opt_outs::clear_in(&mut tx, &m.phone, m.channel, &m.account, &m.sender).await?;
    }
    tx.commit().await?;
    let result = routing.flows().start_session(bot, &session).await;
    if result.is_err() {
        // A session that could not start takes none of the person's messages.
        sessions::moved_on_channel(&delivery.db, session.id, None, None).await?;
    }
    after_bot(routing, m, bot, &session, result.map(|p| p.steps), false).await
}

/// Sends what the bot answered on the session's channel. A bot that could not be called now (busy) leaves
/// `m` waiting for a later pass; a bot that failed gets the person a short apology, never silence.
async fn after_bot(
    routing: &Routing,
    m: &Inbound,
    bot: &Bot,
    session: &Session,
    result: Result<Vec<Value>, FlowError>,
    menu_waiting: bool,
) -> Result<(), sqlx::Error> {
    let delivery = &*routing.delivery;
    let error = match result {
        Ok(steps) => return deliver(delivery, bot.partner_id, session, &steps).await,
        Err(FlowError::Busy | FlowError::QueueFull) => {
            return inbound::unsettle(&delivery.db, m.id, delivery.now()).await;
        }
        Err(FlowError::Database(e)) => {
            inbound::unsettle(&delivery.db, m.id, delivery.now()).await?;
            return Err(e);
        }
        Err(e) => e,
    };
    tracing::warn!(inbound = m.id, bot = %bot.code, error = %error, "a bot could not take a message from WhatsApp or SMS");
    let mut text = format!("Sorry, {} could not take that just now.", bot.name);
    if menu_waiting {
        text.push_str(" Please reply with one of the numbers above.");
    }
    let apology = [channel_steps::Outgoing::Text(text)];
    for outcome in delivery::send_outgoing(delivery, bot.partner_id, m.channel, &m.phone, &apology).await? {
        if !outcome.is_sent() {
            tracing::warn!(inbound = m.id, ?outcome, "the apology could not be sent");
        }
    }
    Ok(())
}

/// Sends a bot's `steps` on the channel `session` runs on (rendered by `channel_steps`; a form screen as a
/// new link to it), from the sender of the bot's partner `partner_id`, and keeps what the session waits for
/// there. A step the provider refuses is logged; the session stays where the bot put it, and the person's
/// next message gets the form's link again.
pub async fn deliver(
    delivery: &Delivery,
    partner_id: i64,
    session: &Session,
    steps: &[Value],
) -> Result<(), sqlx::Error> {
    let Some(channel) = session.channel else { return Ok(()) };
    if steps.is_empty() {
        return Ok(());
    }
    let now = delivery.now();
    let screen = steps.iter().rev().find(|s| s["type"] == "flow_screen").map(|s| &s["screen"]);
    let url = match screen.and_then(|s| s["id"].as_str()) {
        Some(screen) => Some(form_link(delivery, session, screen).await?),
        None => None,
    };
    let rendered = channel_steps::render(channel, steps, url.as_deref());
    let waiting = match (&rendered.menu, steps.last()) {
        (Some(menu), _) => Some(json!({ "menu": menu })),
        (None, Some(last)) if last["type"] == "flow_screen" => Some(json!({ "form": last["screen"]["id"] })),
        _ => None,
    };
    let done = steps.iter().any(|s| s["type"] == "flow_completed");
    sessions::moved_on_channel(&delivery.db, session.id, waiting.as_ref(), (!done).then_some(now)).await?;
    let outcomes = delivery::send_outgoing(delivery, partner_id, channel, &session.phone, &rendered.messages).await?;
    for outcome in outcomes.iter().filter(|o| !o.is_sent()) {
        tracing::warn!(session = %session.reference, ?outcome, "a bot's step could not be sent on {}", channel.as_str());
    }
    Ok(())
}

/// A new link to form `screen` of `session`, for the person to open in the app (`/f/{token}`): the token is
/// kept as its digest, and opens that one form once, for [`FORM_LINK_TTL_MS`].
async fn form_link(delivery: &Delivery, session: &Session, screen: &str) -> Result<String, sqlx::Error> {
    let token = random_alnum(32);
    let now = delivery.now();
    form_links::create(&delivery.db, &digest(&token), session.id, screen, now, now + FORM_LINK_TTL_MS).await?;
    Ok(format!("{}/f/{token}", delivery.config.public_url.trim_end_matches('/')))
}

/// What an inbound message becomes.
enum Outcome {
    /// An opt-out keyword, also the user's message in their conversation, if they have one.
    Keyword(Keyword, Option<(i64, Vec<NewMessage>)>),
    /// Nothing to route (no text).
    Unsupported,
    /// No partner to give it to.
    NoPartner,
    /// The user's messages (one, or one per file) in their conversation `0`.
    Append(i64, Vec<NewMessage>),
    /// The first messages of a new conversation.
    Open(Vec<NewMessage>),
}

/// Whose an inbound message is, when it is not for a bot session.
enum Whose {
    /// The phone's conversation `0` (open or pending) with partner `1`.
    Ongoing(i64, i64),
    /// A new conversation's, with this partner.
    New(i64),
    /// No partner's.
    Nobody,
}

/// Whose `m` is: the conversation it belongs in, or (`open_new`) a new one with the partner it is for —
/// `context_partner` when it is known (see [`route`]), else the one [`accounts::new_conversation_partner`]
/// names.
async fn whose(
    delivery: &Delivery,
    context_partner: Option<i64>,
    m: &Inbound,
    open_new: bool,
) -> Result<Whose, sqlx::Error> {
    let db = &delivery.db;
    let ongoing = match context_partner {
        Some(partner_id) => conversations::latest_active(db, partner_id, &m.phone).await?,
        None => conversations::latest_active_of_phone(db, &m.phone).await?,
    };
    Ok(match (ongoing, context_partner) {
        (Some(c), _) => Whose::Ongoing(c.id, c.partner_id),
        (None, _) if !open_new => Whose::Nobody,
        (None, Some(partner_id)) => Whose::New(partner_id),
        (None, None) => match accounts::new_conversation_partner(db, &m.phone).await? {
            Some(partner_id) => Whose::New(partner_id),
            None => Whose::Nobody,
        },
    })
}

/// What the messages `requests` become for `whose`: the user's messages in their conversation or a new one,
/// with the same checks as a message the user writes in the app.
async fn outcome(
    delivery: &Delivery,
    m: &Inbound,
    whose: Whose,
    requests: Vec<SendMessage>,
) -> Result<Outcome, sqlx::Error> {
    let (ongoing, partner_id) = match whose {
        Whose::Ongoing(c, partner_id) => (Some(c), partner_id),
        Whose::New(partner_id) => (None, partner_id),
        Whose::Nobody => return Ok(Outcome::NoPartner),
    };
    let mut messages = Vec::with_capacity(requests.len());
    for request in &requests {
        let content = match compose::content(&delivery.db, false, partner_id, request, Some(&m.phone)).await {
            Ok(content) => content,
            Err(compose::ComposeError::Database(e)) => return Err(e),
            Err(refused) => {
                tracing::warn!(inbound = m.id, reason = %refused, "an inbound message could not become a message");
                continue;
            }
        };
        let mut message = content.into_message(partner_id, &m.phone, Direction::In, None);
        message.channel = Some(m.channel);
        messages.push(message);
    }
    if messages.is_empty() {
        return Ok(Outcome::Unsupported);
    }
    Ok(match ongoing {
        Some(c) => Outcome::Append(c, messages),
        None => Outcome::Open(messages),
    })
}

const DAY_MS: Millis = 24 * 60 * 60 * 1000;

/// The partner whose own number `m` was sent to, if it was one (`store::senders`): the message is that
/// partner's, whoever else the phone knows. Only a message its account's signature vouched for: one the host's
/// signature brought is never a partner's by its number.
async fn receiving_partner(delivery: &Delivery, m: &Inbound) -> Result<Option<i64>, sqlx::Error> {
    if m.account.is_empty() {
        return Ok(None);
    }
    let own = senders::by_address(&delivery.db, m.channel, &m.sender).await?;
    Ok(own.filter(|s| s.account == m.account).map(|s| s.partner_id))
}

/// The partner of our WhatsApp message that `m` replies to, if it is one of ours.
async fn context_partner(delivery: &Delivery, m: &Inbound) -> Result<Option<i64>, sqlx::Error> {
    let Some(context) = m.context_ref.as_deref() else { return Ok(None) };
    let Some(target) = deliveries::find_by_provider_ref(&delivery.db, m.channel.as_str(), context, None).await? else {
        return Ok(None);
    };
    let message = messages::find_any(&delivery.db, target.message_id).await?;
    Ok(message.filter(|message| message.phone == m.phone).map(|message| message.partner_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_keyword_alone_opts_out_or_in() {
        assert_eq!(keyword("STOP"), Some(Keyword::Stop));
        assert_eq!(keyword(" stop. "), Some(Keyword::Stop));
        assert_eq!(keyword("STOP 🛑"), Some(Keyword::Stop));
        assert_eq!(keyword("Stop!!"), Some(Keyword::Stop));
        assert_eq!(keyword("stop it"), None);
        assert_eq!(keyword("Unsubscribe"), Some(Keyword::Stop));
        assert_eq!(keyword("start"), Some(Keyword::Start));
        assert_eq!(keyword("please stop"), None);
        assert_eq!(keyword("stopped"), None);
        assert_eq!(keyword(""), None);
    }

    #[test]
    fn whatsapp_messages_carry_their_text_or_what_was_tapped() {
        let text = |m: Value| whatsapp_text(&m);
        assert_eq!(text(json!({"type": "text", "text": {"body": "hi"}})).as_deref(), Some("hi"));
        let button = json!({"type": "interactive", "interactive": {"type": "button_reply",
            "button_reply": {"id": "shoes", "title": "Shoes"}}});
        assert_eq!(text(button).as_deref(), Some("Shoes"));
        let row = json!({"type": "interactive", "interactive": {"type": "list_reply",
            "list_reply": {"id": "r2", "title": "Red", "description": "A red one"}}});
        assert_eq!(text(row).as_deref(), Some("Red"));
        assert_eq!(text(json!({"type": "button", "button": {"payload": "p", "text": "Yes"}})).as_deref(), Some("Yes"));
        let location = json!({"type": "location", "location": {"latitude": 52.5, "longitude": 13.4, "name": "Office"}});
        assert_eq!(text(location).as_deref(), Some("Location: Office https://maps.google.com/?q=52.5,13.4"));
        let contacts = json!({"type": "contacts", "contacts": [
            {"name": {"formatted_name": "Ana Tester"}, "phones": [{"phone": "+1 555 0100"}, {"phone": "+1 555 0101"}]},
            {"name": {"formatted_name": "Bo"}}]});
        assert_eq!(text(contacts).as_deref(), Some("Contact: Ana Tester +1 555 0100, +1 555 0101; Bo"));
        assert_eq!(text(json!({"type": "image", "image": {"id": "m1"}})), None);
    }
}
