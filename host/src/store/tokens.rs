//! "Sign out everywhere": the moment before which an end user's tokens are refused, kept per phone so
//! every host refuses them, and noted by each host, which reads only what was revoked since its last look
//! (every two seconds at most), so a request or a stream's heartbeat does not read it each time.

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

/// How long a host trusts what it read of the revocations: another host's "sign out everywhere" takes
/// effect here within this time (this host's own, at once).
pub const NOTE_TTL_MS: Millis = 2_000;

/// How far before its last look a host reads the revocations written since: more than the clocks of the
/// hosts sharing a database differ by, and the time a revocation takes from its clock reading to its commit.
const LOOK_BACK_S: i64 = 60;

/// The revocations written since `since_s` (by their `before_s`, the moment each was written).
async fn revoked_since(db: &Db, since_s: i64) -> Result<Vec<(String, i64)>, sqlx::Error> {
    sqlx::query_as("SELECT phone, before_s FROM user_token_revocations WHERE before_s >= $1")
        .bind(since_s)
        .fetch_all(db.reader())
        .await
}

/// What this host knows of the revocations: each phone's, read once when first asked about, then kept
/// current by one read every [`NOTE_TTL_MS`] of the revocations written since the last (a phone's row is
/// written only by [`revoke_before`], with the moment of writing). Ten thousand open streams checking their
/// users' sign-in at each heartbeat cost the database one read every two seconds, not four hundred a second.
#[derive(Default)]
pub struct RevocationNotes {
    notes: Mutex<Notes>,
    /// One look at a time; whoever waits on it finds the notes current.
    looking: tokio::sync::Mutex<()>,
    /// Reads of the database, for the tests.
    reads: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Notes {
    /// Each phone's revocation (`before_s`, if any) and when it was last asked about.
    phones: HashMap<String, (Option<i64>, Millis)>,
    /// When the last look at the revocations began (`None`: never): every revocation written before then is
    /// in `phones`, for the phones it holds.
    looked_at: Option<Millis>,
    /// How many phones it holds before those not asked about for a while are forgotten.
    prune_at: usize,
}

impl Notes {
    /// Notes a revocation read of `phone`, keeping the later one (a revocation only ever moves later); a phone
    /// new here counts as asked about `now`.
    fn merge(&mut self, phone: String, read: Option<i64>, now: Millis) -> &mut (Option<i64>, Millis) {
        let noted = self.phones.entry(phone).or_insert((read, now));
        noted.0 = noted.0.max(read);
        noted
    }
}

impl RevocationNotes {
    /// Phones held before those not asked about for [`Self::IDLE_MS`] are forgotten.
    const PRUNE_AT: usize = 100_000;
    const IDLE_MS: Millis = 600_000;

    /// Whether a token of `phone` issued at `issued_s` has been revoked.
    pub async fn is_revoked(&self, db: &Db, phone: &str, issued_s: i64, now: Millis) -> Result<bool, sqlx::Error> {
        self.look(db, now).await?;
        let noted = self.notes().phones.get_mut(phone).map(|(before, asked)| {
            *asked = now;
            *before
        });
        let before = match noted {
            Some(before) => before,
            None => {
                // Read after the look began: what the next look misses cannot be older than this read.
                let before = self.read_phone(db, phone).await?;
                self.note(phone, before, now);
                before
            }
        };
        Ok(before.is_some_and(|before| issued_s < before))
    }

    /// Revokes `phone`'s tokens issued before `before_s`, on every host (here at once).
    pub async fn revoke(&self, db: &Db, phone: &str, before_s: i64, now: Millis) -> Result<(), sqlx::Error> {
        revoke_before(db, phone, before_s).await?;
        let before = self.read_phone(db, phone).await?;
        self.note(phone, before, now);
        Ok(())
    }

    /// Brings the notes up to date when the last look is [`NOTE_TTL_MS`] old: the revocations written since
    /// (a little before) it began.
    async fn look(&self, db: &Db, now: Millis) -> Result<(), sqlx::Error> {
        let current = |notes: &Notes| notes.looked_at.is_some_and(|at| (0..NOTE_TTL_MS).contains(&(now - at)));
        if current(&self.notes()) {
            return Ok(());
        }
        let _looking = self.looking.lock().await;
        let looked_at = {
            let notes = self.notes();
            if current(&notes) {
                return Ok(());
            }
            notes.looked_at
        };
        // The first look: every phone is read when first asked about, so nothing older is needed.
        let since = looked_at.unwrap_or(now).div_euclid(1000) - LOOK_BACK_S;
        self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let written = revoked_since(db, since).await?;
        let mut notes = self.notes();
        // Each row read is the phone's whole revocation: noted whether or not the phone was known here.
        for (phone, before_s) in written {
            notes.merge(phone, Some(before_s), now);
        }
        // The next look reaches back from when this one began (a clock set back only reaches further).
        notes.looked_at = Some(now);
        Ok(())
    }

