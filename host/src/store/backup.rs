//! Backups taken by the database itself while the hosts serve, and their restore into a database that is new
//! or empty (docs/deploy.md, "Backups"): SQLite's `VACUUM INTO` (one read transaction: the copy is the
//! database as it was at one instant, every transaction whole), PostgreSQL's `pg_dump` (one snapshot, the
//! same promise) and `pg_restore`.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection, Row};

use super::{Backend, Db};

/// What a backup or a restore wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Copied {
    /// The file written.
    pub file: PathBuf,
    pub bytes: u64,
    /// Messages in it (a check a person can read against the host's).
    pub messages: i64,
}

/// Why a backup or a restore was refused.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// `pg_dump` or `pg_restore` could not run, or failed (what it said).
    #[error("{0} failed: {1}")]
    Tool(&'static str, String),
    #[error("{0} exists: a backup is written to a new file")]
    Exists(PathBuf),
    #[error("the database at {0} is not empty: restore only into a new or empty database")]
    NotEmpty(PathBuf),
    #[error("{0} is not a Hubbub backup: {1}")]
    NotABackup(PathBuf, String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Writes a consistent copy of `db` (at `url`) to the new file `to`, while the hosts go on serving.
pub async fn backup(db: &Db, url: &str, to: &Path) -> Result<Copied, BackupError> {
    if to.exists() {
        return Err(BackupError::Exists(to.to_path_buf()));
    }
    if db.backend() == Backend::Postgres {
        // The schema the hosts use (a URL may name one in `search_path`), in pg_dump's custom format.
        let schema: Option<String> =
            sqlx::query_scalar("SELECT CAST(current_schema() AS TEXT)").fetch_one(db.reader()).await?;
        let mut dump = tokio::process::Command::new("pg_dump");
        dump.args(["--format=custom", "--no-owner", "--file"]).arg(to).args(["--dbname", url]);
        if let Some(schema) = schema.filter(|s| s != "public") {
            dump.args(["--schema", &schema]);
        }
        run("pg_dump", &mut dump).await?;
        let messages = sqlx::query_scalar("SELECT COUNT(*) FROM messages").fetch_one(db.reader()).await?;
        return Ok(Copied { file: to.to_path_buf(), bytes: std::fs::metadata(to)?.len(), messages });
    }
    let file = to.to_string_lossy().to_string();
    // A reader connection: the copy is one read transaction, writers go on beside it (WAL).
    sqlx::query("VACUUM INTO $1").bind(&file).execute(db.reader()).await?;
    let mut copy = open_read_only(to).await?;
    let messages = sqlx::query_scalar("SELECT COUNT(*) FROM messages").fetch_one(&mut copy).await?;
    copy.close().await?;
    Ok(Copied { file: to.to_path_buf(), bytes: std::fs::metadata(to)?.len(), messages })
}

/// Runs a database tool; its error output is the error.
async fn run(tool: &'static str, command: &mut tokio::process::Command) -> Result<(), BackupError> {
    let out = command.output().await.map_err(|e| BackupError::Tool(tool, e.to_string()))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(BackupError::Tool(tool, String::from_utf8_lossy(&out.stderr).trim().to_string())),
    }
}

/// Restores the pg_dump `from` into the PostgreSQL database of `url`, which must hold no table in its schema.
async fn restore_postgres(url: &str, from: &Path) -> Result<Copied, BackupError> {
    use sqlx::postgres::PgConnection;
    let mut target = PgConnection::connect(url).await?;
    let tables: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()")
            .fetch_one(&mut target)
            .await?;
    if tables > 0 {
        return Err(BackupError::NotEmpty(PathBuf::from(redacted(url))));
    }
    let mut list = tokio::process::Command::new("pg_restore");
    list.arg("--list").arg(from);
    run("pg_restore", &mut list)
        .await
        .map_err(|_| BackupError::NotABackup(from.to_path_buf(), "pg_restore cannot read it".into()))?;
    let mut restore = tokio::process::Command::new("pg_restore");
    restore.args(["--no-owner", "--exit-on-error", "--single-transaction", "--dbname", url]).arg(from);
    run("pg_restore", &mut restore).await?;
    let messages = sqlx::query_scalar("SELECT COUNT(*) FROM messages").fetch_one(&mut target).await?;
    target.close().await?;
    Ok(Copied { file: from.to_path_buf(), bytes: std::fs::metadata(from)?.len(), messages })
}

/// A database URL without its password, to name it in a message.
fn redacted(url: &str) -> String {
    match url.split_once('@') {
        Some((credentials, rest)) => {
            let user = credentials.rsplit_once(':').map_or(credentials, |(user, _)| user);
            format!("{}@{rest}", user.trim_end_matches(':'))
        }
        None => url.to_string(),
    }
}

/// Restores the backup `from` into the database of `url`, which must be new or empty (no table); the caller
/// then brings it up to this host's schema (its migrations).
pub async fn restore(url: &str, from: &Path) -> Result<Copied, BackupError> {
    if !url.starts_with("sqlite:") {
        return restore_postgres(url, from).await;
    }
    let target = SqliteConnectOptions::from_str(url)?.get_filename().to_path_buf();
    if std::fs::metadata(&target).is_ok_and(|m| m.len() > 0) {
        let mut existing = open_read_only(&target).await?;
        let tables: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
                .fetch_one(&mut existing)
                .await?;
        existing.close().await?;
        if tables > 0 {
            return Err(BackupError::NotEmpty(target));
        }
    }
    let not_a_backup = |why: &str| BackupError::NotABackup(from.to_path_buf(), why.to_string());
    if !from.is_file() {
        return Err(not_a_backup("no such file"));
    }
    let mut source = open_read_only(from).await.map_err(|e| not_a_backup(&e.to_string()))?;
    let checked: String = sqlx::query("PRAGMA integrity_check")
        .fetch_one(&mut source)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| not_a_backup(&e.to_string()))?;
    if checked != "ok" {
        return Err(not_a_backup(&format!("its integrity check says {checked}")));
    }
    let migrated: Result<i64, _> =
        sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success").fetch_one(&mut source).await;
    let messages: Result<i64, _> = sqlx::query_scalar("SELECT COUNT(*) FROM messages").fetch_one(&mut source).await;
    let (Ok(1..), Ok(messages)) = (migrated, messages) else {
        return Err(not_a_backup("it holds no Hubbub schema"));
    };
    // An empty database file (and its journal) gives way to the copy, which SQLite writes itself.
    for stale in ["", "-wal", "-shm"] {
        let path = PathBuf::from(format!("{}{stale}", target.display()));
        if path.exists() {
            std::fs::remove_file(path)?;
        }
    }
    sqlx::query("VACUUM INTO $1").bind(target.to_string_lossy().to_string()).execute(&mut source).await?;
    source.close().await?;
    Ok(Copied { bytes: std::fs::metadata(&target)?.len(), file: target, messages })
}

/// A connection to the SQLite file at `path` that reads only.
async fn open_read_only(path: &Path) -> Result<SqliteConnection, sqlx::Error> {
    SqliteConnectOptions::new().filename(path).read_only(true).connect().await
}
