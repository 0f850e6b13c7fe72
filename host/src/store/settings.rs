//! Service-wide settings kept in the database (e.g. the generated JWT secret, sealed at rest).

use super::Db;
use super::sealing::to_sqlx;

/// The secret setting `name`, inserting `make()` (sealed) first if there is none. Safe when several
/// processes race: the first insert wins and everybody reads the winner.
pub async fn get_or_insert_secret(db: &Db, name: &str, make: impl FnOnce() -> String) -> Result<String, sqlx::Error> {
    const CONTEXT: &str = "settings.value";
    sqlx::query("INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
        .bind(name)
        .bind(db.keyring().seal(CONTEXT, &make()))
        .execute(db.writer())
        .await?;
    let stored: String =
        sqlx::query_scalar("SELECT value FROM settings WHERE name = $1").bind(name).fetch_one(db.writer()).await?;
    db.keyring().open(CONTEXT, &stored).map_err(to_sqlx)
}
