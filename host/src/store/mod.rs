//! Data access: every SQL statement of the service lives under this module, in small functions named for
//! what they do. One schema and one query per operation serve both SQLite (the embedded default) and
//! PostgreSQL (scale-out), through sqlx's `Any` driver; where the two must differ, the difference sits in
//! one function of this file.
//!
//! SQLite allows one writer at a time, so on SQLite writes go through a pool of one connection (no
//! `SQLITE_BUSY` races between our own connections) while reads use a larger pool; on PostgreSQL both
//! pools are the same.

pub mod accounts;
pub mod assignment;
pub mod backup;
pub mod bots;
pub mod broadcasts;
pub mod canned_replies;
pub mod checkpoints;
pub mod conversations;
pub mod deliveries;
pub mod dev_sink;
pub mod developers;
pub mod devices;
pub mod erasure;
pub mod exports;
pub mod flows;
pub mod form_links;
pub mod inbound;
pub mod keys;
pub mod labels;
pub mod leases;
pub mod limits;
pub mod macros;
pub mod members;
pub mod messages;
pub mod opt_outs;
pub mod otp;
pub mod outbox;
pub mod pacing;
pub mod partners;
pub mod passkeys;
pub mod payments;
pub mod preferences;
pub mod push;
pub mod ratings;
pub mod retention;
pub mod rollups;
pub mod sealing;
pub mod search;
pub mod senders;
pub mod service_levels;
pub mod settings;
pub mod templates;
pub mod tokens;
pub mod user_events;
pub mod whatsapp;
pub mod writer;

use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Executor};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The database: pools for reads and writes, which backend they talk to, and the keys that seal the
/// secrets it stores.
#[derive(Clone, Debug)]
pub struct Db {
    read: AnyPool,
    write: AnyPool,
    backend: Backend,
    keys: std::sync::Arc<sealing::Keyring>,
    /// How many transactions each group commit (`store::writer`) runs at once.
    write_lanes: usize,
    /// Told each time SQLite's one writer connection is handed back (a transaction committed or rolled
    /// back, a write done): what this process wrote is visible to readers from then on.
    written: std::sync::Arc<tokio::sync::Notify>,
    /// On SQLite, what this process has just written (hub messages, log rows), for its tail of the event log.
    fresh: Option<std::sync::Arc<user_events::Fresh>>,
    /// On SQLite, the task that checkpoints the write-ahead log (`store::checkpoints`): it ends with the
    /// last handle.
    _checkpoints: Option<std::sync::Arc<tokio_util::sync::DropGuard>>,
}

/// Each SQLite connection's settings; the writer's own checkpoints wait until the log is large
/// (`store::checkpoints`). Temporary files stay in memory (`temp_store`): the statement journal of each
/// multi-row statement inside a transaction (what undoes that statement alone) outgrew SQLite's 64 KiB spill
/// threshold, so each was a file created, written, read and deleted in `/var/tmp` — about half the writer's
/// `pwrite` calls (docs/performance.md).
const SQLITE_SETTINGS: &str = const_format::formatcp!(
    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
     PRAGMA busy_timeout = 10000; PRAGMA temp_store = MEMORY; PRAGMA wal_autocheckpoint = {};",
    checkpoints::WRITER_CHECKPOINT_PAGES
);

/// The one writer connection's settings: those of every connection, and a page cache of 64 MiB (SQLite's
/// default is 2 MiB). Every send writes a place at random in the indexes keyed by phone; once a database
/// holds a few million messages their pages no longer fit in 2 MiB, and each such write read a page back
/// from the file (docs/performance.md, "The send path as the database grows").
const SQLITE_WRITER_SETTINGS: &str = const_format::concatcp!(SQLITE_SETTINGS, " PRAGMA cache_size = -65536;");

static SQLITE_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("src/store/migrations/sqlite");
static POSTGRES_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("src/store/migrations/postgres");

impl Db {
    /// Opens the configured database: its key for secrets at rest, the connection and migrations, then
    /// finishes an interrupted key rotation and seals any secret still stored in the clear.
    pub async fn open(config: &crate::config::Config, max_connections: u32) -> anyhow::Result<Db> {
        let (keys, source) = sealing::keyring(config)?;
        let mut db = Db::connect(&config.database_url, max_connections, keys).await?;
        sealing::finish_interrupted_rotation(&mut db, &source).await?;
        let sealed = sealing::seal_plaintext_secrets(&db).await.map_err(|e| anyhow::anyhow!("secrets at rest: {e}"))?;
        if sealed > 0 {
            tracing::info!(sealed, "sealed secrets that were stored in the clear");
        }
        Ok(db)
    }

