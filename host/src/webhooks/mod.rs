//! Outbound webhooks: the dispatcher that delivers the transactional outbox (at least once, in order per
//! ordering key, retried with backoff and jitter, then `dead`), the signed request every event and test
//! ping goes out as, and the rule for where requests may go (HTTPS to public addresses; `localhost` in
//! dev mode).

pub mod endpoints;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::clock::{Millis, SharedClock};
use crate::config::Config;
use crate::names::DeliveryState;
use crate::store::Db;
use crate::store::leases::{Held, Leased};
use crate::store::outbox::{self, Attempt, AttemptRecorder, OutboxEvent, Target};
use crate::validate::check_public_url;

/// What sending webhooks works with: the database (endpoints, the outbox), the clock, the settings, and
/// the outbound client (no redirects, no proxies, public addresses only outside dev mode). The dispatcher
/// and the test pings get this, never the whole state.
#[derive(Clone)]
pub struct Webhooks {
    pub db: Db,
    pub clock: SharedClock,
    pub config: Arc<Config>,
    http: reqwest::Client,
}

impl Webhooks {
    pub fn new(db: Db, clock: SharedClock, config: Arc<Config>) -> Webhooks {
        let http = crate::providers::outbound_client(&config, config.webhook_timeout_ms, "Hubbub-Webhooks/1");
        Webhooks { db, clock, config, http }
    }

    pub fn now(&self) -> Millis {
        self.clock.now_ms()
    }
}

/// Where a target's events go.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: String,
    pub secret: String,
    /// Set for bot events: adds `X-Service-Bot` and `X-Service-Bot-Secret`, and the `sha256=` form.
    pub bot_code: Option<String>,
}

/// What one request achieved.
#[derive(Debug, Clone)]
pub struct SendOutcome {
    pub status: Option<u16>,
    pub error: Option<String>,
}

impl SendOutcome {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
}

/// The endpoint of a target, if it has configured one.
pub async fn endpoint(webhooks: &Webhooks, target: Target) -> Result<Option<Endpoint>, sqlx::Error> {
    Ok(match target {
        Target::Partner(id) => {
            let partner = crate::store::partners::find_by_id(&webhooks.db, id).await?;
            let secret = crate::store::partners::webhook_secret(&webhooks.db, id).await?;
            match (partner.and_then(|p| p.webhook_url), secret) {
                (Some(url), Some(secret)) => Some(Endpoint { url, secret, bot_code: None }),
                _ => None,
            }
        }
        Target::Bot(id) => crate::store::bots::webhook_endpoint(&webhooks.db, id)
            .await?
            .map(|(url, secret, code)| Endpoint { url, secret, bot_code: Some(code) }),
        Target::Developer(id) => {
            let developer = crate::store::developers::find_by_id(&webhooks.db, id).await?;
            let secret = crate::store::developers::webhook_secret(&webhooks.db, id).await?;
            match (developer.and_then(|d| d.webhook_url), secret) {
                (Some(url), Some(secret)) => Some(Endpoint { url, secret, bot_code: None }),
                _ => None,
            }
        }
    })
}

