//! End-user devices: created at login or when a key is published; the key directory and E2E sends read
//! their published identity keys.

use super::Db;
use crate::clock::Millis;

/// The device uuids of `phone` that have published an identity key.
pub async fn published_device_uuids(db: &Db, phone: &str) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT device_uuid FROM devices WHERE phone = $1 AND identity_key_pub IS NOT NULL ORDER BY id")
        .bind(phone)
        .fetch_all(db.reader())
        .await
}

/// Records a device of `phone` (login or key publication). `Ok(false)` when the uuid belongs to another
/// phone's device.
pub async fn ensure_device_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    device_uuid: &str,
    phone: &str,
    platform: Option<&str>,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    sqlx::query(
        "INSERT INTO devices (device_uuid, phone, platform, key_version, last_seen_at, created_at) \
         VALUES ($1, $2, $3, 0, $4, $4) ON CONFLICT (device_uuid) DO NOTHING",
    )
    .bind(device_uuid)
    .bind(phone)
    .bind(platform)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    let owner: String = sqlx::query_scalar("SELECT phone FROM devices WHERE device_uuid = $1")
        .bind(device_uuid)
        .fetch_one(&mut **tx)
        .await?;
    Ok(owner == phone)
}

/// How often one phone's activity is written at most.
pub const PRESENCE_INTERVAL_MS: Millis = 15_000;

/// Writes the activity of many phones in one statement, leaving a row more recent than
/// [`PRESENCE_INTERVAL_MS`] alone (another host may have written it). Called only through
/// [`PresenceNotes::touch`]'s group commit.
fn touch_presence_many<'a>(
    tx: &'a mut sqlx::Transaction<'static, sqlx::Any>,
    touches: &'a [(String, Millis)],
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<()>, sqlx::Error>> + Send + 'a>> {
    Box::pin(async move {
        // One row per phone (the latest), or the upsert would touch a row twice.
        let mut latest: std::collections::BTreeMap<&str, Millis> = std::collections::BTreeMap::new();
        for (phone, at) in touches {
            let slot = latest.entry(phone.as_str()).or_insert(*at);
            *slot = (*slot).max(*at);
        }
        let backend = super::backend_of(tx);
        let sql = format!(
            "INSERT INTO presence (phone, last_seen_at) VALUES {} ON CONFLICT (phone) DO UPDATE \
             SET last_seen_at = excluded.last_seen_at WHERE presence.last_seen_at < excluded.last_seen_at - {}",
            super::rows(latest.len(), "(?, ?)"),
            PRESENCE_INTERVAL_MS
        );
        let mut upsert = super::query_rows(backend, &sql, latest.len());
        for (phone, at) in &latest {
            upsert = upsert.bind(*phone).bind(*at);
        }
        upsert.execute(&mut **tx).await?;
        Ok(vec![(); touches.len()])
    })
}

/// When this host last wrote each phone's activity, so that a `/me` call within
/// [`PRESENCE_INTERVAL_MS`] of the last write sends no statement at all (a write statement, even one
/// that changes nothing, waits for the database's one writer; `writer::WrittenWithin`). What is written goes
/// through a group commit: ten thousand open streams' heartbeats cost the writer a few transactions, not
/// ten thousand. A stream's own notes (its heartbeats, its end) wait for nobody, so theirs gather for
/// [`BEAT_GATHER`] before they are written: 10,000 streams' heartbeats take the writer a few transactions a
/// second instead of one each time it is free.
///
/// An open stream's heartbeat only has to keep its user from looking offline (`HUBBUB_OFFLINE_AFTER_S`
/// since the last note), so it writes once the last note is `beat_interval` old — the offline time less
/// two heartbeats, never less than [`PRESENCE_INTERVAL_MS`] — not at every heartbeat: with the defaults
/// (300 s, 25 s) a stream notes its user every 250–275 s instead of every 25 s, and 10,000 open streams
/// cost the writer some 40 rows a second instead of 400. The stream's end is always noted (the offline
/// timer starts from it).
pub struct PresenceNotes {
    written: super::writer::WrittenWithin<String>,
    writes: super::writer::GroupCommit<(String, Millis), ()>,
    beats: super::writer::GroupCommit<(String, Millis), ()>,
    beat_interval: Millis,
}

/// How long the notes of streams' heartbeats gather before they are written.
pub const BEAT_GATHER: std::time::Duration = std::time::Duration::from_millis(250);

impl PresenceNotes {
    /// Notes for a host whose users count as offline `offline_after_ms` after their last note, and whose
    /// streams beat every `heartbeat_ms` at most.
    pub fn new(db: Db, offline_after_ms: Millis, heartbeat_ms: Millis) -> PresenceNotes {
        let writes = super::writer::Writes {
            batch: Some(touch_presence_many),
            one: |tx, touch| {
                Box::pin(async move { touch_presence_many(tx, std::slice::from_ref(touch)).await.map(|_| ()) })
            },
        };
        let written = super::writer::WrittenWithin::new(PRESENCE_INTERVAL_MS);
        let beats = super::writer::GroupCommit::spawn_gathering(db.clone(), 512, BEAT_GATHER, writes);
        let beat_interval = offline_after_ms.saturating_sub(heartbeat_ms.saturating_mul(2)).max(PRESENCE_INTERVAL_MS);
        PresenceNotes { written, writes: super::writer::GroupCommit::spawn_with(db, 512, writes), beats, beat_interval }
    }

