//! Secrets at rest: the service's generated JWT secret and every webhook secret are kept in the database
//! sealed with AES-256-GCM, so read access to the database (or a backup of it) is not enough to forge user
//! tokens or webhook signatures.
//!
//! A sealed value reads `enc:v1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>`; the associated data is
//! the column it belongs to (`partners.webhook_secret`, …), so a sealed value cannot be moved to another
//! column. The key id is the first 8 hex digits of SHA-256 over a label and the key, so a host can tell which
//! key sealed a value without trying them.
//!
//! The key comes from `HUBBUB_SECRET_KEY` (base64 or hex of 32 bytes), or `HUBBUB_SECRET_KEY_FILE`; when
//! neither is set and the database is SQLite, from `<database file>.key`, generated (mode 0600) on first
//! start. PostgreSQL deployments must set it (every host needs the same key). `hubbub secrets rotate-key`
//! re-seals everything with a new key ([`rotate`]).

use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};
use sqlx::Row;

use super::Db;
use crate::config::Config;

const PREFIX: &str = "enc:v1:";

/// The columns that hold sealed secrets: `(table, key column, secret column, context)`.
const SEALED_COLUMNS: &[(&str, &str, &str, &str)] = &[
    ("settings", "name", "value", "settings.value"),
    ("partners", "id", "webhook_secret", "partners.webhook_secret"),
    ("developers", "id", "webhook_secret", "developers.webhook_secret"),
    ("bots", "id", "webhook_secret", "bots.webhook_secret"),
    ("partner_senders", "id", "token", "partner_senders.token"),
    ("partner_senders", "id", "app_secret", "partner_senders.app_secret"),
];

/// The settings rows that are secrets (other settings stay readable).
const SECRET_SETTINGS: &[&str] = &["jwt_secret", "vapid_private_key"];

/// Why a sealed value could not be opened, or a key not read.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error(
        "a stored secret was sealed with key {0}, which this host does not have (set HUBBUB_SECRET_KEY or HUBBUB_SECRET_KEY_FILE to that key)"
    )]
    UnknownKey(String),
    #[error("a stored secret is damaged or was moved from another column")]
    Damaged,
    #[error("the secret key must be 32 bytes, written as base64 or 64 hex digits")]
    BadKey,
}

/// One AES-256 key and its id.
#[derive(Clone)]
pub struct SecretKey {
    key: [u8; 32],
    id: String,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretKey").field("id", &self.id).finish_non_exhaustive()
    }
}

impl SecretKey {
    fn from_bytes(key: [u8; 32]) -> SecretKey {
        let mut hash = Sha256::new();
        hash.update(b"hubbub secret key id\0");
        hash.update(key);
        let id = crate::secrets::hex(&hash.finalize()[..4]);
        SecretKey { key, id }
    }

    /// A new random key.
    pub fn generate() -> SecretKey {
        SecretKey::from_bytes(crate::secrets::random_bytes::<32>())
    }

    /// Reads a key written as standard or URL-safe base64 (padding optional) or 64 hex digits.
    pub fn parse(text: &str) -> Result<SecretKey, SealError> {
        let text = text.trim();
        let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..32).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16)).collect::<Result<Vec<u8>, _>>().ok()
        } else {
            let unpadded = text.trim_end_matches('=');
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(unpadded)
                .or_else(|_| URL_SAFE_NO_PAD.decode(unpadded))
                .ok()
        };
        let bytes: [u8; 32] = bytes.and_then(|b| b.try_into().ok()).ok_or(SealError::BadKey)?;
        Ok(SecretKey::from_bytes(bytes))
    }

    /// The key as it is written to a key file or the environment (standard base64).
    pub fn encode(&self) -> String {
        STANDARD.encode(self.key)
    }

    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The key that seals, and others that may still open values (a rotation that was interrupted).
#[derive(Clone, Debug)]
pub struct Keyring {
    current: SecretKey,
    others: Vec<SecretKey>,
}

impl Keyring {
    pub fn new(current: SecretKey) -> Keyring {
        Keyring { current, others: Vec::new() }
    }

