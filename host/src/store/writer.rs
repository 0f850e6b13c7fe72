//! Group commit for the hot write paths. Concurrent writers hand their work to one task, which writes
//! whatever has gathered in a single transaction: on SQLite, where every write is serialised on one
//! connection anyway, N round trips through the writer become one transaction; on PostgreSQL N commits
//! become one. Each caller still waits for its own write, so nothing is acknowledged before it is stored —
//! but for writes nobody waits on, which are handed over ([`GroupCommit::hand`]: the messages a stream
//! sent, which become `delivered`) and logged by the writer should they fail.
//!
//! A batch is written in one transaction without savepoints (a savepoint costs two more round trips per
//! item). If that transaction fails, every item of the batch is written again in a transaction of its own,
//! so one bad item fails only itself, never the others.
//!
//! The hot write paths that use it: message creation (`deliveries::MessageWriter`), the outcome of each
//! delivery (`deliveries::finisher`), webhook attempts (`outbox::AttemptRecorder`) and bots' progress
//! (`flows::progress_writer`).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use sqlx::{Any, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::Db;

/// One item's write inside the batch's transaction.
pub type WriteFn<J, R> = for<'a> fn(
    &'a mut Transaction<'static, Any>,
    &'a J,
) -> Pin<Box<dyn Future<Output = Result<R, sqlx::Error>> + Send + 'a>>;

/// A whole batch's write inside its transaction (fewer statements than one [`WriteFn`] per item), answering
/// each item in order.
pub type BatchFn<J, R> = for<'a> fn(
    &'a mut Transaction<'static, Any>,
    &'a [J],
) -> Pin<Box<dyn Future<Output = Result<Vec<R>, sqlx::Error>> + Send + 'a>>;

/// How a group commit writes: the whole batch at once (`batch`, when given), and each item alone (the
/// items of a failed batch, or every item when there is no `batch`).
pub struct Writes<J, R> {
    pub batch: Option<BatchFn<J, R>>,
    pub one: WriteFn<J, R>,
}

impl<J, R> Clone for Writes<J, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<J, R> Copy for Writes<J, R> {}

/// How often a gathering batch ([`GroupCommit::spawn_gathering`]) takes what has come: a batch that fills
/// up is written at most this late, however fast items come.
const GATHER_STEP: Duration = Duration::from_millis(20);

/// Handle to a group-commit task writing items of type `J` with `write`, answering each with `R`.
pub struct GroupCommit<J, R> {
    jobs: mpsc::Sender<Job<J, R>>,
}

/// An item to write, and who waits for its answer (nobody, for an item [`GroupCommit::hand`]ed over).
type Job<J, R> = (J, Option<oneshot::Sender<Result<R, sqlx::Error>>>);

impl<J, R> Clone for GroupCommit<J, R> {
    fn clone(&self) -> Self {
        GroupCommit { jobs: self.jobs.clone() }
    }
}

impl<J, R> std::fmt::Debug for GroupCommit<J, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

impl<J: Send + Sync + 'static, R: Send + 'static> GroupCommit<J, R> {
    /// Starts the task (up to `max_batch` items per transaction; [`Db::write_lanes`] transactions at once);
    /// it ends when every handle is dropped.
    pub fn spawn(db: Db, max_batch: usize, write: WriteFn<J, R>) -> GroupCommit<J, R> {
        GroupCommit::spawn_with(db, max_batch, Writes { batch: None, one: write })
    }

    /// [`GroupCommit::spawn`] with a write of the whole batch.
    pub fn spawn_with(db: Db, max_batch: usize, write: Writes<J, R>) -> GroupCommit<J, R> {
        GroupCommit::spawn_gathering(db, max_batch, Duration::ZERO, write)
    }