/// Sends one signed event. Any non-2xx status, a timeout or a refused address is a failure.
pub async fn send_signed(
    webhooks: &Webhooks,
    endpoint: &Endpoint,
    delivery_id: &str,
    event: &str,
    body: &str,
) -> SendOutcome {
    if let Err(why) = check_public_url(&endpoint.url, webhooks.config.dev) {
        return SendOutcome { status: None, error: Some(format!("webhook_url {why}")) };
    }
    let timestamp = webhooks.now() / 1000;
    let signature = crate::signing::service_signature(&endpoint.secret, body.as_bytes());
    let mut request = webhooks
        .http
        .post(&endpoint.url)
        .header("content-type", "application/json")
        .header("x-service-event", event)
        .header("x-service-delivery", delivery_id)
        .header("webhook-id", delivery_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header(
            "webhook-signature",
            crate::signing::standard_signature(&endpoint.secret, delivery_id, timestamp, body.as_bytes()),
        );
    request = match &endpoint.bot_code {
        Some(code) => request
            .header("x-service-signature", format!("sha256={signature}"))
            .header("x-service-bot", code.as_str())
            .header("x-service-bot-secret", endpoint.secret.as_str()),
        None => request.header("x-service-signature", signature),
    };
    match request.body(body.to_string()).send().await {
        Ok(response) if response.status().is_success() => {
            SendOutcome { status: Some(response.status().as_u16()), error: None }
        }
        Ok(response) => {
            let status = response.status().as_u16();
            SendOutcome { status: Some(status), error: Some(format!("HTTP {status}")) }
        }
        Err(e) if e.is_timeout() => SendOutcome { status: None, error: Some("timed out".into()) },
        Err(e) if e.is_connect() => SendOutcome {
            status: None,
            error: Some(format!("could not connect: {}", crate::providers::root_cause(&e))),
        },
        Err(e) => SendOutcome { status: None, error: Some(crate::providers::root_cause(&e)) },
    }
}

/// When attempt number `attempts` (1-based, just made) failed: the next try, or `None` for dead.
fn next_try(backoff_s: &[u64], attempts: i64, now: i64) -> Option<i64> {
    let gap = *backoff_s.get(usize::try_from(attempts - 1).ok()?)?;
    let jitter = rand::rng().random_range(0.8..=1.2);
    Some(now + (gap as f64 * 1000.0 * jitter) as i64)
}

/// Per-endpoint limits on requests in flight.
#[derive(Default)]
struct Limits(Mutex<HashMap<Target, Arc<Semaphore>>>);

/// How often a partner's console is told that its deliveries moved: at most once a second a partner on this
/// host (the console fetches its log at most once a second anyway), so a busy endpoint costs the log one row
/// a second, not one a batch of attempts.
const ANNOUNCE_EVERY_MS: Millis = 1_000;

/// Which partners' consoles to tell now, and which are owed a word once their second is up (attempts came
/// meanwhile): [`run_dispatcher`] writes those.
#[derive(Default)]
struct Announcer(Mutex<HashMap<i64, (Millis, bool)>>);

impl Announcer {
    /// Whether this attempt of `partner`'s tells its console (else the word is owed).
    fn take(&self, partner: i64, now: Millis) -> bool {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (last, owed) = all.entry(partner).or_insert((Millis::MIN, false));
        if now.saturating_sub(*last) >= ANNOUNCE_EVERY_MS {
            (*last, *owed) = (now, false);
            true
        } else {
            *owed = true;
            false
        }
    }

    /// The partners owed a word whose second is up, taken.
    fn owed(&self, now: Millis) -> Vec<i64> {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|_, (last, owed)| *owed || now.saturating_sub(*last) < 60_000);
        let mut due = Vec::new();
        for (partner, (last, owed)) in all.iter_mut() {
            if *owed && now.saturating_sub(*last) >= ANNOUNCE_EVERY_MS {
                (*last, *owed) = (now, false);
                due.push(*partner);
            }
        }
        due
    }
}

impl Limits {
    fn permit(&self, target: Target, per_endpoint: usize) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let semaphore = self
            .0
            .lock()
            .expect("not poisoned")
            .entry(target)
            .or_insert_with(|| Arc::new(Semaphore::new(per_endpoint)))
            .clone();
        semaphore.try_acquire_owned().ok()
    }
}

const CLAIM_BATCH: i64 = 64;
const MAX_IN_FLIGHT: usize = 512;

/// Delivers due outbox events until `stop`; then waits for the requests in flight.
pub async fn run_dispatcher(webhooks: Webhooks, stop: CancellationToken) {
    let poll = Duration::from_millis(webhooks.config.webhook_poll_ms.max(5));
    // Short, and renewed while a request is in flight: a dead host's events are taken over within it.
    let lease_ms = webhooks.config.lease_ms.max(100) as i64;
    let held = Held::new(Leased::OutboxEvents);
    held.keep_alive(webhooks.db.clone(), webhooks.clock.clone(), lease_ms, stop.clone());
    let limits = Limits::default();
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let recorder = AttemptRecorder::spawn(webhooks.db.clone());
    let announcer = Arc::new(Announcer::default());
    let mut running = tokio::task::JoinSet::new();
    loop {
        while running.try_join_next().is_some() {}
        let owed = announcer.owed(webhooks.now());
        if !owed.is_empty()
            && let Err(e) = outbox::announce(&webhooks.db, &owed, webhooks.now()).await
        {
            tracing::warn!(error = %e, "telling consoles of their webhook deliveries failed");
        }
        // Claim only what can be sent now: never more than the free slots.
        let capacity = (in_flight.available_permits() as i64).min(CLAIM_BATCH);
        if capacity == 0 {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = running.join_next() => continue,
            }
        }
        let claimed = match outbox::claim_due(&webhooks.db, webhooks.now(), lease_ms, capacity).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(error = %e, "claiming webhook events failed");
                Vec::new()
            }
        };
        let full = claimed.len() as i64 == capacity;
        // Each target's endpoint is looked up once per batch.
        let mut endpoints: HashMap<Target, Result<Option<Endpoint>, String>> = HashMap::new();
        for event in &claimed {
            if let std::collections::hash_map::Entry::Vacant(slot) = endpoints.entry(event.target) {
                slot.insert(endpoint(&webhooks, event.target).await.map_err(|e| e.to_string()));
            }
        }
        let mut busy = Vec::new();
        let mut started = 0;
        for event in claimed {
            let Some(endpoint_permit) = limits.permit(event.target, webhooks.config.webhook_concurrency.max(1)) else {
                // That endpoint has its limit in flight; a later pass takes this event.
                busy.push(event.id);
                continue;
            };
            let Ok(slot) = in_flight.clone().acquire_owned().await else { break };
            let (webhooks, recorder, held, announcer) =
                (webhooks.clone(), recorder.clone(), held.clone(), announcer.clone());
            let target = endpoints.get(&event.target).cloned().unwrap_or(Ok(None));
            started += 1;
            held.hold([event.id]);
            running.spawn(async move {
                let id = event.id;
                deliver(&webhooks, &recorder, &announcer, event, target).await;
                held.release(id);
                drop((endpoint_permit, slot));
            });
        }
        if !busy.is_empty()
            && let Err(e) = outbox::release(&webhooks.db, &busy).await
        {
            tracing::warn!(error = %e, "releasing webhook events failed; their lease runs out instead");
        }
        if full && started > 0 {
            tokio::task::yield_now().await;
            continue;
        }
        // Nothing more to start now: wait for a request to finish, new events, or stop.
        tokio::select! {
            _ = stop.cancelled() => break,
            Some(_) = running.join_next(), if started == 0 && !running.is_empty() => {}
            _ = tokio::time::sleep(poll) => {}
        }
    }
    while running.join_next().await.is_some() {}
}

