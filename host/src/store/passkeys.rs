//! Members' passkeys (`member_passkeys`: each credential as the WebAuthn library keeps it, JSON, found by
//! its credential id) and the ceremonies between their two requests (`passkey_ceremonies`: the library's
//! state under the digest of the token the browser holds, taken once, until it expires).

use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Db, is_unique_violation};
use crate::clock::Millis;

/// A member's passkey as stored.
#[derive(Debug, Clone)]
pub struct StoredPasskey {
    pub id: i64,
    pub member_id: i64,
    pub name: String,
    /// The credential id, base64url.
    pub credential_id: String,
    /// The credential (public key, counter, flags) as the WebAuthn library serialises it.
    pub passkey: String,
    pub created_at: Millis,
    pub last_used_at: Option<Millis>,
}

const COLUMNS: &str = "id, member_id, name, credential_id, passkey, created_at, last_used_at";

fn from_row(row: &AnyRow) -> Result<StoredPasskey, sqlx::Error> {
    Ok(StoredPasskey {
        id: row.try_get("id")?,
        member_id: row.try_get("member_id")?,
        name: row.try_get("name")?,
        credential_id: row.try_get("credential_id")?,
        passkey: row.try_get("passkey")?,
        created_at: row.try_get("created_at")?,
        last_used_at: row.try_get("last_used_at")?,
    })
}

/// Keeps a new passkey of `member_id`; `None` when its credential id is already registered (to anyone).
pub async fn add(
    db: &Db,
    member_id: i64,
    name: &str,
    credential_id: &str,
    passkey: &str,
    now: Millis,
) -> Result<Option<StoredPasskey>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "INSERT INTO member_passkeys (member_id, name, credential_id, passkey, created_at) \
         VALUES ($1, $2, $3, $4, $5) RETURNING ",
        COLUMNS
    );
    let added = sqlx::query(sql)
        .bind(member_id)
        .bind(name)
        .bind(credential_id)
        .bind(passkey)
        .bind(now)
        .fetch_one(db.writer())
        .await;
    match added {
        Ok(row) => from_row(&row).map(Some),
        Err(e) if is_unique_violation(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The passkeys of `member_id`, oldest first.
pub async fn of_member(db: &Db, member_id: i64) -> Result<Vec<StoredPasskey>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM member_passkeys WHERE member_id = $1 ORDER BY id");
    let rows = sqlx::query(sql).bind(member_id).fetch_all(db.reader()).await?;
    rows.iter().map(from_row).collect()
}

/// A passkey by its credential id (base64url), whoever's.
pub async fn by_credential(db: &Db, credential_id: &str) -> Result<Option<StoredPasskey>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM member_passkeys WHERE credential_id = $1");
    sqlx::query(sql).bind(credential_id).fetch_optional(db.reader()).await?.as_ref().map(from_row).transpose()
}

/// Removes a passkey of `member_id`; false when the member has none with that id.
pub async fn remove(db: &Db, member_id: i64, id: i64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM member_passkeys WHERE member_id = $1 AND id = $2")
        .bind(member_id)
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Records a sign-in with a passkey: when, and its credential as it is now (the counter moves on).
pub async fn used(db: &Db, id: i64, passkey: Option<&str>, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE member_passkeys SET last_used_at = $1, passkey = COALESCE($2, passkey) WHERE id = $3")
        .bind(now)
        .bind(passkey)
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Which ceremony a token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ceremony {
    Register,
    SignIn,
}

impl Ceremony {
    fn as_str(self) -> &'static str {
        match self {
            Ceremony::Register => "register",
            Ceremony::SignIn => "sign_in",
        }
    }
}

/// Keeps a ceremony's state until `expires_at` (and drops the ceremonies that expired unanswered).
pub async fn begin(
    db: &Db,
    token_hash: &str,
    kind: Ceremony,
    member_id: Option<i64>,
    state: &str,
    now: Millis,
    expires_at: Millis,
) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query("DELETE FROM passkey_ceremonies WHERE expires_at <= $1").bind(now).execute(&mut *tx).await?;
    sqlx::query(
        "INSERT INTO passkey_ceremonies (token_hash, kind, member_id, state, expires_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(token_hash)
    .bind(kind.as_str())
    .bind(member_id)
    .bind(state)
    .bind(expires_at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// Takes a ceremony of `kind` by its token's digest, once: the member who began it (if one did) and its
/// state, or `None` when it is unknown, of another kind, already taken or expired.
pub async fn take(
    db: &Db,
    token_hash: &str,
    kind: Ceremony,
    now: Millis,
) -> Result<Option<(Option<i64>, String)>, sqlx::Error> {
    let row = sqlx::query(
        "DELETE FROM passkey_ceremonies WHERE token_hash = $1 AND kind = $2 AND expires_at > $3 RETURNING member_id, state",
    )
    .bind(token_hash)
    .bind(kind.as_str())
    .bind(now)
    .fetch_optional(db.writer())
    .await?;
    row.map(|r| Ok((r.try_get("member_id")?, r.try_get("state")?))).transpose()
}
