//! Rollups: a partner's figures kept as things happen, hour by hour, so that `GET /api/v1/analytics/…` reads
//! them and never scans messages or conversations. [`conversations`]: bumped in the transaction of each change
//! (a few a conversation). [`messages`]: each change writes a delta row in its own transaction (an insert,
//! which no other sender waits for), and the rollup worker folds the deltas into the rollups.

pub mod conversations;
pub mod messages;

use crate::clock::Millis;

/// An hour, in milliseconds.
pub const HOUR_MS: Millis = 3_600_000;
/// A day, in milliseconds.
pub const DAY_MS: Millis = 24 * HOUR_MS;