    /// Notes activity of `phone` (any `/me` call, a stream opening): writes it, unless this host did within
    /// the interval.
    pub async fn touch(&self, phone: &str, now: Millis) -> Result<(), sqlx::Error> {
        self.note(&self.writes, phone, now).await
    }

    /// An open stream's heartbeat: notes its user once the last note is the beat interval old (see
    /// [`PresenceNotes`]), written within [`BEAT_GATHER`].
    pub async fn beat(&self, phone: &str, now: Millis) -> Result<(), sqlx::Error> {
        if self.written.recent_within(phone, now, self.beat_interval) {
            return Ok(());
        }
        self.note(&self.beats, phone, now).await
    }

    /// A stream's end: the user was here until `now` (written within [`BEAT_GATHER`], unless a note of the
    /// last [`PRESENCE_INTERVAL_MS`] already says so).
    pub async fn left(&self, phone: &str, now: Millis) -> Result<(), sqlx::Error> {
        self.note(&self.beats, phone, now).await
    }

    async fn note(
        &self,
        writes: &super::writer::GroupCommit<(String, Millis), ()>,
        phone: &str,
        now: Millis,
    ) -> Result<(), sqlx::Error> {
        if self.written.recent(phone, now) {
            return Ok(());
        }
        writes.write((phone.to_string(), now)).await?;
        self.written.mark(phone.to_string(), now);
        Ok(())
    }
}

/// When `phone` was last active, if ever.
pub async fn last_seen(db: &Db, phone: &str) -> Result<Option<Millis>, sqlx::Error> {
    sqlx::query_scalar("SELECT last_seen_at FROM presence WHERE phone = $1")
        .bind(phone)
        .fetch_optional(db.reader())
        .await
}

/// An end-user device as the key directory shows it.
#[derive(Debug, Clone)]
pub struct Device {
    pub device_uuid: String,
    pub platform: Option<String>,
    pub identity_key_pub: Option<String>,
    /// Grows each time the device publishes a different key (0: none yet).
    pub key_version: i64,
}

const DEVICE_COLUMNS: &str = "device_uuid, platform, identity_key_pub, key_version";

fn device_from_row(row: &sqlx::any::AnyRow) -> Result<Device, sqlx::Error> {
    use sqlx::Row;
    Ok(Device {
        device_uuid: row.try_get("device_uuid")?,
        platform: row.try_get("platform")?,
        identity_key_pub: row.try_get("identity_key_pub")?,
        key_version: row.try_get("key_version")?,
    })
}

/// The devices of `phone`, oldest first.
pub async fn list_for_phone(db: &Db, phone: &str) -> Result<Vec<Device>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", DEVICE_COLUMNS, " FROM devices WHERE phone = $1 ORDER BY id");
    let rows = sqlx::query(sql).bind(phone).fetch_all(db.reader()).await?;
    rows.iter().map(device_from_row).collect()
}

/// Publishes the identity key of a device of `phone`, creating the device if new. A different key replaces
/// the old one and bumps `key_version`. `Ok(None)` when the uuid is another phone's device.
pub async fn publish_key(
    db: &Db,
    phone: &str,
    device_uuid: &str,
    platform: Option<&str>,
    identity_key_pub: &str,
    now: Millis,
) -> Result<Option<Device>, sqlx::Error> {
    let mut tx = db.begin().await?;
    if !ensure_device_in(&mut tx, device_uuid, phone, platform, now).await? {
        return Ok(None);
    }
    let sql = const_format::concatcp!(
        "UPDATE devices SET key_version = CASE WHEN identity_key_pub = $1 THEN key_version ELSE key_version + 1 END, \
         identity_key_pub = $1, platform = COALESCE($2, platform), last_seen_at = $3 WHERE device_uuid = $4 RETURNING ",
        DEVICE_COLUMNS
    );
    let row =
        sqlx::query(sql).bind(identity_key_pub).bind(platform).bind(now).bind(device_uuid).fetch_one(&mut *tx).await?;
    tx.commit().await?;
    device_from_row(&row).map(Some)
}

/// Gives back an alert slot taken by `message_id` when no alert could be sent, so the next encrypted
/// message of the same offline period tries again.
pub async fn release_alert(db: &Db, partner_id: i64, phone: &str, message_id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM e2e_alerts WHERE partner_id = $1 AND phone = $2 AND message_id = $3")
        .bind(partner_id)
        .bind(phone)
        .bind(message_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Takes the one opaque alert of the current offline period of `phone` for a partner: true when this
/// caller may send it (no alert yet, or the user has been active since the last one: `last_seen`).
/// Taken before sending, so several hosts never alert twice.
pub async fn claim_alert(
    db: &Db,
    partner_id: i64,
    phone: &str,
    message_id: i64,
    last_seen: Millis,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let taken: Option<i64> = sqlx::query_scalar(
        "INSERT INTO e2e_alerts (partner_id, phone, message_id, sent_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (partner_id, phone) DO UPDATE SET message_id = excluded.message_id, sent_at = excluded.sent_at \
         WHERE e2e_alerts.sent_at <= $5 RETURNING message_id",
    )
    .bind(partner_id)
    .bind(phone)
    .bind(message_id)
    .bind(now)
    .bind(last_seen)
    .fetch_optional(db.writer())
    .await?;
    Ok(taken.is_some())
}
