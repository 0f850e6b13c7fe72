//! Backups (docs/deploy.md, "Backups"): `hubbub backup` while a host takes sends, `hubbub restore` into a new
//! database, and a host on the restore that serves and delivers; a restore into a database that is not empty
//! is refused. PostgreSQL is backed up with pg_dump: the command says so.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::cli::hubbub;
use crate::common::{TestDb, spawn_server};

/// A dev host whose rate limits leave the test's calls alone.
const UNLIMITED: &[(&str, &str)] =
    &[("HUBBUB_DEV", "1"), ("HUBBUB_RATE_LIMIT_PER_S", "100000"), ("HUBBUB_RATE_LIMIT_BURST", "100000")];

/// `hubbub` with `args` on `database_url`, on a blocking thread (the host this test runs goes on meanwhile).
async fn hubbub_beside(database_url: &str, args: &[&str]) -> std::process::Output {
    let (url, args): (String, Vec<String>) = (database_url.into(), args.iter().map(|a| a.to_string()).collect());
    tokio::task::spawn_blocking(move || hubbub(&url, &args.iter().map(String::as_str).collect::<Vec<_>>()))
        .await
        .unwrap()
}

/// A new, empty database to restore into, beside the test's `source`: a SQLite file, or on PostgreSQL a
/// database of its own (a dump names its schema, which the restore creates there under the same name).
struct Target {
    url: String,
    _sqlite: Option<TestDb>,
    postgres: Option<(String, String)>,
}

impl Target {
    async fn new(source: &TestDb) -> Target {
        if !source.url.starts_with("postgres") {
            let db = TestDb::new().await;
            return Target { url: db.url.clone(), _sqlite: Some(db), postgres: None };
        }
        let base = std::env::var("HUBBUB_TEST_DATABASE_URL").unwrap();
        let name = format!("r_{}", hubbub_host::secrets::random_alnum(12).to_lowercase());
        let pool = sqlx::AnyPool::connect(&base).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&pool).await.unwrap();
        pool.close().await;
        let server = base.split('?').next().unwrap().rsplit_once('/').unwrap().0;
        let options = source.url.split_once('?').unwrap().1;
        Target { url: format!("{server}/{name}?{options}"), _sqlite: None, postgres: Some((base, name)) }
    }

    async fn drop(self) {
        if let Some((base, name)) = self.postgres {
            let pool = sqlx::AnyPool::connect(&base).await.unwrap();
            let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
            sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&pool).await.unwrap();
            pool.close().await;
        }
    }
}

fn said(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test]
async fn a_backup_taken_during_sends_restores_every_message_acknowledged_before_it() {
    let db = TestDb::new().await;
    let backup_file = tempfile::tempdir().unwrap();
    let backup_path = backup_file.path().join("hubbub.backup");
    let backup_arg = backup_path.to_string_lossy().to_string();
    let create = hubbub(&db.url, &["partner", "create", "--code", "acme", "--name", "Acme"]);
    let key = serde_json::from_slice::<Value>(&create.stdout).unwrap()["api_key"].as_str().unwrap().to_string();
    let (mut host, port) = spawn_server(&db.url, UNLIMITED).await;
    let base = format!("http://127.0.0.1:{port}");

    // Sends, one after another, without pause: each acknowledged id is kept.
    let acknowledged = Arc::new(Mutex::new(Vec::<i64>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let (acknowledged, stop, key, base) = (acknowledged.clone(), stop.clone(), key.clone(), base.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let body = json!({"phone": format!("+1555780{:04}", n % 10_000), "body": format!("Parcel {n}")});
                let r = client.post(format!("{base}/api/v1/messages")).bearer_auth(&key).json(&body).send().await;
                if let Ok(r) = r
                    && r.status() == 201
                {
                    let id = r.json::<Value>().await.unwrap()["message_id"].as_i64().unwrap();
                    acknowledged.lock().unwrap().push(id);
                }
            }
        })
    };
    // A hundred sends before the backup (a busy machine may take a while: up to a minute).
    for _ in 0..600 {
        if acknowledged.lock().unwrap().len() >= 100 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(acknowledged.lock().unwrap().len() >= 100, "a hundred sends before the backup");
    let before: Vec<i64> = acknowledged.lock().unwrap().clone();
    let out = hubbub_beside(&db.url, &["backup", "--to", &backup_arg]).await;
    assert!(out.status.success(), "{}", said(&out));
    let copied: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(copied["messages"].as_i64().unwrap() >= before.len() as i64, "{copied}");
    // Sends went on during the backup.
    let during = acknowledged.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sender.await.unwrap();
    assert!(acknowledged.lock().unwrap().len() > during, "sends went on");
    // A second backup to the same file is refused.
    let again = hubbub_beside(&db.url, &["backup", "--to", &backup_arg]).await;
    assert!(!again.status.success() && said(&again).contains("exists"), "{}", said(&again));
    let _ = host.kill();
    let _ = host.wait();

    // A file that is no backup is refused, and the database it was to go into stays empty.
    let restored = Target::new(&db).await;
    let garbage = backup_file.path().join("notes.txt");
    std::fs::write(&garbage, "not a database").unwrap();
    let refused = hubbub_beside(&restored.url, &["restore", "--from", &garbage.to_string_lossy()]).await;
    assert!(!refused.status.success() && said(&refused).contains("not a Hubbub backup"), "{}", said(&refused));
    // Restored into a new database: every message acknowledged before the backup began, whole.
    let out = hubbub_beside(&restored.url, &["restore", "--from", &backup_arg]).await;
    assert!(out.status.success(), "{}", said(&out));
    // Not into a database that holds anything.
    let refused = hubbub_beside(&db.url, &["restore", "--from", &backup_arg]).await;
    assert!(!refused.status.success() && said(&refused).contains("not empty"), "{}", said(&refused));

    let (mut host, port) = spawn_server(&restored.url, UNLIMITED).await;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let read = |id: i64| {
        let (client, base, key) = (client.clone(), base.clone(), key.clone());
        async move {
            let url = format!("{base}/api/v1/messages/{id}?include=attempts,events");
            let r = client.get(url).bearer_auth(&key).send().await.unwrap();
            assert_eq!(r.status(), 200, "message {id} is in the restore");
            r.json::<Value>().await.unwrap()
        }
    };
    for id in &before {
        let m = read(*id).await;
        let events = m["events"].as_array().unwrap();
        // Whole: its states as its history says them, and a try for every state past queued.
        assert_eq!(events.last().unwrap()["state"], m["state"], "{m}");
        if m["state"] != "queued" {
            assert!(!m["attempts"].as_array().unwrap().is_empty(), "{m}");
        }
    }
    // The restored host delivers what was still queued, and takes new sends.
    for id in &before {
        // The restored host's worker takes them in turn: the first may wait for the others.
        for _ in 0..600 {
            if read(*id).await["state"] != "queued" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_ne!(read(*id).await["state"], "queued", "message {id} delivered by the restored host");
    }
    let r = client
        .post(format!("{base}/api/v1/messages"))
        .bearer_auth(&key)
        .json(&json!({"phone": "+15557809999", "body": "After the restore"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let _ = host.kill();
    let _ = host.wait();
    restored.drop().await;
}