    /// [`GroupCommit::spawn_with`] for writes that may wait: a batch gathers for `gather` after its first
    /// item (or until it holds `max_batch`) before it is written, so a steady trickle of items costs the
    /// writer a transaction per `gather` rather than one per item or two. For writes nobody waits on
    /// (messages handed to devices), where each transaction taken from the one SQLite writer is one the
    /// send path waits behind.
    pub fn spawn_gathering(db: Db, max_batch: usize, gather: Duration, write: Writes<J, R>) -> GroupCommit<J, R> {
        let (jobs, rx) = mpsc::channel::<Job<J, R>>(4 * max_batch);
        // Lanes take turns at the queue: one gathers a batch while others are writing theirs.
        let rx = std::sync::Arc::new(tokio::sync::Mutex::new(rx));
        for _ in 0..db.write_lanes() {
            let (db, rx) = (db.clone(), rx.clone());
            tokio::spawn(async move {
                let mut batch = Vec::with_capacity(max_batch);
                loop {
                    let mut queue = rx.lock().await;
                    if queue.recv_many(&mut batch, max_batch).await == 0 {
                        break;
                    }
                    if !gather.is_zero() {
                        // The lane sleeps while the batch gathers, taking what came at each step: a task that
                        // waited on the queue would be woken by every item (a wake-up, often of the other
                        // core's thread, and a timer set anew, for each message a stream sends).
                        let until = tokio::time::Instant::now() + gather;
                        while batch.len() < max_batch && tokio::time::Instant::now() < until {
                            tokio::time::sleep_until(until.min(tokio::time::Instant::now() + GATHER_STEP)).await;
                            while batch.len() < max_batch {
                                match queue.try_recv() {
                                    Ok(job) => batch.push(job),
                                    Err(_) => break,
                                }
                            }
                        }
                    }
                    drop(queue);
                    let (items, replies): (Vec<J>, Vec<_>) = std::mem::take(&mut batch).into_iter().unzip();
                    let results = write_batch(&db, &items, write).await;
                    for (reply, result) in replies.into_iter().zip(results) {
                        match (reply, result) {
                            (Some(reply), result) => drop(reply.send(result)),
                            (None, Err(error)) => tracing::warn!(%error, "a write handed over could not be stored"),
                            (None, Ok(_)) => {}
                        }
                    }
                }
            });
        }
        GroupCommit { jobs }
    }

    /// Writes `item` as part of the next batch, and answers once it is committed (or failed).
    pub async fn write(&self, item: J) -> Result<R, sqlx::Error> {
        let (reply, answer) = oneshot::channel();
        self.jobs.send((item, Some(reply))).await.map_err(|_| sqlx::Error::PoolClosed)?;
        answer.await.map_err(|_| sqlx::Error::PoolClosed)?
    }

    /// Writes `item` as part of a coming batch, for a caller that does not wait for it: queued at once, or
    /// (the queue full) by a task of its own that waits for room; a failure is logged by the writer.
    pub fn hand(&self, item: J) {
        match self.jobs.try_send((item, None)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(job)) => {
                let jobs = self.jobs.clone();
                tokio::spawn(async move {
                    if jobs.send(job).await.is_err() {
                        tracing::warn!("a write handed over was dropped: its writer has stopped");
                    }
                });
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                tracing::warn!("a write handed over was dropped: its writer has stopped");
            }
        }
    }
}

/// Runs one transaction's `write` (begun and ended within it); once it has committed, on SQLite, the rows
/// it appended to the event log are kept for the log's tail (`user_events::Fresh`), which hands them to the
/// streams without reading them back.
async fn committed<T>(db: &Db, write: impl Future<Output = Result<T, sqlx::Error>>) -> Result<T, sqlx::Error> {
    let Some(fresh) = db.fresh() else { return write.await };
    let (result, appended) = super::user_events::collecting(write).await;
    if result.is_ok() {
        fresh.keep_rows(appended);
    }
    result
}

async fn write_batch<J, R>(db: &Db, items: &[J], write: Writes<J, R>) -> Vec<Result<R, sqlx::Error>> {
    let together: Result<Vec<R>, sqlx::Error> = committed(db, async {
        let mut tx = db.begin().await?;
        let results = match write.batch {
            Some(batch) => batch(&mut tx, items).await?,
            None => {
                let mut results = Vec::with_capacity(items.len());
                for item in items {
                    results.push((write.one)(&mut tx, item).await?);
                }
                results
            }
        };
        tx.commit().await?;
        Ok(results)
    })
    .await;
    match together {
        Ok(results) => results.into_iter().map(Ok).collect(),
        Err(e) if items.len() == 1 => vec![Err(e)],
        Err(e) => {
            tracing::debug!(error = %e, size = items.len(), "a batch failed; writing its items one by one");
            let mut each = Vec::with_capacity(items.len());
            for item in items {
                let result: Result<R, sqlx::Error> = committed(db, async {
                    let mut tx = db.begin().await?;
                    let result = (write.one)(&mut tx, item).await?;
                    tx.commit().await?;
                    Ok(result)
                })
                .await;
                each.push(result);
            }
            each
        }
    }
}

/// When this host last wrote something for each key, so that a write repeated within `interval` is
/// skipped: a busy phone's presence or a busy API key's last use costs the writer one statement per
/// interval, not one per request. Once it holds 100,000 keys, those written longer ago than the interval
/// are forgotten.
pub struct WrittenWithin<K> {
    interval: crate::clock::Millis,
    at: std::sync::Mutex<std::collections::HashMap<K, crate::clock::Millis>>,
}