    pub fn current(&self) -> &SecretKey {
        &self.current
    }

    /// Seals `plaintext` for the column `context`.
    pub fn seal(&self, context: &str, plaintext: &str) -> String {
        let nonce = crate::secrets::random_bytes::<12>();
        let cipher = Aes256Gcm::new(&Key::<Aes256Gcm>::from(self.current.key));
        let sealed = cipher
            .encrypt(&Nonce::from(nonce), Payload { msg: plaintext.as_bytes(), aad: context.as_bytes() })
            .expect("AES-GCM seals any length we store");
        let mut out = Vec::with_capacity(12 + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        format!("{PREFIX}{}:{}", self.current.id, URL_SAFE_NO_PAD.encode(out))
    }

    /// Opens a value of the column `context`. A value without the sealed prefix is returned as it is
    /// (written before sealing existed; [`seal_plaintext_secrets`] seals those at start).
    pub fn open(&self, context: &str, stored: &str) -> Result<String, SealError> {
        let Some(rest) = stored.strip_prefix(PREFIX) else { return Ok(stored.to_string()) };
        let (id, data) = rest.split_once(':').ok_or(SealError::Damaged)?;
        let key = std::iter::once(&self.current)
            .chain(&self.others)
            .find(|k| k.id == id)
            .ok_or_else(|| SealError::UnknownKey(id.to_string()))?;
        let data = URL_SAFE_NO_PAD.decode(data).map_err(|_| SealError::Damaged)?;
        if data.len() < 12 + 16 {
            return Err(SealError::Damaged);
        }
        let (nonce, sealed) = data.split_at(12);
        let nonce: [u8; 12] = nonce.try_into().map_err(|_| SealError::Damaged)?;
        let cipher = Aes256Gcm::new(&Key::<Aes256Gcm>::from(key.key));
        let plain = cipher
            .decrypt(&Nonce::from(nonce), Payload { msg: sealed, aad: context.as_bytes() })
            .map_err(|_| SealError::Damaged)?;
        String::from_utf8(plain).map_err(|_| SealError::Damaged)
    }

    /// Whether a stored value is sealed with the current key.
    fn is_current(&self, stored: &str) -> bool {
        stored.strip_prefix(PREFIX).and_then(|r| r.split_once(':')).is_some_and(|(id, _)| id == self.current.id)
    }
}

/// As a storage error, for the store functions that open secrets.
pub fn to_sqlx(e: SealError) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(e))
}

/// Where the key lives.
#[derive(Debug, Clone)]
pub enum KeySource {
    /// `HUBBUB_SECRET_KEY`.
    Environment,
    /// A key file: `HUBBUB_SECRET_KEY_FILE`, or the one beside the SQLite database.
    File(PathBuf),
    /// An in-memory SQLite database: a key for this process only.
    Ephemeral,
}

/// The key file beside a SQLite database (`sqlite://hubbub.db?mode=rwc` → `hubbub.db.key`), if the URL
/// names a file.
fn default_key_file(database_url: &str) -> Option<PathBuf> {
    let path = database_url.strip_prefix("sqlite://").or_else(|| database_url.strip_prefix("sqlite:"))?;
    let path = path.split('?').next().unwrap_or("");
    (!path.is_empty() && !path.contains(":memory:")).then(|| PathBuf::from(format!("{path}.key")))
}

/// Where this configuration takes its key from.
pub fn key_source(config: &Config) -> anyhow::Result<KeySource> {
    if config.secret_key.as_deref().is_some_and(|k| !k.trim().is_empty()) {
        return Ok(KeySource::Environment);
    }
    if let Some(file) = &config.secret_key_file {
        return Ok(KeySource::File(file.clone()));
    }
    if config.database_url.starts_with("sqlite:") {
        return Ok(default_key_file(&config.database_url).map(KeySource::File).unwrap_or(KeySource::Ephemeral));
    }
    anyhow::bail!(
        "HUBBUB_SECRET_KEY or HUBBUB_SECRET_KEY_FILE must be set with PostgreSQL: every host sharing the database \
         needs the same key (generate one with `openssl rand -base64 32`)"
    )
}

