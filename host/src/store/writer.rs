//! Group commit for the hot write path: message creations from concurrent requests are collected by one
//! task and written in a single transaction (one savepoint each, so one failure affects only its own
//! request). On SQLite, where every write is serialised anyway, this turns N fsyncs into one.

use tokio::sync::{mpsc, oneshot};

use super::Db;
use super::messages::{Created, NewMessage, create_in};
use crate::clock::Millis;

/// Most creations written in one transaction.
const MAX_BATCH: usize = 256;

struct Job {
    message: NewMessage,
    now: Millis,
    reply: oneshot::Sender<Result<Created, sqlx::Error>>,
}

/// Handle to the batching writer task.
#[derive(Clone, Debug)]
pub struct MessageWriter {
    jobs: mpsc::Sender<Job>,
}

impl MessageWriter {
    /// Starts the writer task; it ends when every handle is dropped.
    pub fn spawn(db: Db) -> MessageWriter {
        let (jobs, mut rx) = mpsc::channel::<Job>(4 * MAX_BATCH);
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
                write_batch(&db, std::mem::take(&mut batch)).await;
            }
        });
        MessageWriter { jobs }
    }

    /// Creates a message (see [`create_in`]) as part of the next batch.
    pub async fn create(&self, message: NewMessage, now: Millis) -> Result<Created, sqlx::Error> {
        let (reply, answer) = oneshot::channel();
        self.jobs.send(Job { message, now, reply }).await.map_err(|_| sqlx::Error::PoolClosed)?;
        answer.await.map_err(|_| sqlx::Error::PoolClosed)?
    }
}

async fn write_batch(db: &Db, jobs: Vec<Job>) {
    let mut outcomes = Vec::with_capacity(jobs.len());
    let result: Result<(), sqlx::Error> = async {
        let mut tx = db.writer().begin().await?;
        for job in &jobs {
            let mut savepoint = sqlx::Connection::begin(&mut *tx).await?;
            match create_in(&mut savepoint, &job.message, job.now).await {
                Ok(created) => {
                    savepoint.commit().await?;
                    outcomes.push(Ok(created));
                }
                Err(e) => {
                    savepoint.rollback().await?;
                    outcomes.push(Err(e));
                }
            }
        }
        tx.commit().await
    }
    .await;
    match result {
        Ok(()) => {
            for (job, outcome) in jobs.into_iter().zip(outcomes) {
                let _ = job.reply.send(outcome);
            }
        }
        Err(e) => {
            tracing::error!(error = %e, size = jobs.len(), "message batch failed");
            for job in jobs {
                let _ = job.reply.send(Err(sqlx::Error::Protocol(format!("batch write failed: {e}"))));
            }
        }
    }
}