    /// Connects to `url` (`sqlite://…` or `postgres://…`) and runs the migrations.
    pub async fn connect(url: &str, max_connections: u32, keys: sealing::Keyring) -> anyhow::Result<Db> {
        let keys = std::sync::Arc::new(keys);
        let max_connections = max_connections.max(1);
        install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            anyhow::bail!("HUBBUB_DATABASE_URL must start with sqlite: or postgres:");
        };
        let db = match backend {
            Backend::Sqlite => {
                // The connections are this process's own files: none goes stale between uses, so none is
                // pinged before it is handed out (a round trip to its thread for every transaction).
                let options_with = |settings: &'static str| {
                    AnyPoolOptions::new()
                        .test_before_acquire(false)
                        .acquire_timeout(Duration::from_secs(30))
                        .after_connect(move |conn, _| {
                            Box::pin(async move {
                                conn.execute(settings).await?;
                                Ok(())
                            })
                        })
                };
                let options = || options_with(SQLITE_SETTINGS);
                let written = std::sync::Arc::new(tokio::sync::Notify::new());
                let told = written.clone();
                let write = options_with(SQLITE_WRITER_SETTINGS)
                    .max_connections(1)
                    .after_release(move |_, _| {
                        told.notify_one();
                        Box::pin(async { Ok(true) })
                    })
                    .connect(url)
                    .await?;
                // Create the file and the schema before the readers open it.
                SQLITE_MIGRATOR.run(&write).await?;
                // SQLite reads run on the connection's own thread, in this process: more reader threads than
                // twice the cores only add task switches (measured: 4 readers took ~10 % more requests than
                // 16 on 2 cores, docs/performance.md).
                let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as u32;
                let readers = max_connections.min(2 * cores).max(1);
                let read = options().max_connections(readers).connect(url).await?;
                let checkpoints = checkpoints::start(options().max_connections(1).connect(url).await?);
                let _checkpoints = Some(std::sync::Arc::new(checkpoints));
                let fresh = Some(Default::default());
                Db { read, write, backend, keys, write_lanes: 1, written, fresh, _checkpoints }
            }
            Backend::Postgres => {
                let pool = AnyPoolOptions::new()
                    .max_connections(max_connections)
                    .acquire_timeout(Duration::from_secs(30))
                    .connect(url)
                    .await?;
                POSTGRES_MIGRATOR.run(&pool).await?;
                let write_lanes = (max_connections as usize / 4).clamp(1, 8);
                let written = Default::default();
                let (read, write, fresh) = (pool.clone(), pool, None);
                Db { read, write, backend, keys, write_lanes, written, fresh, _checkpoints: None }
            }
        };
        Ok(db)
    }

    /// Both pools answer a query.
    pub async fn ping(&self) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        sqlx::query("SELECT 1").execute(&self.write).await?;
        Ok(())
    }

    /// How many of this build's migrations the database has not applied (successfully).
    pub async fn pending_migrations(&self) -> Result<usize, sqlx::Error> {
        let migrator = match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATOR,
            Backend::Postgres => &POSTGRES_MIGRATOR,
        };
        let applied: Vec<i64> =
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success").fetch_all(&self.read).await?;
        Ok(migrator.iter().filter(|m| !applied.contains(&m.version)).count())
    }

    /// The keys that seal and open stored secrets.
    pub fn keyring(&self) -> &sealing::Keyring {
        &self.keys
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The pool for reads.
    pub fn reader(&self) -> &AnyPool {
        &self.read
    }

    /// Begins a write transaction. On SQLite it takes the write lock at once (`BEGIN IMMEDIATE`): a deferred
    /// transaction that reads first and then writes cannot wait for another process's writer (SQLite answers
    /// "database is locked" at once instead of deadlocking), and hosts sharing one file are such processes.
    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.backend {
            Backend::Sqlite => self.write.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => self.write.begin().await,
        }
    }

    /// On SQLite, notified (one stored permit) whenever this process's writer has finished a write, so a
    /// reader waiting for new rows looks at once instead of at its next poll; never notified on
    /// PostgreSQL (whose hosts hear of new rows by `LISTEN`).
    pub fn written(&self) -> &tokio::sync::Notify {
        &self.written
    }

    /// On SQLite, the hub messages this process has just written (see [`user_events::Fresh`]); `None` on
    /// PostgreSQL, whose streams read the log themselves.
    pub fn fresh(&self) -> Option<&user_events::Fresh> {
        self.fresh.as_deref()
    }

    /// The pool for writes and transactions.
    pub fn writer(&self) -> &AnyPool {
        &self.write
    }

    /// How many transactions each group commit (`store::writer`) runs at once: one on SQLite, whose single
    /// writer would only make the others wait; on PostgreSQL a quarter of the pool (4 of the default 16
    /// connections), since one transaction at a time there is bounded by its round trips, not by the
    /// server.
    pub fn write_lanes(&self) -> usize {
        self.write_lanes
    }

    pub async fn close(&self) {
        self.read.close().await;
        self.write.close().await;
    }
}

