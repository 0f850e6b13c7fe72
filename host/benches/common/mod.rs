//! What the benches that run a release `hubbub` as a child process share: its settings (a fresh SQLite
//! database in a temporary directory unless `HUBBUB_BENCH_DATABASE_URL` names one), the CLI, and `serve`.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// The secret key of the bench hosts (at rest encryption; the benches also open the database themselves).
pub const SECRET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// A `hubbub serve` child, killed when dropped.
pub struct Server(pub std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A bench host's binary and settings.
pub struct Host {
    /// `HUBBUB_BENCH_BIN`, or the workspace's release build.
    pub bin: String,
    /// The database URL (the benches that fill the database themselves read it).
    #[allow(dead_code)]
    pub url: String,
    pub port: u16,
    /// `http://127.0.0.1:{port}`.
    pub base: String,
    pub env: Vec<(&'static str, String)>,
}

impl Host {
    /// The settings of a dev-mode host without rate limits, listening on a port of its own, and `extra`.
    pub fn new(dir: &Path, extra: &[(&'static str, String)]) -> Host {
        let bin = std::env::var("HUBBUB_BENCH_BIN")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/hubbub").into());
        let url = std::env::var("HUBBUB_BENCH_DATABASE_URL")
            .unwrap_or_else(|_| format!("sqlite://{}?mode=rwc", dir.join("bench.db").display()));
        let port = 20_000 + (std::process::id() % 20_000) as u16;
        let base = format!("http://127.0.0.1:{port}");
        let mut env = vec![
            ("HUBBUB_DATABASE_URL", url.clone()),
            ("HUBBUB_LISTEN", format!("127.0.0.1:{port}")),
            ("HUBBUB_PUBLIC_URL", base.clone()),
            ("HUBBUB_DEV", "1".into()),
            ("HUBBUB_LOG", "warn".into()),
            ("HUBBUB_RATE_LIMIT_PER_S", "1000000".into()),
            ("HUBBUB_RATE_LIMIT_BURST", "1000000".into()),
            ("HUBBUB_SECRET_KEY", SECRET_KEY.into()),
            ("HUBBUB_COMPONENT_CACHE_DIR", dir.join("components").display().to_string()),
        ];
        env.extend(extra.iter().cloned());
        Host { bin, url, port, base, env }
    }

    /// A new partner's API key (`hubbub partner create`).
    pub fn partner(&self, code: &str) -> anyhow::Result<String> {
        let out = std::process::Command::new(&self.bin)
            .args(["partner", "create", "--code", code, "--name", code])
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()?;
        anyhow::ensure!(out.status.success(), "partner create: {}", String::from_utf8_lossy(&out.stderr));
        Ok(serde_json::from_slice::<Value>(&out.stdout)?["api_key"].as_str().unwrap_or_default().to_string())
    }

    /// `hubbub serve` with these settings, listening on `port` (another host on the same database when it is
    /// not [`Host::port`]).
    pub fn serve(&self, port: u16) -> anyhow::Result<Server> {
        let listen = format!("127.0.0.1:{port}");
        let env = self.env.iter().map(|(k, v)| (*k, if *k == "HUBBUB_LISTEN" { listen.clone() } else { v.clone() }));
        let child =
            std::process::Command::new(&self.bin).arg("serve").envs(env).stdout(std::process::Stdio::null()).spawn()?;
        Ok(Server(child))
    }
}

/// Waits (20 s at most) until `base` answers `/healthz`.
pub async fn ready(client: &reqwest::Client, base: &str) {
    for _ in 0..400 {
        if client.get(format!("{base}/healthz")).send().await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