async fn deliver(
    webhooks: &Webhooks,
    recorder: &AttemptRecorder,
    announcer: &Announcer,
    event: OutboxEvent,
    target: Result<Option<Endpoint>, String>,
) {
    let outcome = match target {
        Ok(Some(endpoint)) => send_signed(webhooks, &endpoint, &event.delivery_id, &event.event, &event.payload).await,
        Ok(None) => SendOutcome { status: None, error: Some(crate::store::outbox::NO_URL.into()) },
        Err(e) => {
            tracing::warn!(error = %e, "webhook endpoint lookup failed; the lease will run out and it is retried");
            return;
        }
    };
    let now = webhooks.now();
    let attempts = event.attempts + 1;
    let (next_state, next_at) = if outcome.ok() {
        (DeliveryState::Succeeded, now)
    } else if outcome.error.as_deref() == Some(outbox::NO_URL) {
        (DeliveryState::Dead, now)
    } else {
        match next_try(&webhooks.config.webhook_backoff_s, attempts, now) {
            Some(at) => (DeliveryState::Pending, at),
            None => (DeliveryState::Dead, now),
        }
    };
    metrics::counter!("hubbub_webhook_attempts_total", "outcome" => next_state.as_str()).increment(1);
    tracing::info!(delivery_id = %event.delivery_id, event = %event.event, state = next_state.as_str(), status = outcome.status, error = outcome.error.as_deref(), attempts, "webhook attempt");
    let attempt = Attempt {
        id: event.id,
        announce_to: match event.target {
            Target::Partner(id) if announcer.take(id, now) => Some(id),
            Target::Partner(_) | Target::Developer(_) | Target::Bot(_) => None,
        },
        state: next_state,
        status: outcome.status,
        error: outcome.error,
        next_attempt_at: next_at,
        now,
    };
    if let Err(e) = recorder.record(attempt).await {
        tracing::warn!(error = %e, "recording a webhook attempt failed; it will be sent again");
    }
}

#[cfg(test)]
mod tests {
    use super::{Announcer, next_try};

    #[test]
    fn a_partners_console_is_told_at_most_once_a_second_and_never_left_without_the_last_word() {
        let told = Announcer::default();
        assert!(told.take(7, 10_000), "the first attempt tells at once");
        assert!(!told.take(7, 10_400), "within the second: owed");
        assert!(told.take(8, 10_400), "another partner has its own second");
        assert_eq!(told.owed(10_900), Vec::<i64>::new(), "not before the second is up");
        assert_eq!(told.owed(11_000), vec![7], "then the owed word goes");
        assert_eq!(told.owed(12_500), Vec::<i64>::new(), "once");
        assert!(told.take(7, 12_500));
        // Partners quiet for a minute are forgotten.
        told.owed(80_000);
        assert!(told.0.lock().unwrap().is_empty());
    }

    #[test]
    fn backoff_has_n_gaps_then_dead_with_jitter() {
        let schedule = [5, 30];
        for _ in 0..100 {
            let first = next_try(&schedule, 1, 0).unwrap();
            assert!((4_000..=6_000).contains(&first), "{first}");
            let second = next_try(&schedule, 2, 0).unwrap();
            assert!((24_000..=36_000).contains(&second), "{second}");
        }
        assert_eq!(next_try(&schedule, 3, 0), None);
        assert_eq!(next_try(&[], 1, 0), None);
    }
}
