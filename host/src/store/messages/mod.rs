//! Hub messages: what a message is and its reads ([`rows`]), creation with idempotency ([`create`]), state
//! changes with their history ([`states`]), the partner's lists and a message's attempts ([`lists`]), the
//! user's hub ([`hub`]), what delivery reads ([`delivery`]) and base64 media stored once ([`media`]). The
//! module's API is all of theirs; the user's event log and its tail are `store::user_events`.

pub mod create;
pub mod delivery;
pub mod hub;
pub mod lists;
pub mod media;
pub mod rows;
pub mod states;

pub use create::*;
pub use delivery::*;
pub use hub::*;
pub use lists::*;
pub use media::*;
pub use rows::*;
pub use states::*;

/// A database with a partner and three sent messages (1 and 2 to `+1`, 3 to `+2`), for the store's tests.
#[cfg(test)]
pub(crate) async fn db_with_messages(dir: &std::path::Path) -> crate::store::Db {
    let db = crate::store::Db::sqlite_at(&dir.join("t.db"), 2).await;
    sqlx::query(
        "INSERT INTO partners (id, code, name, key_hash, key_prefix, created_at) VALUES (1, 'p', 'P', 'h', 'k', 0)",
    )
    .execute(db.writer())
    .await
    .unwrap();
    for (id, phone, body) in [(1, "+1", "one"), (2, "+1", "two"), (3, "+2", "three")] {
        sqlx::query(
            "INSERT INTO messages (id, ref, partner_id, phone, direction, content_type, body, priority, content, \
             state, channel, created_at, updated_at) \
             VALUES ($1, $2, 1, $3, 'out', 'text', $4, 'normal', '{}', 'sent', 'inapp', 0, 0)",
        )
        .bind(id)
        .bind(format!("msg_{id}"))
        .bind(phone)
        .bind(body)
        .execute(db.writer())
        .await
        .unwrap();
    }
    db
}