/// Reads a key file.
fn read_key_file(path: &Path) -> anyhow::Result<SecretKey> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    SecretKey::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Writes a key file readable by its owner only, atomically.
pub fn write_key_file(path: &Path, key: &SecretKey) -> anyhow::Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut file = tempfile::Builder::new().prefix(".hubbub-key-").tempfile_in(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.as_file().set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    writeln!(file, "{}", key.encode())?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.error))?;
    Ok(())
}

/// The file a rotation writes the new key to before it re-seals, beside the key file.
fn pending_key_file(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".new");
    PathBuf::from(name)
}

/// The keyring of this configuration, creating the SQLite key file on first start. A rotation's pending
/// key file is offered for opening too (see [`finish_interrupted_rotation`]).
pub fn keyring(config: &Config) -> anyhow::Result<(Keyring, KeySource)> {
    let source = key_source(config)?;
    let current = match &source {
        KeySource::Environment => SecretKey::parse(config.secret_key.as_deref().unwrap_or(""))
            .map_err(|e| anyhow::anyhow!("HUBBUB_SECRET_KEY: {e}"))?,
        KeySource::File(path) if path.exists() => read_key_file(path)?,
        KeySource::File(path) => {
            if config.secret_key_file.is_some() {
                anyhow::bail!("HUBBUB_SECRET_KEY_FILE {} does not exist", path.display());
            }
            let key = SecretKey::generate();
            write_key_file(path, &key)?;
            tracing::info!(path = %path.display(), key_id = key.id(), "generated the secret key for secrets at rest");
            key
        }
        KeySource::Ephemeral => SecretKey::generate(),
    };
    let mut ring = Keyring::new(current);
    if let KeySource::File(path) = &source
        && let Ok(pending) = read_key_file(&pending_key_file(path))
    {
        ring.others.push(pending);
    }
    Ok((ring, source))
}

/// Completes or abandons a rotation that stopped between writing the new key and renaming it over the old:
/// if any secret is sealed with the pending key the re-seal committed, so the pending file becomes the key
/// file; otherwise it is removed.
pub async fn finish_interrupted_rotation(db: &mut Db, source: &KeySource) -> anyhow::Result<()> {
    let KeySource::File(path) = source else { return Ok(()) };
    let pending_path = pending_key_file(path);
    let Some(pending) = db.keys.others.first().cloned() else { return Ok(()) };
    let marker = format!("{PREFIX}{}:%", pending.id);
    let mut committed = false;
    for (table, _, column, _) in SEALED_COLUMNS {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE {column} LIKE $1");
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(&marker).fetch_one(db.reader()).await?;
        committed |= n > 0;
    }
    if committed {
        std::fs::rename(&pending_path, path)?;
        let keys = std::sync::Arc::make_mut(&mut db.keys);
        keys.current = pending;
        keys.others.clear();
        tracing::warn!(key_id = keys.current.id(), "finished an interrupted secret key rotation");
    } else {
        std::fs::remove_file(&pending_path)?;
        std::sync::Arc::make_mut(&mut db.keys).others.clear();
        tracing::warn!("removed the key of a secret key rotation that did not commit");
    }
    Ok(())
}

/// Seals, with the current key, every secret that is stored in the clear (written before sealing
/// existed) or sealed with another key the keyring can open. Runs at start; one transaction.
pub async fn seal_plaintext_secrets(db: &Db) -> Result<u64, sqlx::Error> {
    reseal(db, db.keyring(), db.keyring()).await
}

