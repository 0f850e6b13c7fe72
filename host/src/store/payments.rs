//! Payments: created from a guest's payment step, moved by verified provider outcomes (each change bumps
//! `seq` and records its `payment.status` event in the same transaction), and the provider events already
//! applied.

use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::Db;
use super::outbox::{self, Target};
use crate::clock::Millis;
use crate::names::{PaymentState, ProviderName};

#[derive(Debug, Clone)]
pub struct Payment {
    pub id: i64,
    pub reference: String,
    pub partner_id: i64,
    pub partner_code: String,
    pub bot_id: i64,
    pub bot_code: String,
    pub session_id: i64,
    pub session_ref: String,
    pub phone: String,
    /// The id the guest gave the payment (echoed back in its payment event).
    pub guest_id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub description: String,
    pub state: PaymentState,
    /// Grows with each state change.
    pub seq: i64,
    pub provider: ProviderName,
    /// The provider's checkout id (Stripe's Checkout Session).
    pub provider_ref: Option<String>,
    /// The provider's payment id (Stripe's PaymentIntent), once known.
    pub provider_payment: Option<String>,
    pub checkout_url: Option<String>,
    pub guest_notified_at: Option<Millis>,
    pub refund_requested_at: Option<Millis>,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// What a new payment is made of.
pub struct NewPayment {
    pub reference: String,
    pub partner_id: i64,
    pub partner_code: String,
    pub bot_id: i64,
    pub bot_code: String,
    pub session_id: i64,
    pub phone: String,
    pub guest_id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub description: String,
    pub provider: ProviderName,
}

const SELECT: &str = "SELECT p.id, p.ref, p.partner_id, pa.code AS partner_code, p.bot_id, b.code AS bot_code, \
    p.session_id, s.ref AS session_ref, p.phone, p.guest_id, p.amount_minor, p.currency, p.description, p.state, p.seq, \
    p.provider, p.provider_ref, p.provider_payment, p.checkout_url, p.guest_notified_at, p.refund_requested_at, \
    p.created_at, p.updated_at FROM payments p JOIN partners pa ON pa.id = p.partner_id JOIN bots b ON b.id = p.bot_id \
    JOIN flow_sessions s ON s.id = p.session_id ";

fn from_row(r: &AnyRow) -> Result<Payment, sqlx::Error> {
    Ok(Payment {
        id: r.try_get("id")?,
        reference: r.try_get("ref")?,
        partner_id: r.try_get("partner_id")?,
        partner_code: r.try_get("partner_code")?,
        bot_id: r.try_get("bot_id")?,
        bot_code: r.try_get("bot_code")?,
        session_id: r.try_get("session_id")?,
        session_ref: r.try_get("session_ref")?,
        phone: r.try_get("phone")?,
        guest_id: r.try_get("guest_id")?,
        amount_minor: r.try_get("amount_minor")?,
        currency: r.try_get("currency")?,
        description: r.try_get("description")?,
        state: super::decode_name(r, "state")?,
        seq: r.try_get("seq")?,
        provider: super::decode_name(r, "provider")?,
        provider_ref: r.try_get("provider_ref")?,
        provider_payment: r.try_get("provider_payment")?,
        checkout_url: r.try_get("checkout_url")?,
        guest_notified_at: r.try_get("guest_notified_at")?,
        refund_requested_at: r.try_get("refund_requested_at")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

async fn one_in(tx: &mut Transaction<'_, Any>, id: i64) -> Result<Option<Payment>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE p.id = $1");
    let row = sqlx::query(sql).bind(id).fetch_optional(&mut **tx).await?;
    row.as_ref().map(from_row).transpose()
}

/// The `payment.status` event of a payment now, built by the caller (the store knows no event shapes).
pub type StatusEvent = fn(&Payment, Millis) -> serde_json::Value;

/// Records a new payment (`requires_payment`, seq 1) and its first `payment.status` event.
pub async fn create(db: &Db, new: &NewPayment, now: Millis, event: StatusEvent) -> Result<Payment, sqlx::Error> {
    let mut tx = db.begin().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO payments (ref, partner_id, bot_id, session_id, phone, guest_id, amount_minor, currency, \
         description, state, seq, provider, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'requires_payment', 1, $10, $11, $11) RETURNING id",
    )
    .bind(&new.reference)
    .bind(new.partner_id)
    .bind(new.bot_id)
    .bind(new.session_id)
    .bind(&new.phone)
    .bind(&new.guest_id)
    .bind(new.amount_minor)
    .bind(&new.currency)
    .bind(&new.description)
    .bind(new.provider.as_str())
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let payment = one_in(&mut tx, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    enqueue_status(&mut tx, &payment, now, event).await?;
    tx.commit().await?;
    Ok(payment)
}

async fn enqueue_status(
    tx: &mut Transaction<'_, Any>,
    payment: &Payment,
    now: Millis,
    event: StatusEvent,
) -> Result<(), sqlx::Error> {
    let key = format!("payment:{}", payment.id);
    let event = event(payment, now);
    outbox::enqueue(tx, Target::Partner(payment.partner_id), "payment.status", &event, &key, now).await?;
    Ok(())
}

/// Stores where the user pays and the provider's checkout id.
pub async fn set_checkout(db: &Db, id: i64, url: &str, provider_ref: Option<&str>) -> Result<Payment, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE payments SET checkout_url = $1, provider_ref = $2 WHERE id = $3")
        .bind(url)
        .bind(provider_ref)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    let payment = one_in(&mut tx, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    tx.commit().await?;
    Ok(payment)
}

/// Moves a payment to `to` if its state allows it (see [`PaymentState::may_become`]), bumping `seq` and
/// recording the `payment.status` event. A move to an outcome the guest is told about (`succeeded`,
/// `failed`, `canceled`) also claims the guest's notification in the same compare-and-set statement
/// (`suppress_guest`: claims it without telling, for a payment the guest never saw). Answers the payment
/// after the move and whether this call claimed the notification; `None` when nothing moved.
pub async fn transition_in(
    tx: &mut Transaction<'_, Any>,
    id: i64,
    to: PaymentState,
    suppress_guest: bool,
    now: Millis,
    event: StatusEvent,
) -> Result<Option<(Payment, bool)>, sqlx::Error> {
    loop {
        let Some(current) = one_in(tx, id).await? else { return Ok(None) };
        if !current.state.may_become(to) {
            return Ok(None);
        }
        let claim = to.guest_status().is_some() && current.guest_notified_at.is_none();
        let changed = sqlx::query(
            "UPDATE payments SET state = $1, seq = seq + 1, updated_at = $2, \
             guest_notified_at = CASE WHEN $3 = 1 THEN $2 ELSE guest_notified_at END \
             WHERE id = $4 AND seq = $5",
        )
        .bind(to.as_str())
        .bind(now)
        .bind(claim as i64)
        .bind(id)
        .bind(current.seq)
        .execute(&mut **tx)
        .await?;
        if changed.rows_affected() == 1 {
            let updated = one_in(tx, id).await?.ok_or(sqlx::Error::RowNotFound)?;
            enqueue_status(tx, &updated, now, event).await?;
            return Ok(Some((updated, claim && !suppress_guest)));
        }
        // Another transaction moved it in between (PostgreSQL): decide again on what it is now.
    }
}

/// Remembers a provider event id; false when it was seen before.
pub async fn first_event_in(
    tx: &mut Transaction<'_, Any>,
    provider: ProviderName,
    event_id: &str,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO payment_provider_events (provider, event_id, received_at) VALUES ($1, $2, $3) \
         ON CONFLICT (provider, event_id) DO NOTHING",
    )
    .bind(provider.as_str())
    .bind(event_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn set_provider_payment_in(
    tx: &mut Transaction<'_, Any>,
    id: i64,
    provider_payment: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE payments SET provider_payment = $1 WHERE id = $2 AND provider_payment IS NULL")
        .bind(provider_payment)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub async fn mark_refund_requested(db: &Db, id: i64, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE payments SET refund_requested_at = COALESCE(refund_requested_at, $1) WHERE id = $2")
        .bind(now)
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(())
}

pub async fn find(db: &Db, id: i64) -> Result<Option<Payment>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE p.id = $1");
    let row = sqlx::query(sql).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn find_by_ref(db: &Db, reference: &str) -> Result<Option<Payment>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE p.ref = $1");
    let row = sqlx::query(sql).bind(reference).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn find_by_ref_in(tx: &mut Transaction<'_, Any>, reference: &str) -> Result<Option<Payment>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE p.ref = $1");
    let row = sqlx::query(sql).bind(reference).fetch_optional(&mut **tx).await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn find_by_provider_payment_in(
    tx: &mut Transaction<'_, Any>,
    provider: ProviderName,
    provider_payment: &str,
) -> Result<Option<Payment>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE p.provider = $1 AND p.provider_payment = $2");
    let row = sqlx::query(sql).bind(provider.as_str()).bind(provider_payment).fetch_optional(&mut **tx).await?;
    row.as_ref().map(from_row).transpose()
}

/// One payment of a partner, by id.
pub async fn find_for_partner(db: &Db, partner_id: i64, id: i64) -> Result<Option<Payment>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE p.partner_id = $1 AND p.id = $2");
    let row = sqlx::query(sql).bind(partner_id).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// What a partner's payment list is filtered by.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    pub state: Option<PaymentState>,
    pub bot: Option<String>,
    pub phone: Option<String>,
}

/// A partner's payments, newest first, below `before`.
pub async fn list_for_partner(
    db: &Db,
    partner_id: i64,
    filter: &Filter,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Payment>, sqlx::Error> {
    let sql = const_format::concatcp!(
        SELECT,
        "WHERE p.partner_id = $1 AND ($2 IS NULL OR p.state = $2) AND ($3 IS NULL OR b.code = $3) \
         AND ($4 IS NULL OR p.phone = $4) AND ($5 IS NULL OR p.id < $5) ORDER BY p.id DESC LIMIT $6"
    );
    let rows = sqlx::query(sql)
        .bind(partner_id)
        .bind(filter.state.map(PaymentState::as_str))
        .bind(filter.bot.as_deref())
        .bind(filter.phone.as_deref())
        .bind(before)
        .bind(limit)
        .fetch_all(db.reader())
        .await?;
    rows.iter().map(from_row).collect()
}
