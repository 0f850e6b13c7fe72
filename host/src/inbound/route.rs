//! Routing one kept message (see the module's documentation): whose it is, and what it becomes, written in
//! one transaction with its own change of state.

use super::Routing;
use super::files::{fetch_files, files_of};
use super::parse::{Keyword, keyword};
use super::sessions::{start_entry, to_session};
use crate::clock::Millis;
use crate::delivery::{self, Delivery};
use crate::messages::compose::{self, SendMessage};
use crate::names::{Channel, Direction, InboundState};
use crate::secrets::random_alnum;
use crate::store::bots;
use crate::store::flows as sessions;
use crate::store::inbound::{self, Inbound};
use crate::store::messages::NewMessage;
use crate::store::{accounts, conversations, deliveries, messages, opt_outs, ratings, senders};

/// The reply to a person whose message no partner can be given (one a day at most).
pub const UNROUTED_REPLY: &str = "Hubbub: we could not tell which organisation this message is for, so no one \
    will read it. Please write to them from their app or website.";

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
    if !m.account.is_empty() && receiving.is_none() {
        // A partner's signature brought it, and that partner's sender is gone (or changed account) since: it
        // speaks for no one now — never for the host, nor as anyone else's.
        tracing::warn!(inbound = m.id, "a message signed by a partner's own account whose sender is gone: unrouted");
        let mut tx = db.begin().await?;
        if inbound::settle_in(&mut tx, m.id, InboundState::Unrouted, None, now).await? {
            tx.commit().await?;
        }
        return Ok(());
    }
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
        let shared = shared_channel(m).is_some();
        if let Some(session) =
            sessions::active_on_channel(db, &m.phone, m.channel, partner, shared, now - DAY_MS).await?
        {
            return to_session(routing, m, session).await;
        }
    }
    // A number 1 to 5 from someone asked to rate a closed conversation (and talking to no bot) is their
    // rating: kept on the conversation, which stays closed.
    if keyword.is_none()
        && let Some(score) = body.and_then(crate::conversations::score_of)
        && let Some(id) = ratings::awaiting(db, &m.phone, partner, now - crate::conversations::RATING_WAITS_MS).await?
    {
        return rated(delivery, m, id, score).await;
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

/// What a person who rated a conversation on WhatsApp or SMS is told.
pub const RATED_REPLY: &str = "Thank you for your rating!";

/// `m` is the rating `score` of conversation `id`: kept, the message settled as routed (to no message), and
/// the person thanked on their channel.
async fn rated(delivery: &Delivery, m: &Inbound, id: i64, score: i64) -> Result<(), sqlx::Error> {
    let (db, now) = (&delivery.db, delivery.now());
    let Some(c) = conversations::find_by_id(db, id).await? else { return Ok(()) };
    if crate::conversations::rate(db, &c, score, None, now).await?.is_err() {
        // Rated meanwhile (another host, another message): this one is kept, reaching no one.
        tracing::info!(inbound = m.id, "a rating for a conversation rated already");
    }
    let mut tx = db.begin().await?;
    if !inbound::settle_in(&mut tx, m.id, InboundState::Routed, None, now).await? {
        return Ok(());
    }
    tx.commit().await?;
    delivery::send_on(delivery, (Some(c.partner_id), m.channel, &m.phone), None, None, RATED_REPLY, false, true)
        .await?;
    Ok(())
}

/// Writes what `m` became, in one transaction with its own change of state (see [`route`]); a person
/// linked to no partner then gets the polite reply.
pub(super) async fn settle(delivery: &Delivery, m: &Inbound, outcome: Outcome) -> Result<(), sqlx::Error> {
    let (db, now) = (&delivery.db, delivery.now());
    let mut tx = db.begin().await?;
    // An automatic reply was written (outside the partner's business hours): delivery is woken for it.
    let mut replied = false;
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
                Some((c, messages)) => Some(append(&mut tx, c, messages, now, &mut replied).await?),
                None => None,
            };
            (state, message_id)
        }
        Outcome::Unsupported => (InboundState::Unsupported, None),
        Outcome::NoPartner => (InboundState::Unrouted, None),
        Outcome::Append(c, messages) => {
            (InboundState::Routed, Some(append(&mut tx, c, messages, now, &mut replied).await?))
        }
        Outcome::Open(mut messages) => {
            let reference = format!("conv_{}", random_alnum(24));
            let first = messages.remove(0);
            let (c, message, away) = crate::conversations::open_in(&mut tx, &reference, first, now).await?;
            replied |= away;
            if !messages.is_empty() {
                append(&mut tx, c.id, messages, now, &mut replied).await?;
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
    if replied {
        delivery.wake.notify_one();
    }
    if state == InboundState::Unrouted
        && !inbound::replied_since(db, &m.phone, m.channel, now - DAY_MS).await?
        && delivery::send_on(delivery, (None, m.channel, &m.phone), None, None, UNROUTED_REPLY, true, true)
            .await?
            .is_sent()
    {
        inbound::mark_replied(db, m.id).await?;
    }
    Ok(())
}

/// The user's messages in conversation `c`, in the transaction: the id of the first (`replied` is set when
/// an automatic reply was written too).
pub(super) async fn append(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    c: i64,
    messages: Vec<NewMessage>,
    now: Millis,
    replied: &mut bool,
) -> Result<i64, sqlx::Error> {
    let mut first = None;
    for message in messages {
        let (written, away) = crate::conversations::write_in(tx, c, message, now).await?;
        *replied |= away;
        match written {
            messages::Created::New(message) => first = first.or(Some(message.id)),
            _ => return Err(sqlx::Error::Protocol("an inbound message carries no idempotency key".into())),
        }
    }
    first.ok_or_else(|| sqlx::Error::Protocol("no message to append".into()))
}

/// What an inbound message becomes.
pub(super) enum Outcome {
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
pub(super) enum Whose {
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
pub(super) async fn whose(
    delivery: &Delivery,
    context_partner: Option<i64>,
    m: &Inbound,
    open_new: bool,
) -> Result<Whose, sqlx::Error> {
    let db = &delivery.db;
    let shared = shared_channel(m);
    let ongoing = match context_partner {
        Some(partner_id) => conversations::latest_active(db, partner_id, &m.phone).await?,
        None => conversations::latest_active_of_phone(db, &m.phone, shared).await?,
    };
    Ok(match (ongoing, context_partner) {
        (Some(c), _) => Whose::Ongoing(c.id, c.partner_id),
        (None, _) if !open_new => Whose::Nobody,
        (None, Some(partner_id)) => Whose::New(partner_id),
        (None, None) => match accounts::new_conversation_partner(db, &m.phone, shared).await? {
            Some(partner_id) => Whose::New(partner_id),
            None => Whose::Nobody,
        },
    })
}

/// What the messages `requests` become for `whose`: the user's messages in their conversation or a new one,
/// with the same checks as a message the user writes in the app.
pub(super) async fn outcome(
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
        message.account = m.account.clone();
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

pub(super) const DAY_MS: Millis = 24 * 60 * 60 * 1000;

/// The partner whose own number `m` was sent to, if it was one (`store::senders`): the message is that
/// partner's, whoever else the phone knows. Only a message its account's signature vouched for: one the host's
/// signature brought is never a partner's by its number.
pub(super) async fn receiving_partner(delivery: &Delivery, m: &Inbound) -> Result<Option<i64>, sqlx::Error> {
    if m.account.is_empty() {
        return Ok(None);
    }
    let own = senders::by_address(&delivery.db, m.channel, &m.sender).await?;
    Ok(own.filter(|s| s.account == m.account).map(|s| s.partner_id))
}

/// The channel of the host's shared sender `m` came to, if it came to one (the host's signature brought it):
/// what it finds of sessions and conversations is then only theirs of partners without a sender of their own
/// on that channel — a partner's own number's messages, even forged ones, never draw the shared number's.
fn shared_channel(m: &Inbound) -> Option<Channel> {
    m.account.is_empty().then_some(m.channel)
}

/// The partner of our WhatsApp message that `m` replies to, if it is one of ours.
pub(super) async fn context_partner(delivery: &Delivery, m: &Inbound) -> Result<Option<i64>, sqlx::Error> {
    let Some(context) = m.context_ref.as_deref() else { return Ok(None) };
    let Some(target) = deliveries::find_by_provider_ref(&delivery.db, m.channel.as_str(), context, None).await? else {
        return Ok(None);
    };
    let message = messages::find_any(&delivery.db, target.message_id).await?;
    Ok(message.filter(|message| message.phone == m.phone).map(|message| message.partner_id))
}
