//! Pacing and throttles: each sender sends at its rate (`HUBBUB_WHATSAPP_MPS`, `HUBBUB_SMS_MPS`, a partner's
//! own `mps`), WhatsApp's pair rate holds to each person, a provider's throttle holds the sender back, and
//! repeated outages open a circuit. The budgets are rows in the database (`store::pacing`), shared by every
//! host; the circuits are each host's own.

use std::collections::HashMap;
use std::time::Duration;

use super::{Delivery, Sending};
use crate::clock::Millis;
use crate::names::Channel;
use crate::store::pacing::{self, Reserved};

/// How far ahead a message may take a slot and wait for it in place; a later slot is a turn in the line,
/// and the message is put back until then (the delivery worker goes on with other work meanwhile).
pub const HORIZON_MS: i64 = 1_000;

/// Slots are this much further apart than the rate (and the pair rate) says, per thousand, so that the jitter
/// of the network and the scheduler does not put more than the rate into a second at the provider.
const MARGIN_PER_MILLE: i64 = 20;

/// How long a throttled sender is held back when the provider did not say (`Retry-After`).
pub const THROTTLE_HOLD_MS: i64 = 1_000;

/// Failures in a row (a provider down, not refusing) that open a sender's circuit, and how long it stays open.
const CIRCUIT_FAILURES: u32 = 5;
const CIRCUIT_OPEN_MS: Millis = 10_000;

/// What pacing says before a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Send now (its slot came).
    Go,
    /// Not before `until`: the message's turn at the sender (or for its person) comes then.
    Later { until: Millis },
}

/// The budget (and circuit) key of a sender: channel, account and address (the host's own account is empty).
pub fn key_of(channel: Channel, account: &str, address: &str) -> String {
    format!("{}:{account}:{address}", channel.as_str())
}

/// The key of the sender a message goes from.
pub fn sender_key(channel: Channel, sending: &Sending) -> String {
    key_of(channel, &sending.account, &sending.sender)
}

/// Microseconds between two slots at `mps` messages a second, with the margin.
fn interval_us(mps: u32) -> i64 {
    1_000_000 * (1000 + MARGIN_PER_MILLE) / (1000 * i64::from(mps.max(1)))
}

/// Waits for a slot to send from `sending` to `phone` on `channel` (the sender's rate, and on WhatsApp the
/// pair rate to that person), when one is near; else says when the message's turn comes. `urgent` (codes,
/// chat) always takes the next slot and waits for it here. Providers that are not paced (the development
/// sink) go at once.
pub async fn before_send(
    delivery: &Delivery,
    sending: &Sending,
    channel: Channel,
    phone: &str,
    urgent: bool,
) -> Result<Pace, sqlx::Error> {
    if !sending.provider.paced() {
        return Ok(Pace::Go);
    }
    let horizon_us = HORIZON_MS * 1000;
    let pair_ms = delivery.config.whatsapp_pair_interval_ms as i64;
    let mut slot_us = delivery.now() * 1000;
    if channel == Channel::Whatsapp && pair_ms > 0 {
        let key = format!("pair:{}:{}:{phone}", sending.account, sending.sender);
        let now_us = delivery.now() * 1000;
        let interval_us = pair_ms * (1000 + MARGIN_PER_MILLE);
        match pacing::reserve(&delivery.db, &key, interval_us, now_us, horizon_us, urgent).await? {
            Reserved::Slot(at) => slot_us = slot_us.max(at),
            Reserved::Turn(at) => return Ok(Pace::Later { until: (at - horizon_us) / 1000 }),
        }
    }
    let key = sender_key(channel, sending);
    let now_us = delivery.now() * 1000;
    match pacing::reserve(&delivery.db, &key, interval_us(sending.mps), now_us, horizon_us, urgent).await? {
        Reserved::Slot(at) => slot_us = slot_us.max(at),
        Reserved::Turn(at) => return Ok(Pace::Later { until: (at - horizon_us) / 1000 }),
    }
    let wait_us = slot_us - delivery.now() * 1000;
    if wait_us > 0 {
        tokio::time::sleep(Duration::from_micros(wait_us as u64)).await;
    }
    Ok(Pace::Go)
}

