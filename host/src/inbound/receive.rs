//! Keeping what a webhook brought, in one transaction: each message once by its provider's id, a WhatsApp
//! username (BSUID) paired with its phone for the number that received it, and the 24-hour window opened.

use std::collections::HashMap;

use crate::delivery::Delivery;
use crate::names::Channel;
use crate::store::inbound::{self, NewInbound};
use crate::store::whatsapp;

/// Keeps what a webhook brought, in one transaction: `true` for each message not seen before. A person
/// writing on WhatsApp opens their 24-hour window at once (the answer may be quick).
///
/// A WhatsApp message's business-scoped user id is kept with its phone, for the number that received it;
/// one that came with the id only gets the phone it was last seen with by that number — or none, when it
/// never was (then it reaches no one: see [`route`]).
pub async fn receive(delivery: &Delivery, received: &[NewInbound]) -> Result<usize, sqlx::Error> {
    if received.is_empty() {
        return Ok(0);
    }
    let mut new = 0;
    // The phones this webhook's own messages gave their user ids, by the number that received them (not
    // committed yet, so not read back).
    let mut phones: HashMap<(String, String, String), String> = HashMap::new();
    let mut tx = delivery.db.begin().await?;
    for m in received {
        let mut m = m.clone();
        let (account, sender) = (m.account.clone(), m.sender.clone());
        match (&m.user_id, m.phone.is_empty()) {
            (Some(user_id), false) => {
                whatsapp::remember_user_in(&mut tx, &account, &sender, user_id, &m.phone, m.received_at).await?;
                phones.insert((account, sender, user_id.clone()), m.phone.clone());
            }
            (Some(user_id), true) => {
                m.phone = match phones.get(&(account.clone(), sender.clone(), user_id.clone())) {
                    Some(phone) => phone.clone(),
                    None => {
                        whatsapp::phone_of_user(&delivery.db, &account, &sender, user_id).await?.unwrap_or_default()
                    }
                };
            }
            (None, _) => {}
        }
        if m.channel == Channel::Whatsapp && !m.phone.is_empty() {
            whatsapp::record_inbound_in(&mut tx, &m.account, &m.sender, &m.phone, m.received_at).await?;
        }
        new += usize::from(inbound::record_in(&mut tx, &m).await?);
    }
    tx.commit().await?;
    if new > 0 {
        delivery.inbound_wake.notify_one();
    }
    Ok(new)
}