/// A column holding one name of a `string_enum!` set (a state, a status, a mode); an unknown name is a
/// decode error.
pub fn decode_name<T: std::str::FromStr<Err = String>>(
    row: &sqlx::any::AnyRow,
    column: &str,
) -> Result<T, sqlx::Error> {
    use sqlx::Row;
    let text: String = row.try_get(column)?;
    text.parse().map_err(|e: String| sqlx::Error::Decode(e.into()))
}

/// A nullable column holding one name of a `string_enum!` set.
pub fn decode_optional_name<T: std::str::FromStr<Err = String>>(
    row: &sqlx::any::AnyRow,
    column: &str,
) -> Result<Option<T>, sqlx::Error> {
    use sqlx::Row;
    let text: Option<String> = row.try_get(column)?;
    text.map(|t| t.parse().map_err(|e: String| sqlx::Error::Decode(e.into()))).transpose()
}

/// True when `err` is a unique-constraint violation (both backends).
pub fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// The rows of a multi-row statement: `template` (say `(?, ?, 0)`) `rows` times, comma-separated; the
/// statement then goes through [`placeholders`], and its values are bound row by row.
pub fn rows(rows: usize, template: &str) -> String {
    vec![template; rows].join(", ")
}

/// Rows bound as one value, a JSON array of arrays, for a statement that reads them through [`json_table`]:
/// one value to bind however many rows (a statement of a value per `?` costs `sqlx`'s `Any` driver and the
/// engine a conversion and a bind each, most of a batch's time beside the engine's own work), and one
/// statement text for any count, kept prepared. Rows can be built before the transaction that writes them
/// and joined later.
#[derive(Debug, Default, Clone)]
pub struct JsonRows {
    /// The rows' JSON, comma-separated, without the enclosing brackets.
    text: Vec<u8>,
    count: usize,
}

impl JsonRows {
    /// Adds a row: a tuple (or array) of the table's columns in order.
    pub fn push(&mut self, row: &impl serde::Serialize) {
        if self.count > 0 {
            self.text.push(b',');
        }
        serde_json::to_writer(&mut self.text, row).expect("rows of numbers, strings and nulls serialize");
        self.count += 1;
    }

