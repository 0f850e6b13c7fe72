//! Partners' bots.

use sqlx::Row;

use super::Db;

/// A bot as the app lists it.
#[derive(Debug, Clone)]
pub struct BotListing {
    pub code: String,
    pub name: String,
    pub partner_code: String,
    pub partner_name: String,
}

/// The bots of the partners `phone` is linked to.
pub async fn list_for_user(db: &Db, phone: &str) -> Result<Vec<BotListing>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT b.code, b.name, p.code AS partner_code, p.name AS partner_name FROM bots b \
         JOIN partners p ON p.id = b.partner_id JOIN account_links l ON l.partner_id = b.partner_id \
         JOIN accounts a ON a.id = l.account_id WHERE a.phone = $1 ORDER BY p.code, b.code",
    )
    .bind(phone)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            Ok(BotListing {
                code: r.try_get("code")?,
                name: r.try_get("name")?,
                partner_code: r.try_get("partner_code")?,
                partner_name: r.try_get("partner_name")?,
            })
        })
        .collect()
}

/// A bot's webhook URL, secret and code, when it has a URL.
pub async fn webhook_endpoint(db: &Db, bot_id: i64) -> Result<Option<(String, String, String)>, sqlx::Error> {
    let row = sqlx::query("SELECT webhook_url, webhook_secret, code FROM bots WHERE id = $1")
        .bind(bot_id)
        .fetch_optional(db.reader())
        .await?;
    Ok(row.and_then(|r| {
        let url: Option<String> = r.try_get("webhook_url").ok()?;
        Some((url?, r.try_get("webhook_secret").ok()?, r.try_get("code").ok()?))
    }))
}
