//! The rollups of what a partner's messages came to (`message_rollups`): a row per partner, hour, channel
//! (`''`: not sent yet), template (`''`: none) and broadcast (0: none), with the count of each state change
//! that happened in that hour. Each change is counted in the transaction that makes it, as a row of
//! `message_rollup_deltas` ([`Deltas::write_in`]: an insert, which no other transaction waits for, where an
//! update of one hour's row would make every sender of the partner wait for the one before); [`fold`] adds
//! the deltas to the rollups and deletes them, and the figures ([`groups`]) are read from both.

use std::collections::BTreeMap;

use sqlx::{Any, Row, Transaction};

use super::{DAY_MS, HOUR_MS};
use crate::clock::Millis;
use crate::names::{Channel, Direction, MessageState};
use crate::store::{Backend, Db, JsonRows, json_table, placeholders};

/// What changes add to a row of the rollups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Outgoing messages accepted (counted without a channel: none is chosen yet).
    pub accepted: i64,
    /// Handed to the channel: into the hub, to WhatsApp's or the SMS provider's API.
    pub sent: i64,
    pub delivered: i64,
    pub read: i64,
    /// The time from acceptance (or the scheduled time) to read, summed over those read.
    pub read_ms: i64,
    pub failed: i64,
    /// Messages people wrote (in conversations, on the channel they wrote on).
    pub received: i64,
    /// Tries a provider accepted on a paid channel (WhatsApp, SMS): deliveries, fallbacks and SMS alerts.
    pub paid: i64,
    /// Of those, the messages that went to WhatsApp or SMS because the hub did not reach a device in time.
    pub fallbacks: i64,
}

/// The columns of [`Counts`], in order.
const COUNTED: [&str; 9] =
    ["accepted", "sent", "delivered", "read", "read_ms", "failed", "received", "paid", "fallbacks"];

impl Counts {
    fn values(&self) -> [i64; 9] {
        [
            self.accepted,
            self.sent,
            self.delivered,
            self.read,
            self.read_ms,
            self.failed,
            self.received,
            self.paid,
            self.fallbacks,
        ]
    }

    fn from_row(row: &sqlx::any::AnyRow) -> Result<Counts, sqlx::Error> {
        let get = |i: usize| row.try_get::<Option<i64>, _>(COUNTED[i]).map(Option::unwrap_or_default);
        Ok(Counts {
            accepted: get(0)?,
            sent: get(1)?,
            delivered: get(2)?,
            read: get(3)?,
            read_ms: get(4)?,
            failed: get(5)?,
            received: get(6)?,
            paid: get(7)?,
            fallbacks: get(8)?,
        })
    }
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.accepted += o.accepted;
        self.sent += o.sent;
        self.delivered += o.delivered;
        self.read += o.read;
        self.read_ms += o.read_ms;
        self.failed += o.failed;
        self.received += o.received;
        self.paid += o.paid;
        self.fallbacks += o.fallbacks;
    }
}

/// A row of the rollups: partner, hour, channel (`""`: none yet), template, broadcast. Ordered, so that rows
/// are always written in one order (two folds never wait for each other in a circle).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    partner_id: i64,
    hour: Millis,
    channel: &'static str,
    template: String,
    broadcast_id: i64,
}

impl Key {
    /// The row of partner `partner_id`'s hour of `at`.
    fn of(partner_id: i64, at: Millis, channel: Option<Channel>, template: &str, broadcast_id: i64) -> Key {
        Key {
            partner_id,
            hour: at - at.rem_euclid(HOUR_MS),
            channel: channel.map_or("", Channel::as_str),
            template: template.to_string(),
            broadcast_id,
        }
    }
}

/// A message as the rollups count its changes (`store::messages::Message::counted`).
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub partner_id: i64,
    pub template: Option<&'a str>,
    pub broadcast_id: Option<i64>,
    pub direction: Direction,
    /// Its state and channel now (after the change counted).
    pub state: MessageState,
    pub channel: Option<Channel>,
    pub created_at: Millis,
    pub send_at: Option<Millis>,
}

