//! SQLite's checkpoints, off the writer's path. In WAL mode every commit appends to the write-ahead log,
//! and a checkpoint copies the log into the database file. By default SQLite checkpoints in the commit that
//! takes the log past 1,000 pages, on the writer's own connection: that commit, and every write queued
//! behind the one writer, waits for the copy. Here a task of its own runs a `PASSIVE` checkpoint every
//! [`INTERVAL`] on a connection of its own (it copies what no reader still needs, never waiting for a reader
//! or the writer, which goes on meanwhile), and the writer checkpoints itself only past
//! [`WRITER_CHECKPOINT_PAGES`], should the task fall behind.
//!
//! Hosts sharing one SQLite file each run such a task: a `PASSIVE` checkpoint that finds another one running
//! answers "busy" in its row, not an error, and the next one copies what is left.

use std::time::Duration;

use sqlx::AnyPool;
use tokio_util::sync::{CancellationToken, DropGuard};

/// How often the task checkpoints.
pub const INTERVAL: Duration = Duration::from_millis(250);

/// The log's size, in pages (4 KiB), past which the writer's commit checkpoints by itself (40 MiB).
pub const WRITER_CHECKPOINT_PAGES: u32 = 10_000;

/// Starts checkpointing through `pool` (a connection of its own to the database file) until the guard
/// is dropped.
pub fn start(pool: AnyPool) -> DropGuard {
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(INTERVAL);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stopped.cancelled() => break,
                _ = every.tick() => {}
            }
            if let Err(error) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").fetch_optional(&pool).await {
                tracing::warn!(%error, "SQLite's write-ahead log could not be checkpointed");
            }
        }
        pool.close().await;
    });
    stop.drop_guard()
}