    /// Adds `other`'s rows after these.
    pub fn append(&mut self, other: &JsonRows) {
        if other.count == 0 {
            return;
        }
        if self.count > 0 {
            self.text.push(b',');
        }
        self.text.extend_from_slice(&other.text);
        self.count += other.count;
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The value to bind: the JSON array.
    pub fn value(&self) -> String {
        let mut text = String::with_capacity(self.text.len() + 2);
        text.push('[');
        text.push_str(std::str::from_utf8(&self.text).expect("serde_json writes UTF-8"));
        text.push(']');
        text
    }
}

/// The rows of a [`JsonRows`] bound at this `?`, as a `SELECT` of `n` (each row's place, from 0) and then
/// `columns`, each a row's item at its place as its SQL type (a JSON `null` is `NULL`): SQLite's
/// `jsonb_each`, PostgreSQL's `jsonb_array_elements`. SQLite's `jsonb_each` parses the bound text once and
/// hands each row over in its binary form, which each column's `->>` reads as it is; `json_each` would hand
/// each row back as text, parsed again for its columns (twice the time a row, docs/performance.md).
pub fn json_table(backend: Backend, columns: &[(&str, &str)]) -> String {
    let items = |cast: bool| {
        columns
            .iter()
            .enumerate()
            .map(|(i, (name, ty))| match cast {
                false => format!("value ->> {i} AS {name}"),
                true => format!("CAST(value ->> {i} AS {ty}) AS {name}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match backend {
        Backend::Sqlite => format!("SELECT key AS n, {} FROM jsonb_each(?)", items(false)),
        Backend::Postgres => format!(
            "SELECT j.n - 1 AS n, {} FROM jsonb_array_elements(CAST(? AS jsonb)) WITH ORDINALITY AS j (value, n)",
            items(true)
        ),
    }
}

/// `sql` written with `?` placeholders, in the form the engine takes best: unchanged on SQLite, where
/// anonymous parameters bind in order (SQLite looks each *named* parameter up in a list, which makes a
/// statement of a few thousand `$N` parameters quadratic to prepare and bind); `$1`, `$2`, … on
/// PostgreSQL, which has no other form.
pub fn placeholders(backend: Backend, sql: &str) -> String {
    if backend == Backend::Sqlite {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + sql.len() / 4);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// A statement of `rows` rows written with `?` placeholders (see [`rows`]), ready to bind: placeholders in
/// the engine's form, and kept prepared only in its one-row form (the same text every time), so statements
/// of varying sizes do not churn the connection's statement cache.
pub fn query_rows<'q>(
    backend: Backend,
    sql: &str,
    rows: usize,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    sqlx::query(sqlx::AssertSqlSafe(placeholders(backend, sql))).persistent(rows == 1)
}

/// The engine a connection (or transaction) talks to.
pub fn backend_of(conn: &sqlx::AnyConnection) -> Backend {
    if conn.backend_name() == "SQLite" { Backend::Sqlite } else { Backend::Postgres }
}

/// Escapes `%`, `_` and `\` for a `LIKE … ESCAPE '\'` pattern and wraps it in `%…%`, lower-cased.
pub fn like_pattern(needle: &str) -> String {
    let mut out = String::with_capacity(needle.len() + 2);
    out.push('%');
    for c in needle.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

#[cfg(test)]
impl Db {
    /// For tests: a new SQLite database `file`, opened as the host opens it (with a new key), with up to `max`
    /// connections.
    pub async fn sqlite_at(file: &std::path::Path, max: u32) -> Db {
        let url = format!("sqlite://{}?mode=rwc", file.display());
        Db::connect(&url, max, sealing::Keyring::new(sealing::SecretKey::generate())).await.unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::{Backend, Db, placeholders, rows};

    #[test]
    fn placeholders_are_numbered_in_order_on_postgresql_and_anonymous_on_sqlite() {
        assert_eq!(placeholders(Backend::Postgres, &rows(2, "(?, ?, 0)")), "($1, $2, 0), ($3, $4, 0)");
        assert_eq!(placeholders(Backend::Sqlite, &rows(2, "(?, ?, 0)")), "(?, ?, 0), (?, ?, 0)");
        assert_eq!(placeholders(Backend::Postgres, &rows(1, "(?)")), "($1)");
        assert_eq!(rows(0, "(?)"), "");
    }

    /// The writer does not checkpoint a log of a few hundred pages by itself: what it wrote reaches the
    /// database file through the background checkpoints, with no checkpoint asked for.
    #[tokio::test]
    async fn sqlite_writes_reach_the_database_file_through_the_background_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.db");
        let db = Db::sqlite_at(&file, 2).await;
        sqlx::query("CREATE TABLE pages (body BLOB NOT NULL)").execute(db.writer()).await.unwrap();
        // Let the schema reach the file, then write some 300 pages of 4 KiB.
        tokio::time::sleep(4 * super::checkpoints::INTERVAL).await;
        let before = std::fs::metadata(&file).unwrap().len();
        for _ in 0..300 {
            sqlx::query("INSERT INTO pages (body) VALUES (zeroblob(4000))").execute(db.writer()).await.unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut size = before;
        while size < before + 300 * 4000 && std::time::Instant::now() < deadline {
            tokio::time::sleep(super::checkpoints::INTERVAL).await;
            size = std::fs::metadata(&file).unwrap().len();
        }
        assert!(size >= before + 300 * 4000, "the database file is {size} bytes, {before} before the writes");
        db.close().await;
    }

    /// Every SQLite connection, the writer's and the readers', keeps its temporary files in memory
    /// (`temp_store = MEMORY`, 2): a multi-row statement's journal is never a file in `/var/tmp`.
    #[tokio::test]
    async fn sqlite_connections_keep_temporary_files_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite_at(&dir.path().join("t.db"), 4).await;
        let store: i64 = sqlx::query_scalar("PRAGMA temp_store").fetch_one(db.writer()).await.unwrap();
        assert_eq!(store, 2, "the writer");
        // Each of the readers (held at once, so each answer is another connection's).
        let mut held = Vec::new();
        for _ in 0..db.reader().options().get_max_connections() {
            let mut reader = db.reader().acquire().await.unwrap();
            let store: i64 = sqlx::query_scalar("PRAGMA temp_store").fetch_one(&mut *reader).await.unwrap();
            assert_eq!(store, 2, "reader {}", held.len());
            held.push(reader);
        }
        drop(held);
        db.close().await;
    }

    /// Rows bound through [`super::JsonRows`] come back from [`super::json_table`] as they were pushed: each
    /// row in its place, strings with quotes, escapes, newlines and characters outside ASCII (a webhook
    /// event's payload is JSON text inside the row), nulls as `NULL`, integers to the ends of `i64`.
    #[tokio::test]
    async fn json_rows_come_back_from_the_table_as_pushed() {
        use sqlx::Row;
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite_at(&dir.path().join("t.db"), 1).await;
        let pushed: Vec<(i64, Option<String>, String)> = vec![
            (i64::MAX, Some(r#"{"body":"a \"quoted\" line\nnext","emoji":"héllo 👋"}"#.to_string()), "x".into()),
            (i64::MIN, None, "tab\tand \\ backslash".into()),
            (0, Some(String::new()), "[1, 2]".into()),
        ];
        let mut rows = super::JsonRows::default();
        for row in &pushed {
            rows.push(row);
        }
        let sql = super::json_table(Backend::Sqlite, &[("a", "BIGINT"), ("b", "TEXT"), ("c", "TEXT")]);
        let read: Vec<(i64, i64, Option<String>, String)> =
            sqlx::query(sqlx::AssertSqlSafe(format!("{sql} ORDER BY n")))
                .bind(rows.value())
                .fetch_all(db.reader())
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                .collect();
        let expected: Vec<_> = pushed.into_iter().enumerate().map(|(n, (a, b, c))| (n as i64, a, b, c)).collect();
        assert_eq!(read, expected);
        db.close().await;
    }

    /// The bundled SQLite keeps no memory statistics (`.cargo/config.toml`: `SQLITE_DEFAULT_MEMSTATUS=0`),
    /// so its allocations take no global mutex.
    #[tokio::test]
    async fn sqlite_is_built_without_memory_statistics() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite_at(&dir.path().join("t.db"), 1).await;
        let options: Vec<String> = sqlx::query_scalar("SELECT compile_options FROM pragma_compile_options")
            .fetch_all(db.reader())
            .await
            .unwrap();
        assert!(options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"), "compile options: {options:?}");
        db.close().await;
    }
}

#[cfg(test)]
mod migration_tests {
    use std::path::Path;

    /// A migration file as comparable statements: comments and blank lines dropped, whitespace folded,
    /// the two column types that differ by engine written the SQLite way, and statements after an
    /// `-- engine-specific` comment left out (they must still be there on both sides).
    fn statements(path: &Path) -> (Vec<String>, usize) {
        let text = std::fs::read_to_string(path).unwrap();
        let mut statements = Vec::new();
        let mut specific = 0;
        let mut skip_next = false;
        let mut current = String::new();
        for line in text.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with("--") {
                skip_next |= trimmed.starts_with("-- engine-specific");
                continue;
            }
            current.push(' ');
            current.push_str(trimmed);
            if trimmed.ends_with(';') {
                let folded = current
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .replace("BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
                    .replace("BYTEA", "BLOB");
                if skip_next {
                    specific += 1;
                } else {
                    statements.push(folded);
                }
                skip_next = false;
                current.clear();
            }
        }
        (statements, specific)
    }

    #[test]
    fn sqlite_and_postgresql_migrations_do_not_drift() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store/migrations");
        let names = |engine: &str| {
            let mut names: Vec<String> = std::fs::read_dir(dir.join(engine))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .collect();
            names.sort();
            names
        };
        let (sqlite, postgres) = (names("sqlite"), names("postgres"));
        assert_eq!(sqlite, postgres, "the two engines have different migration files");
        for name in sqlite {
            let (a, a_specific) = statements(&dir.join("sqlite").join(&name));
            let (b, b_specific) = statements(&dir.join("postgres").join(&name));
            // Each engine's own way (FTS5 triggers here, generated columns there) may take a different
            // number of statements, but neither side may lack it.
            assert_eq!(a_specific > 0, b_specific > 0, "{name}: one engine lacks the engine-specific part");
            assert_eq!(a.len(), b.len(), "{name}: different numbers of statements");
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(x, y, "{name}: the engines' statements drifted");
            }
        }
    }
}