/// Changes of messages counted by row, to write with the transaction that makes them.
#[derive(Debug, Clone, Default)]
pub struct Deltas(BTreeMap<Key, Counts>);

impl Deltas {
    fn add(&mut self, m: Subject, channel: Option<Channel>, at: Millis, counts: Counts) {
        let (template, broadcast_id) = (m.template.unwrap_or_default(), m.broadcast_id.unwrap_or(0));
        *self.0.entry(Key::of(m.partner_id, at, channel, template, broadcast_id)).or_default() += counts;
    }

    /// A message just written: accepted (a partner's, a developer's, a bot's; no channel chosen yet) or
    /// received (a person's, on the channel they wrote on).
    pub fn created(&mut self, m: Subject) {
        let (channel, counts) = match m.direction {
            Direction::Out => (None, Counts { accepted: 1, ..Counts::default() }),
            Direction::In => (m.channel, Counts { received: 1, ..Counts::default() }),
        };
        self.add(m, channel, m.created_at, counts);
    }

    /// A broadcast's `n` messages just written at `at`.
    pub fn broadcast(&mut self, partner_id: i64, broadcast_id: i64, template: Option<&str>, at: Millis, n: i64) {
        let key = Key::of(partner_id, at, None, template.unwrap_or_default(), broadcast_id);
        *self.0.entry(key).or_default() += Counts { accepted: n, ..Counts::default() };
    }

    /// An outgoing message as it is after a move to its state at `at` (a person's messages are not counted).
    pub fn moved(&mut self, m: Subject, at: Millis) {
        if m.direction != Direction::Out {
            return;
        }
        let counts = match m.state {
            MessageState::Sent => Counts { sent: 1, ..Counts::default() },
            MessageState::Delivered => Counts { delivered: 1, ..Counts::default() },
            MessageState::Read => {
                let since = m.send_at.unwrap_or(m.created_at).max(m.created_at);
                Counts { read: 1, read_ms: (at - since).max(0), ..Counts::default() }
            }
            MessageState::Failed => Counts { failed: 1, ..Counts::default() },
            MessageState::Queued | MessageState::Scheduled | MessageState::Canceled => return,
        };
        self.add(m, m.channel, at, counts);
    }

    /// Message `m` went out on `channel` after its channel before failed (an SMS after WhatsApp), its state
    /// unchanged: sent on that channel too.
    pub fn rerouted(&mut self, m: Subject, channel: Channel, at: Millis) {
        self.add(m, Some(channel), at, Counts { sent: 1, ..Counts::default() });
    }

    /// A provider accepted a try of `m` on the paid `channel` at `at`; `fallback`: the message went there
    /// because the hub did not reach a device in time.
    pub fn paid(&mut self, m: Subject, channel: Channel, at: Millis, fallback: bool) {
        self.add(m, Some(channel), at, Counts { paid: 1, fallbacks: fallback as i64, ..Counts::default() });
    }

