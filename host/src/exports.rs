//! A person's export of their data (`/me/export`, docs/data.md): a zip prepared in the background with one
//! JSON file per kind of record about them (every partner's messages with their history and attempts,
//! conversations, bot sessions, payments, their account, links, preferences, devices, opt-outs) and the
//! files of their messages; downloaded for 24 hours from a link the host signs. Each linked partner's audit
//! log records it.

use std::io::Write;

use crate::clock::{Millis, SharedClock, iso_time};
use crate::store::Db;
use crate::store::exports as stored;
pub use crate::store::exports::PersonExport;

/// How long a ready export can be downloaded.
pub const GOOD_FOR_MS: i64 = 24 * 60 * 60 * 1000;

/// An export still `preparing` after this long was left by a host that stopped: it is forgotten, and a new
/// request starts another.
pub const STALE_MS: i64 = 30 * 60 * 1000;

/// Starts an export of `phone`'s data, or answers the one already being prepared; each linked partner's
/// audit log records the request (`account.exported`, from `address`). The archive is prepared in the
/// background (`prepare`).
pub async fn start(db: &Db, clock: &SharedClock, phone: &str, address: &str) -> Result<PersonExport, sqlx::Error> {
    let now = clock.now_ms();
    if let Some(under_way) = stored::preparing(db, phone, now - STALE_MS).await? {
        return Ok(under_way);
    }
    let id = format!("exp_{}", crate::secrets::random_alnum(24));
    stored::create(db, &id, phone, now).await?;
    let linked = crate::store::erasure::linked_partners(db, phone).await?;
    let mut tx = db.begin().await?;
    for (partner_id, _) in linked {
        let entry = crate::store::members::AuditWrite {
            partner_id,
            member_id: None,
            key_id: None,
            action: "account.exported".into(),
            target: "/api/v1/me/export".into(),
            status: 202,
            address: address.to_string(),
            at: now,
        };
        crate::store::members::audit_in(&mut tx, &entry).await?;
    }
    tx.commit().await?;
    let (db2, clock2, id2, phone2) = (db.clone(), clock.clone(), id.clone(), phone.to_string());
    tokio::spawn(async move { prepare(&db2, &clock2, &id2, &phone2).await });
    Ok(stored::find(db, phone, &id).await?.expect("just written"))
}

/// Prepares export `id`: gathers the records and files, zips them, and marks it `ready` (or `failed`,
/// logged, when the database fails it).
pub async fn prepare(db: &Db, clock: &SharedClock, id: &str, phone: &str) {
    let built = async {
        let records = stored::records_of(db, phone).await?;
        let files = stored::files_of(db, phone).await?;
        let exported_at = iso_time(clock.now_ms());
        let archive = tokio::task::spawn_blocking(move || zip_of(&exported_at, &records, &files))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok::<_, anyhow::Error>(archive?)
    };
    let now = || clock.now_ms();
    let outcome = match built.await {
        Ok(archive) => stored::ready(db, id, &archive, now(), now() + GOOD_FOR_MS).await,
        Err(error) => {
            tracing::warn!(export = id, %error, "preparing a person's export failed");
            stored::failed(db, id, "the export could not be prepared: ask for another", now()).await
        }
    };
    if let Err(error) = outcome {
        tracing::warn!(export = id, %error, "recording a person's export failed; it lapses as stale");
    }
}

/// The archive: `README.txt`, one `{kind}.json` per kind of record (an array of objects, one per record,
/// its columns as they are stored), and `media/{id}-{filename}` per file.
fn zip_of(
    exported_at: &str,
    records: &[(&'static str, Vec<serde_json::Map<String, serde_json::Value>>)],
    files: &[(String, Option<String>, Vec<u8>)],
) -> std::io::Result<Vec<u8>> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let deflated = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let stored_as_is = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file("README.txt", deflated)?;
    writeln!(
        zip,
        "Your data, exported {exported_at}.\n\nEach .json file holds one kind of record about you, as the service \
         stores it: an array of objects, one per record. Times are milliseconds since 1970-01-01 UTC. Messages \
         sent end-to-end encrypted are as the service holds them: ciphertext only your devices can read.\n\n\
         media/ holds the files of your messages."
    )?;
    for (kind, rows) in records {
        zip.start_file(format!("{kind}.json"), deflated)?;
        serde_json::to_writer_pretty(&mut zip, rows)?;
    }
    for (id, filename, bytes) in files {
        let name = filename.as_deref().map(safe_name).unwrap_or_default();
        let path = if name.is_empty() { format!("media/{id}") } else { format!("media/{id}-{name}") };
        zip.start_file(path, stored_as_is)?;
        zip.write_all(bytes)?;
    }
    Ok(zip.finish()?.into_inner())
}

/// A file name safe inside the archive: its last path part, of letters, digits, `.`, `-` and `_`.
fn safe_name(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
    last.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' }).collect()
}

/// `phone`'s export `id`, if theirs.
pub async fn find(db: &Db, phone: &str, id: &str) -> Result<Option<PersonExport>, sqlx::Error> {
    stored::find(db, phone, id).await
}

/// The signature of export `id`'s download link, made with the host's `key`.
pub fn download_signature(key: &[u8], id: &str) -> String {
    crate::signing::link_signature(key, &format!("export:{id}"))
}

/// Export `id`'s archive, when `signature` is its link's and it is still good.
pub async fn download(
    db: &Db,
    key: &[u8],
    id: &str,
    signature: &str,
    now: Millis,
) -> Result<Option<Vec<u8>>, sqlx::Error> {
    if !crate::signing::verify_link_signature(key, &format!("export:{id}"), signature) {
        return Ok(None);
    }
    stored::archive(db, id, now).await
}

/// Forgets exports past their 24 hours, and those their host left preparing.
pub async fn forget_expired(db: &Db, now: Millis) -> Result<u64, sqlx::Error> {
    stored::forget_expired(db, now, now - STALE_MS).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_stay_inside_the_archive() {
        assert_eq!(safe_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_name("C:\\x\\report 1.pdf"), "report_1.pdf");
        assert_eq!(safe_name("invoice.pdf"), "invoice.pdf");
    }
}
