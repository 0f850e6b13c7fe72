//! Service-wide settings kept in the database (e.g. the generated JWT secret).

use super::Db;

/// The value of `name`, inserting `make()` first if there is none. Safe when several processes race:
/// the first insert wins and everybody reads the winner.
pub async fn get_or_insert(db: &Db, name: &str, make: impl FnOnce() -> String) -> Result<String, sqlx::Error> {
    sqlx::query("INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
        .bind(name)
        .bind(make())
        .execute(db.writer())
        .await?;
    sqlx::query_scalar("SELECT value FROM settings WHERE name = $1").bind(name).fetch_one(db.writer()).await
}
