//! "Sign out everywhere": the moment before which an end user's tokens are refused, kept per phone so
//! every host refuses them, and noted per host for a short while so a request does not read it each time.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Db;
use crate::clock::Millis;

/// Refuses `phone`'s tokens issued before `before_s` (seconds since the epoch) from now on.
pub async fn revoke_before(db: &Db, phone: &str, before_s: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO user_token_revocations (phone, before_s) VALUES ($1, $2) ON CONFLICT (phone) DO UPDATE \
         SET before_s = excluded.before_s WHERE user_token_revocations.before_s < excluded.before_s",
    )
    .bind(phone)
    .bind(before_s)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Before when `phone`'s tokens are refused, if ever.
async fn revoked_before(db: &Db, phone: &str) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT before_s FROM user_token_revocations WHERE phone = $1")
        .bind(phone)
        .fetch_optional(db.reader())
        .await
}

/// How long a host trusts what it read of a phone's revocation: another host's "sign out everywhere" takes
/// effect here within this time (this host's own, at once).
pub const NOTE_TTL_MS: Millis = 2_000;

/// What this host last read of each phone's revocation, and when.
#[derive(Default)]
pub struct RevocationNotes {
    read: Mutex<HashMap<String, (Option<i64>, Millis)>>,
}

impl RevocationNotes {
    /// Phones held before those read longer ago than the TTL are forgotten.
    const PRUNE_AT: usize = 100_000;

    /// Whether a token of `phone` issued at `issued_s` has been revoked.
    pub async fn is_revoked(&self, db: &Db, phone: &str, issued_s: i64, now: Millis) -> Result<bool, sqlx::Error> {
        let fresh = |at: Millis| (0..NOTE_TTL_MS).contains(&(now - at));
        let noted = self.notes().get(phone).copied().filter(|(_, at)| fresh(*at));
        let before = match noted {
            Some((before, _)) => before,
            None => {
                let before = revoked_before(db, phone).await?;
                self.note(phone, before, now);
                before
            }
        };
        Ok(before.is_some_and(|before| issued_s < before))
    }

    /// Revokes `phone`'s tokens issued before `before_s`, on every host (here at once).
    pub async fn revoke(&self, db: &Db, phone: &str, before_s: i64, now: Millis) -> Result<(), sqlx::Error> {
        revoke_before(db, phone, before_s).await?;
        let before = revoked_before(db, phone).await?;
        self.note(phone, before, now);
        Ok(())
    }

    fn note(&self, phone: &str, before: Option<i64>, now: Millis) {
        let mut notes = self.notes();
        if notes.len() >= Self::PRUNE_AT {
            notes.retain(|_, (_, at)| (0..NOTE_TTL_MS).contains(&(now - *at)));
        }
        notes.insert(phone.to_string(), (before, now));
    }

    fn notes(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Option<i64>, Millis)>> {
        self.read.lock().expect("revocation notes poisoned")
    }
}