impl<K: Eq + std::hash::Hash> WrittenWithin<K> {
    const PRUNE_AT: usize = 100_000;

    pub fn new(interval: crate::clock::Millis) -> Self {
        WrittenWithin { interval, at: Default::default() }
    }

    /// Whether `key` was written within the interval before `now`.
    pub fn recent<Q>(&self, key: &Q, now: crate::clock::Millis) -> bool
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + std::hash::Hash + ?Sized,
    {
        self.recent_within(key, now, self.interval)
    }

    /// Whether `key` was written within `interval` before `now` (a longer interval than the notes' own
    /// finds only what they still hold: those written within theirs, and any older until pruned).
    pub fn recent_within<Q>(&self, key: &Q, now: crate::clock::Millis, interval: crate::clock::Millis) -> bool
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + std::hash::Hash + ?Sized,
    {
        let at = self.at.lock().expect("written notes poisoned");
        at.get(key).is_some_and(|at| (0..interval).contains(&(now - at)))
    }

    /// Notes that `key` was written at `now`.
    pub fn mark(&self, key: K, now: crate::clock::Millis) {
        let mut at = self.at.lock().expect("written notes poisoned");
        if at.len() >= Self::PRUNE_AT {
            at.retain(|_, written| (0..self.interval).contains(&(now - *written)));
        }
        at.insert(key, now);
    }
}

#[cfg(test)]
mod tests {
    use super::GroupCommit;
    use crate::store::Db;

    async fn count(db: &Db) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM handed").fetch_one(db.reader()).await.unwrap()
    }

    /// Items handed over are all written though nobody waits for them: past a full queue (four batches of
    /// one), and around an item whose write fails (it alone is lost, and logged).
    #[tokio::test]
    async fn items_handed_over_are_written_even_past_a_full_queue() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite_at(&dir.path().join("w.db"), 2).await;
        sqlx::query("CREATE TABLE handed (n INTEGER NOT NULL CHECK (n >= 0))").execute(db.writer()).await.unwrap();
        let writer: GroupCommit<i64, ()> = GroupCommit::spawn(db.clone(), 1, |tx, n| {
            Box::pin(async move {
                sqlx::query("INSERT INTO handed (n) VALUES ($1)").bind(*n).execute(&mut **tx).await.map(|_| ())
            })
        });
        for n in 0..100 {
            writer.hand(if n == 50 { -1 } else { n });
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while count(&db).await < 99 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(count(&db).await, 99, "every item but the one that cannot be written");
        // A caller that waits still has its answer: written, or the error.
        writer.write(200).await.unwrap();
        assert!(writer.write(-2).await.is_err());
        db.close().await;
    }

    /// A gathering writer writes what comes within its window as one batch, and a batch that fills up at
    /// once without waiting out the window.
    #[tokio::test]
    async fn a_gathering_writer_writes_what_comes_within_its_window_in_one_batch() {
        use super::Writes;
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite_at(&dir.path().join("w.db"), 2).await;
        sqlx::query("CREATE TABLE batches (id INTEGER PRIMARY KEY, size INTEGER NOT NULL)")
            .execute(db.writer())
            .await
            .unwrap();
        let writes: Writes<i64, ()> = Writes {
            batch: Some(|tx, items| {
                Box::pin(async move {
                    sqlx::query("INSERT INTO batches (size) VALUES ($1)")
                        .bind(items.len() as i64)
                        .execute(&mut **tx)
                        .await?;
                    Ok(vec![(); items.len()])
                })
            }),
            one: |_, _| Box::pin(async { Ok(()) }),
        };
        let gather = std::time::Duration::from_millis(1000);
        let writer = GroupCommit::spawn_gathering(db.clone(), 10, gather, writes);
        let sizes = || async {
            let sizes: Vec<i64> =
                sqlx::query_scalar("SELECT size FROM batches ORDER BY id").fetch_all(db.reader()).await.unwrap();
            sizes
        };
        // A trickle: five items, 20 ms apart, all within the window.
        for n in 0..5 {
            writer.hand(n);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while sizes().await.is_empty() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(sizes().await, vec![5], "the trickle is one batch");
        // Twenty-five at once: two full batches, written without waiting, then the rest after the window.
        let started = std::time::Instant::now();
        for n in 0..25 {
            writer.hand(n);
        }
        while sizes().await.len() < 4 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(sizes().await, vec![5, 10, 10, 5]);
        assert!(started.elapsed() >= gather, "the last batch waited out its window");
        db.close().await;
    }
}
