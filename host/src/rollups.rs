//! The rollup worker: every second, the deltas that messages' changes wrote (`store::rollups::messages`) are
//! added to the partners' hourly rollups and deleted, so the figures read few rows however busy the hour
//! was. Hosts sharing the database each fold their own deltas.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::Db;
use crate::store::rollups::messages;

/// How often the deltas are folded.
const EVERY: Duration = Duration::from_secs(1);

pub async fn run_worker(db: Db, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(EVERY) => {}
        }
        // A full batch: more are waiting, folded at once.
        loop {
            match messages::fold(&db).await {
                Ok(n) if n >= messages::FOLD_BATCH as usize => continue,
                Ok(_) => break,
                Err(error) => {
                    tracing::warn!(%error, "rollups: the deltas could not be folded; tried again in a second");
                    break;
                }
            }
        }
    }
}
