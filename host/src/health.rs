//! Whether this host is alive and ready: the background workers report themselves running here (a flag that
//! drops when a worker ends, panics included), and readiness also asks both database pools and the migrations.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The workers this host started and whether each still runs.
#[derive(Default)]
pub struct WorkerHealth {
    workers: Mutex<Vec<(&'static str, Arc<AtomicBool>)>>,
}

/// Held by a running worker; marks it stopped when dropped (on return or while unwinding from a panic).
pub struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl WorkerHealth {
    /// Registers a worker as running; keep the guard for as long as it runs.
    pub fn start(&self, name: &'static str) -> Running {
        let flag = Arc::new(AtomicBool::new(true));
        self.workers.lock().expect("not poisoned").push((name, flag.clone()));
        Running(flag)
    }

    /// The workers that were started and no longer run.
    pub fn stopped(&self) -> Vec<&'static str> {
        let workers = self.workers.lock().expect("not poisoned");
        workers.iter().filter(|(_, running)| !running.load(Ordering::SeqCst)).map(|(name, _)| *name).collect()
    }

    /// How many workers were started.
    pub fn started(&self) -> usize {
        self.workers.lock().expect("not poisoned").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_that_ends_or_panics_is_reported_stopped() {
        let health = Arc::new(WorkerHealth::default());
        let kept = health.start("delivery");
        drop(health.start("webhooks"));
        let panicking = health.clone();
        let _ = std::thread::spawn(move || {
            let _running = panicking.start("broadcasts");
            panic!("worker bug");
        })
        .join();
        assert_eq!(health.started(), 3);
        assert_eq!(health.stopped(), vec!["webhooks", "broadcasts"]);
        drop(kept);
        assert_eq!(health.stopped().len(), 3);
    }
}