    /// Adds `other`'s counts to these.
    pub fn append(&mut self, other: &Deltas) {
        for (key, counts) in &other.0 {
            *self.0.entry(key.clone()).or_default() += *counts;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The rows, as [`insert_sql`] reads them: the key's columns, then the counts'.
    fn rows(&self) -> JsonRows {
        let mut rows = JsonRows::default();
        for (k, c) in &self.0 {
            let [a, b, c, d, e, f, g, h, i] = c.values();
            rows.push(&(k.partner_id, k.hour, k.channel, &k.template, k.broadcast_id, a, b, c, d, e, f, g, h, i));
        }
        rows
    }

    /// Writes them as delta rows, in one statement, in the caller's transaction.
    pub async fn write_in(&self, tx: &mut Transaction<'_, Any>) -> Result<(), sqlx::Error> {
        if self.is_empty() {
            return Ok(());
        }
        let backend = crate::store::backend_of(tx);
        let sql = insert_sql(backend, "message_rollup_deltas", "hour", "");
        sqlx::query(sqlx::AssertSqlSafe(sql)).bind(self.rows().value()).execute(&mut **tx).await?;
        Ok(())
    }
}

/// `INSERT INTO {table}` of the rows bound as one [`JsonRows`] value (see [`Deltas::rows`]), their time in
/// `time` (`hour`, `day`), then `tail`.
fn insert_sql(backend: Backend, table: &str, time: &str, tail: &str) -> String {
    let key = [
        ("partner_id", "BIGINT"),
        (time, "BIGINT"),
        ("channel", "TEXT"),
        ("template", "TEXT"),
        ("broadcast_id", "BIGINT"),
    ];
    let columns: Vec<(&str, &str)> = key.into_iter().chain(COUNTED.map(|c| (c, "BIGINT"))).collect();
    let names = columns.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "INSERT INTO {table} ({names}) SELECT {names} FROM ({}) AS d WHERE true{tail}",
        json_table(backend, &columns)
    );
    placeholders(backend, &sql)
}

/// Deltas folded in one transaction at most.
pub const FOLD_BATCH: i64 = 2_000;

/// Adds the oldest deltas (up to a batch) to the rollups, by the hour and by the day, and deletes them, in
/// one transaction; hosts folding at once each take their own (PostgreSQL: `SKIP LOCKED`). Answers how many
/// were folded.
pub async fn fold(db: &Db) -> Result<usize, sqlx::Error> {
    let backend = db.backend();
    let mut tx = db.begin().await?;
    let sql = format!(
        "SELECT id, partner_id, hour, channel, template, broadcast_id, {} FROM message_rollup_deltas \
         ORDER BY id LIMIT $1{}",
        COUNTED.join(", "),
        if backend == Backend::Postgres { " FOR UPDATE SKIP LOCKED" } else { "" }
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(FOLD_BATCH).fetch_all(&mut *tx).await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let mut sums = Deltas::default();
    let mut ids = JsonRows::default();
    for row in &rows {
        ids.push(&[row.try_get::<i64, _>("id")?]);
        let channel = Channel::parse(row.try_get("channel")?);
        let (template, broadcast_id): (String, i64) = (row.try_get("template")?, row.try_get("broadcast_id")?);
        let key = Key::of(row.try_get("partner_id")?, row.try_get("hour")?, channel, &template, broadcast_id);
        *sums.0.entry(key).or_default() += Counts::from_row(row)?;
    }
    // The days' rows: the hours' keys taken back to their day's start, added up.
    let mut days = Deltas::default();
    for (key, counts) in &sums.0 {
        let day = Key { hour: key.hour - key.hour.rem_euclid(DAY_MS), ..key.clone() };
        *days.0.entry(day).or_default() += *counts;
    }
    for (table, time, rows) in [("message_rollups", "hour", &sums), ("message_rollups_daily", "day", &days)] {
        let added: Vec<String> = COUNTED.iter().map(|c| format!("{c} = {table}.{c} + excluded.{c}")).collect();
        let tail = format!(
            " ON CONFLICT (partner_id, {time}, channel, template, broadcast_id) DO UPDATE SET {}",
            added.join(", ")
        );
        sqlx::query(sqlx::AssertSqlSafe(insert_sql(backend, table, time, &tail)))
            .bind(rows.rows().value())
            .execute(&mut *tx)
            .await?;
    }
    let delete = format!(
        "DELETE FROM message_rollup_deltas WHERE id IN (SELECT id FROM ({}) AS folded)",
        json_table(backend, &[("id", "BIGINT")])
    );
    sqlx::query(sqlx::AssertSqlSafe(placeholders(backend, &delete))).bind(ids.value()).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(rows.len())
}

/// Which rows a figure counts: of one channel, template or broadcast (`None`: any).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub channel: Option<Channel>,
    pub template: Option<String>,
    pub broadcast_id: Option<i64>,
}

/// One group of a report: a bucket (its start), channel (`None`: not sent yet, where acceptances are
/// counted), template (`""`: none) and broadcast (0: none), and its counts.
#[derive(Debug, Clone)]
pub struct Group {
    pub bucket: Millis,
    pub channel: Option<Channel>,
    pub template: String,
    pub broadcast_id: i64,
    pub counts: Counts,
}

/// Partner `partner_id`'s counts over the hours in `[from, to)` that `filter` lets through, by bucket of
/// `step` from `from`, channel, template and broadcast: one pass over the rollups and the deltas not yet
/// folded, whose groups the caller adds up as it needs (a year by the day is some 15,000 groups where the
/// rows are 350,000).
pub async fn groups(
    db: &Db,
    partner_id: i64,
    (from, to): (Millis, Millis),
    step: Millis,
    filter: &Filter,
) -> Result<Vec<Group>, sqlx::Error> {
    let columns = format!("channel, template, broadcast_id, {}", COUNTED.join(", "));
    let summed: Vec<String> = COUNTED.iter().map(|c| format!("CAST(SUM({c}) AS BIGINT) AS {c}")).collect();
    // By whole days, the days' rows; else the hours'. The deltas are the hours' not folded yet.
    let (table, time) = if step % DAY_MS == 0 { ("message_rollups_daily", "day") } else { ("message_rollups", "hour") };
    let sql = format!(
        "WITH r AS (SELECT {time} AS hour, {columns} FROM {table} WHERE partner_id = $1 AND {time} >= $2 \
         AND {time} < $3 UNION ALL SELECT hour, {columns} FROM message_rollup_deltas WHERE partner_id = $1 AND hour >= $2 AND hour < $3) \
         SELECT hour - ((hour - $2) % $4) AS bucket, channel, template, broadcast_id, {} FROM r \
         WHERE ($5 = '' OR channel = $5) AND ($6 = '' OR template = $6) AND ($7 = 0 OR broadcast_id = $7) \
         GROUP BY 1, 2, 3, 4 ORDER BY 1",
        summed.join(", ")
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(partner_id)
        .bind(from)
        .bind(to)
        .bind(step)
        .bind(filter.channel.map_or("", Channel::as_str))
        .bind(filter.template.as_deref().unwrap_or(""))
        .bind(filter.broadcast_id.unwrap_or(0))
        .fetch_all(db.reader())
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Group {
                bucket: row.try_get("bucket")?,
                channel: Channel::parse(row.try_get("channel")?),
                template: row.try_get("template")?,
                broadcast_id: row.try_get("broadcast_id")?,
                counts: Counts::from_row(row)?,
            })
        })
        .collect()
}

/// What a partner pays a message on each paid channel, to cost its figures with: millionths of `currency`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prices {
    /// ISO 4217 (`None`: no prices set).
    pub currency: Option<String>,
    pub whatsapp_micros: Option<i64>,
    pub sms_micros: Option<i64>,
}

/// Partner `partner_id`'s prices.
pub async fn prices(db: &Db, partner_id: i64) -> Result<Prices, sqlx::Error> {
    let row = sqlx::query("SELECT price_currency, price_whatsapp_micros, price_sms_micros FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(db.reader())
        .await?;
    Ok(Prices {
        currency: row.try_get("price_currency")?,
        whatsapp_micros: row.try_get("price_whatsapp_micros")?,
        sms_micros: row.try_get("price_sms_micros")?,
    })
}

/// Keeps partner `partner_id`'s prices.
pub async fn set_prices(db: &Db, partner_id: i64, prices: &Prices) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE partners SET price_currency = $1, price_whatsapp_micros = $2, price_sms_micros = $3 WHERE id = $4",
    )
    .bind(&prices.currency)
    .bind(prices.whatsapp_micros)
    .bind(prices.sms_micros)
    .bind(partner_id)
    .execute(db.writer())
    .await?;
    Ok(())
}