/// Re-seals every stored secret: opened with `from`, sealed with `to`. Returns how many values changed.
async fn reseal(db: &Db, from: &Keyring, to: &Keyring) -> Result<u64, sqlx::Error> {
    let mut tx = db.begin().await?;
    let mut changed = 0;
    for (table, key, column, context) in SEALED_COLUMNS {
        let sql = format!("SELECT CAST({key} AS TEXT) AS k, {column} AS v FROM {table} WHERE {column} IS NOT NULL");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&mut *tx).await?;
        for row in rows {
            let (k, v): (String, String) = (row.try_get("k")?, row.try_get("v")?);
            if *table == "settings" && !SECRET_SETTINGS.contains(&k.as_str()) {
                continue;
            }
            if to.is_current(&v) && std::ptr::eq(from, to) {
                continue;
            }
            let plain = from.open(context, &v).map_err(to_sqlx)?;
            let cast = if *table == "settings" { "$2" } else { "CAST($2 AS BIGINT)" };
            let sql = format!("UPDATE {table} SET {column} = $1 WHERE {key} = {cast}");
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(to.seal(context, &plain)).bind(&k).execute(&mut *tx).await?;
            changed += 1;
        }
    }
    tx.commit().await?;
    Ok(changed)
}

/// `hubbub secrets rotate-key`: a new key re-seals every stored secret. With a key file, the new key is
/// written beside it first (`<file>.new`), everything is re-sealed in one transaction, then the new file
/// replaces the old one — a crash in between is finished at the next start. With `HUBBUB_SECRET_KEY`, the new
/// key is written to `new_key_file` and the operator swaps the setting. Returns the new key's id and file.
pub async fn rotate(
    db: &Db,
    source: &KeySource,
    new_key_file: Option<&Path>,
) -> anyhow::Result<(String, PathBuf, u64)> {
    let new_key = SecretKey::generate();
    let (written, final_path) = match (source, new_key_file) {
        (_, Some(path)) => (path.to_path_buf(), None),
        (KeySource::File(path), None) => (pending_key_file(path), Some(path.clone())),
        (KeySource::Environment, None) => {
            anyhow::bail!("the key comes from HUBBUB_SECRET_KEY: give --new-key-file PATH to receive the new key")
        }
        (KeySource::Ephemeral, None) => anyhow::bail!("an in-memory database has no stored secrets to rotate"),
    };
    write_key_file(&written, &new_key)?;
    let changed = reseal(db, db.keyring(), &Keyring::new(new_key.clone())).await?;
    let path = match final_path {
        Some(path) => {
            std::fs::rename(&written, &path)?;
            path
        }
        None => written,
    };
    Ok((new_key.id().to_string(), path, changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_key_and_column() {
        let ring = Keyring::new(SecretKey::generate());
        let sealed = ring.seal("partners.webhook_secret", "whsec_abc");
        assert!(sealed.starts_with("enc:v1:") && !sealed.contains("whsec_abc"));
        assert_eq!(ring.open("partners.webhook_secret", &sealed).unwrap(), "whsec_abc");
        assert!(matches!(ring.open("bots.webhook_secret", &sealed), Err(SealError::Damaged)));
        let other = Keyring::new(SecretKey::generate());
        assert!(matches!(other.open("partners.webhook_secret", &sealed), Err(SealError::UnknownKey(_))));
        // Legacy plaintext reads as it is.
        assert_eq!(ring.open("partners.webhook_secret", "whsec_old").unwrap(), "whsec_old");
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(matches!(ring.open("partners.webhook_secret", &tampered), Err(SealError::Damaged)));
    }

    #[test]
    fn keys_parse_from_base64_or_hex() {
        let key = SecretKey::generate();
        assert_eq!(SecretKey::parse(&key.encode()).unwrap().id(), key.id());
        assert_eq!(SecretKey::parse(&format!("{}\n", key.encode())).unwrap().id(), key.id());
        assert_eq!(SecretKey::parse(&crate::secrets::hex(&key.key)).unwrap().id(), key.id());
        assert!(SecretKey::parse("short").is_err());
        assert!(SecretKey::parse(&STANDARD.encode([0u8; 31])).is_err());
    }

    #[test]
    fn the_default_key_file_sits_beside_the_sqlite_database() {
        assert_eq!(default_key_file("sqlite://hubbub.db?mode=rwc"), Some(PathBuf::from("hubbub.db.key")));
        assert_eq!(default_key_file("sqlite:///var/lib/h/x.db"), Some(PathBuf::from("/var/lib/h/x.db.key")));
        assert_eq!(default_key_file("sqlite::memory:"), None);
        assert_eq!(default_key_file("postgres://x"), None);
    }
}