/// The provider throttled `sending`: nobody sends from it before `retry_after_ms` (else a second) is over.
/// Answers when that is.
pub async fn throttled(
    delivery: &Delivery,
    sending: &Sending,
    channel: Channel,
    retry_after_ms: Option<u64>,
) -> Result<Millis, sqlx::Error> {
    let hold = retry_after_ms.map_or(THROTTLE_HOLD_MS, |ms| ms as i64).max(THROTTLE_HOLD_MS / 10);
    let until = delivery.now() + hold;
    pacing::hold_off(&delivery.db, &sender_key(channel, sending), until * 1000).await?;
    metrics::counter!("hubbub_provider_throttled_total", "channel" => channel.as_str()).increment(1);
    Ok(until)
}

/// The circuits of this host's senders: failures in a row, and until when each is open.
#[derive(Default)]
pub struct Circuits(std::sync::Mutex<HashMap<String, (u32, Millis)>>);

/// A circuit as the metrics and the console show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CircuitState {
    /// `channel:account:address` (the host's own account is empty).
    pub sender: String,
    pub failures: u32,
    /// Until when no message is tried on it (`null`: closed).
    pub open_until: Option<Millis>,
}

impl Circuits {
    /// Whether `key`'s circuit is open at `now` (its provider is not tried).
    pub fn is_open(&self, key: &str, now: Millis) -> bool {
        self.0.lock().expect("not poisoned").get(key).is_some_and(|(_, until)| *until > now)
    }

    /// A try on `key` reached the provider and was answered (sent, refused or throttled): its circuit closes.
    pub fn answered(&self, key: &str) {
        let mut circuits = self.0.lock().expect("not poisoned");
        if circuits.remove(key).is_some_and(|(_, until)| until > 0) {
            metrics::gauge!("hubbub_provider_circuits_open").decrement(1.0);
        }
    }

    /// A try on `key` found its provider down: after [`CIRCUIT_FAILURES`] in a row its circuit opens.
    pub fn failed(&self, key: &str, now: Millis) {
        let mut circuits = self.0.lock().expect("not poisoned");
        let (failures, until) = circuits.entry(key.to_string()).or_insert((0, 0));
        *failures += 1;
        if *failures >= CIRCUIT_FAILURES && *until <= now {
            if *until == 0 {
                metrics::gauge!("hubbub_provider_circuits_open").increment(1.0);
            }
            *until = now + CIRCUIT_OPEN_MS;
            tracing::warn!(sender = key, failures = *failures, "provider down: circuit open");
        }
    }

    /// Every sender with failures, as the console shows them.
    pub fn states(&self, now: Millis) -> Vec<CircuitState> {
        let circuits = self.0.lock().expect("not poisoned");
        let mut states: Vec<CircuitState> = circuits
            .iter()
            .map(|(sender, (failures, until))| CircuitState {
                sender: sender.clone(),
                failures: *failures,
                open_until: (*until > now).then_some(*until),
            })
            .collect();
        states.sort_by(|a, b| a.sender.cmp(&b.sender));
        states
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_a_little_further_apart_than_the_rate() {
        assert_eq!(interval_us(80), 12_750);
        assert_eq!(interval_us(1), 1_020_000);
        assert_eq!(interval_us(0), 1_020_000);
    }

    #[test]
    fn a_circuit_opens_after_five_failures_in_a_row_and_closes_when_answered() {
        let circuits = Circuits::default();
        for _ in 0..4 {
            circuits.failed("whatsapp::1", 1_000);
        }
        assert!(!circuits.is_open("whatsapp::1", 1_000));
        circuits.failed("whatsapp::1", 1_000);
        assert!(circuits.is_open("whatsapp::1", 1_000));
        assert!(circuits.is_open("whatsapp::1", 1_000 + CIRCUIT_OPEN_MS - 1));
        assert!(!circuits.is_open("whatsapp::1", 1_000 + CIRCUIT_OPEN_MS));
        assert!(!circuits.is_open("sms::1", 1_000));
        circuits.answered("whatsapp::1");
        assert!(!circuits.is_open("whatsapp::1", 1_000));
        assert!(circuits.states(1_000).is_empty());
    }
}
