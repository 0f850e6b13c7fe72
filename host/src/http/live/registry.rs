//! The event streams open on this host (the users' and the consoles'), counted per holder and in all, so
//! neither one holder nor all of them together hold more than their bound: past a bound, a clear 429 or 503.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::http::error::ApiError;

/// The streams open on this host, per user and in all.
pub struct Streams {
    per_user: Mutex<HashMap<String, usize>>,
    total: AtomicUsize,
    max_per_user: usize,
    max_total: usize,
}

/// A stream's place in [`Streams`], given back when the stream ends.
pub struct StreamSlot {
    streams: Arc<Streams>,
    phone: String,
}

impl Streams {
    pub fn new(max_per_user: usize, max_total: usize) -> Arc<Streams> {
        Arc::new(Streams { per_user: Mutex::default(), total: AtomicUsize::new(0), max_per_user, max_total })
    }

    /// Streams open on this host.
    pub fn open_count(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }

    /// A place for a new stream of `phone`, or the error that answers it.
    pub fn open(self: &Arc<Self>, phone: &str) -> Result<StreamSlot, ApiError> {
        let mut per_user = self.per_user.lock().expect("streams poisoned");
        let mine = per_user.get(phone).copied().unwrap_or(0);
        if mine >= self.max_per_user {
            return Err(ApiError::too_many(
                5,
                format!("{mine} event streams are open for this account already (at most {})", self.max_per_user),
            ));
        }
        if self.total.load(Ordering::SeqCst) >= self.max_total {
            return Err(ApiError::unavailable(5, "this host has as many event streams open as it serves; retry"));
        }
        self.total.fetch_add(1, Ordering::SeqCst);
        per_user.insert(phone.to_string(), mine + 1);
        Ok(StreamSlot { streams: self.clone(), phone: phone.to_string() })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut per_user = self.streams.per_user.lock().expect("streams poisoned");
        match per_user.get_mut(&self.phone) {
            Some(n) if *n > 1 => *n -= 1,
            _ => {
                per_user.remove(&self.phone);
            }
        }
        self.streams.total.fetch_sub(1, Ordering::SeqCst);
    }
}