    async fn read_phone(&self, db: &Db, phone: &str) -> Result<Option<i64>, sqlx::Error> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        revoked_before(db, phone).await
    }

    /// Notes what was read of `phone`, asked about `now`.
    fn note(&self, phone: &str, read: Option<i64>, now: Millis) {
        let mut notes = self.notes();
        if notes.phones.len() >= notes.prune_at.max(Self::PRUNE_AT) {
            notes.phones.retain(|_, (_, asked)| (0..Self::IDLE_MS).contains(&(now - *asked)));
            // Were most of them asked about lately, the next prune waits until they are twice as many.
            notes.prune_at = 2 * notes.phones.len();
        }
        let (_, asked) = notes.merge(phone.to_string(), read, now);
        *asked = now;
    }

    fn notes(&self) -> std::sync::MutexGuard<'_, Notes> {
        self.notes.lock().expect("revocation notes poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::{NOTE_TTL_MS, RevocationNotes, revoke_before};
    use crate::store::Db;

    impl RevocationNotes {
        fn reads(&self) -> u64 {
            self.reads.load(std::sync::atomic::Ordering::Relaxed)
        }
    }

    #[tokio::test]
    async fn a_host_reads_each_phone_once_then_only_what_was_revoked_since_its_last_look() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite_at(&dir.path().join("t.db"), 2).await;
        // Two hosts on one database.
        let (here, there) = (RevocationNotes::default(), RevocationNotes::default());
        let phones: Vec<String> = (0..100).map(|i| format!("+1555000{i:04}")).collect();
        let start: i64 = 1_800_000_000_000;
        let issued = start / 1000 - 100;
        let revoked = |notes: &'static str, phone: usize, at: i64| {
            let (notes, db, phone) = (if notes == "here" { &here } else { &there }, &db, &phones[phone]);
            async move { notes.is_revoked(db, phone, issued, at).await.unwrap() }
        };
        for p in 0..phones.len() {
            assert!(!revoked("there", p, start).await);
        }
        // One look, then each phone once.
        assert_eq!(there.reads(), 1 + phones.len() as u64);
        // Asked again and again, over five times the time the notes are trusted: one look each time they are
        // that old, and no phone read again.
        for step in 0..50 {
            for p in 0..phones.len() {
                assert!(!revoked("there", p, start + step * NOTE_TTL_MS / 10).await);
            }
        }
        assert_eq!(there.reads(), 1 + phones.len() as u64 + 4);
        let last_look = start + 4 * NOTE_TTL_MS;

        // Signed out everywhere on the other host: there at once…
        let at = last_look + 100;
        here.revoke(&db, &phones[7], at / 1000 + 1, at).await.unwrap();
        assert!(revoked("here", 7, at).await);
        // …here once the notes are as old as they are trusted, not before.
        assert!(!revoked("there", 7, last_look + NOTE_TTL_MS - 1).await);
        assert!(revoked("there", 7, last_look + NOTE_TTL_MS).await);
        // A token issued after the sign-out works.
        assert!(!there.is_revoked(&db, &phones[7], at / 1000 + 1, last_look + NOTE_TTL_MS).await.unwrap());
        // A revocation by a host whose clock is half a minute behind is seen at the next look too.
        let look = last_look + NOTE_TTL_MS;
        revoke_before(&db, &phones[8], look / 1000 - 30).await.unwrap();
        assert!(!revoked("there", 8, look + NOTE_TTL_MS - 1).await);
        assert!(revoked("there", 8, look + NOTE_TTL_MS).await);
        // A phone this host never asked about, signed out elsewhere since its last look: read when first asked
        // about.
        revoke_before(&db, "+15559999999", look / 1000 + 3).await.unwrap();
        assert!(there.is_revoked(&db, "+15559999999", issued, look + NOTE_TTL_MS).await.unwrap());
        assert_eq!(there.reads(), 1 + phones.len() as u64 + 4 + 3);
    }
}
