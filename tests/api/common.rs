//! The test harness: a running host per test, with its own database and a manual clock.

use std::collections::HashMap;
use std::sync::Arc;

use clap::Parser;
use hubbub_host::clock::{Clock, ManualClock};
use hubbub_host::config::{Config, SmsProviderKind, WhatsAppProviderKind};
use hubbub_host::http::state::AppState;
use hubbub_host::store::partners;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::sync::oneshot;

#[derive(Parser)]
struct ConfigArgs {
    #[command(flatten)]
    config: Config,
}

/// A database of its own for one test: a SQLite file in a temp dir, or a fresh PostgreSQL schema.
pub struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub async fn new() -> TestDb {
        match std::env::var("HUBBUB_TEST_DATABASE_URL") {
            Ok(base) if base.starts_with("postgres") => {
                let schema = format!("t_{}", hubbub_host::secrets::random_alnum(16).to_lowercase());
                sqlx::any::install_default_drivers();
                let pool = sqlx::AnyPool::connect(&base).await.expect("PostgreSQL for tests");
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}"))).execute(&pool).await.unwrap();
                pool.close().await;
                let sep = if base.contains('?') { '&' } else { '?' };
                TestDb { url: format!("{base}{sep}options=-c%20search_path%3D{schema}"), _dir: None }
            }
            _ => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}?mode=rwc", dir.path().join("hubbub.db").display());
                TestDb { url, _dir: Some(dir) }
            }
        }
    }
}

/// The JWT secret of test hosts (32 varied bytes: the shortest the host accepts).
pub const TEST_JWT_SECRET: &str = "kR7vX2mQ9pL4wZ8nT1yB6cH3jF5sD0aG";

/// The key that seals secrets at rest on test hosts (and the `hubbub` processes tests start).
pub const TEST_SECRET_KEY: &str = "dGVzdC1rZXktdGVzdC1rZXktdGVzdC1rZXktdGVzdC0=";

/// Settings every test starts from: dev mode, a generous rate limit.
pub fn test_config(database_url: &str) -> Config {
    let mut config = ConfigArgs::try_parse_from(["hubbub"]).expect("defaults parse").config;
    config.database_url = database_url.to_string();
    config.dev = true;
    config.jwt_secret = Some(TEST_JWT_SECRET.into());
    config.secret_key = Some(TEST_SECRET_KEY.into());
    config.rate_limit_per_s = 100_000;
    config.rate_limit_burst = 100_000;
    config.code_rate_limit_per_ip_per_min = 100_000;
    config.code_rate_limit_global_per_min = 100_000;
    config.db_max_connections = 4;
    config.delivery_poll_ms = 50;
    // Providers' pace as generous as the rate limits (the pacing tests set Meta's and Twilio's).
    config.whatsapp_mps = 10_000;
    config.sms_mps = 10_000;
    config.whatsapp_pair_interval_ms = 0;
    config.component_cache_dir = std::env::temp_dir().join("hubbub-test-components");
    // Components compile in a child process, as on a host: the `hubbub` binary, not this test binary.
    config.bot_compiler = Some(env!("CARGO_BIN_EXE_hubbub").into());
    config
}

/// Settings whose WhatsApp (Cloud API) and SMS (Twilio) providers are fake servers.
pub fn fake_providers(c: &mut Config, wa: &FakeServer, sms: &FakeServer) {
    c.whatsapp_provider = Some(WhatsAppProviderKind::Cloud);
    c.whatsapp_base_url = wa.url.clone();
    c.whatsapp_token = Some("wa-token".into());
    c.whatsapp_phone_number_id = Some("12345".into());
    c.sms_provider = Some(SmsProviderKind::Twilio);
    c.twilio_base_url = sms.url.clone();
    c.twilio_messaging_base_url = sms.url.clone();
    c.twilio_account_sid = Some("AC1".into());
    c.twilio_auth_token = Some("tw-token".into());
    c.twilio_from = Some("+15550001111".into());
    c.provider_timeout_ms = 500;
    // What provider receipts are signed and checked with.
    c.public_url = "https://hubbub.example.com".into();
    c.whatsapp_app_secret = Some("app-secret".into());
    c.whatsapp_verify_token = Some("verify-me".into());
}

/// A sample component `flows/build.sh` built (`target/wasm32-wasip2/release/{name}.wasm`).
pub fn wasm(name: &str) -> Vec<u8> {
    let path = format!("{}/../target/wasm32-wasip2/release/{name}.wasm", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|_| panic!("{path} is missing: run `bash flows/build.sh` first"))
}

/// Posts a WhatsApp Cloud API notification to the host at `base`, signed with the app secret `app-secret`.
pub async fn whatsapp_notify(client: &reqwest::Client, base: &str, changes: Value) -> Resp {
    whatsapp_notify_signed(client, base, changes, None).await
}

/// The same with `signature` as `X-Hub-Signature-256` instead of the right one (a forged notification).
pub async fn whatsapp_notify_signed(
    client: &reqwest::Client,
    base: &str,
    changes: Value,
    signature: Option<&str>,
) -> Resp {
    let body = serde_json::json!({"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": changes}]})
        .to_string();
    let signature = signature
        .map(str::to_string)
        .unwrap_or_else(|| hubbub_host::delivery::receipts::meta_signature("app-secret", body.as_bytes()));
    let r = client
        .post(format!("{base}/api/v1/providers/whatsapp/webhook"))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", signature)
        .body(body)
        .send()
        .await
        .unwrap();
    Resp::from(r).await
}

/// Posts a Twilio webhook's form to `/api/v1/providers/twilio/{route}` (`status`, `inbound`), signed as
/// Twilio signs it with the fake providers' auth token over the public URL — or with `signature`, forged.
pub async fn twilio_post(app: &TestApp, route: &str, params: &[(&str, &str)], signature: Option<&str>) -> Resp {
    let owned: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let url = format!("https://hubbub.example.com/api/v1/providers/twilio/{route}");
    let signature = signature
        .map(str::to_string)
        .unwrap_or_else(|| hubbub_host::delivery::receipts::twilio_signature("tw-token", &url, &owned));
    let r = app
        .client
        .post(format!("{}/api/v1/providers/twilio/{route}", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-twilio-signature", signature)
        .body(serde_urlencoded::to_string(&owned).unwrap())
        .send()
        .await
        .unwrap();
    Resp::from(r).await
}

/// `phone` wrote to the business on WhatsApp at `at_ms` (opening its 24-hour window): a reaction to one of
/// our messages, which is kept and reaches no one (`inbound`: not a text for a conversation).
pub async fn whatsapp_wrote(client: &reqwest::Client, base: &str, phone: &str, at_ms: i64) {
    static SEEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = format!("wamid.in.{}", SEEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let message = serde_json::json!({"from": phone.trim_start_matches('+'), "id": id, "timestamp": (at_ms / 1000).to_string(), "type": "reaction", "reaction": {"message_id": "wamid.1", "emoji": "👍"}});
    let change =
        serde_json::json!([{"field": "messages", "value": {"messaging_product": "whatsapp", "messages": [message]}}]);
    assert_eq!(whatsapp_notify(client, base, change).await.ok(200)["inbound"], 1);
}

/// A running host.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub state: AppState,
    pub clock: Arc<ManualClock>,
    pub db: Arc<TestDb>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl TestApp {
    pub async fn start() -> TestApp {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
        Self::start_on(Arc::new(TestDb::new().await), adjust).await
    }

    /// Another host on the same database (as a second process would be).
    pub async fn start_on(db: Arc<TestDb>, adjust: impl FnOnce(&mut Config)) -> TestApp {
        let clock = Arc::new(ManualClock::new(chrono::Utc::now().timestamp_millis()));
        Self::start_on_clock(db, clock, adjust).await
    }

    /// Another host on the same database and the same clock (two machines whose clocks agree).
    pub async fn start_on_clock(db: Arc<TestDb>, clock: Arc<ManualClock>, adjust: impl FnOnce(&mut Config)) -> TestApp {
        // `HUBBUB_TEST_LOG=warn` (any filter) prints the hosts' logs: what a 500 was.
        static LOG: std::sync::Once = std::sync::Once::new();
        LOG.call_once(|| {
            if let Ok(filter) = std::env::var("HUBBUB_TEST_LOG") {
                let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
            }
        });
        let mut config = test_config(&db.url);
        adjust(&mut config);
        let state = hubbub_host::prepare(config, clock.clone()).await.expect("host prepares");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = oneshot::channel::<()>();
        let server_state = state.clone();
        let server = tokio::spawn(async move {
            hubbub_host::serve(server_state, listener, async {
                let _ = rx.await;
            })
            .await
            .expect("server runs");
        });
        TestApp { base, client: reqwest::Client::new(), state, clock, db, shutdown: Some(tx), server: Some(server) }
    }

    /// A host whose WhatsApp (Cloud API) and SMS (Twilio) providers are fake servers.
    pub async fn with_fake_providers(wa: &FakeServer, sms: &FakeServer) -> TestApp {
        let (wa, sms) = (wa.clone(), sms.clone());
        Self::start_with(move |c| fake_providers(c, &wa, &sms)).await
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.unwrap();
        }
    }

    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Creates a partner directly and returns its API key.
    pub async fn partner(&self, code: &str) -> String {
        self.partner_with(code, false).await
    }

    pub async fn partner_with(&self, code: &str, platform: bool) -> String {
        let key = hubbub_host::secrets::new_partner_key();
        partners::insert_partner(
            &self.state.db,
            code,
            &format!("{code} Inc."),
            platform,
            &hubbub_host::secrets::digest(&key),
            &hubbub_host::secrets::display_prefix(&key, "sk_"),
            self.now(),
        )
        .await
        .unwrap();
        key
    }

    pub async fn request(&self, method: Method, path: &str, token: Option<&str>, body: Option<&Value>) -> Resp {
        let mut req = self.client.request(method, format!("{}{}", self.base, path));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        Resp::from(req.send().await.expect("request sent")).await
    }

    pub async fn get(&self, token: &str, path: &str) -> Resp {
        self.request(Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, token: &str, path: &str, body: Value) -> Resp {
        self.request(Method::POST, path, Some(token), Some(&body)).await
    }

    pub async fn patch(&self, token: &str, path: &str, body: Value) -> Resp {
        self.request(Method::PATCH, path, Some(token), Some(&body)).await
    }

    pub async fn send_text(&self, token: &str, phone: &str, body: &str) -> Resp {
        self.post(token, "/api/v1/messages", serde_json::json!({"phone": phone, "body": body})).await
    }
}

/// A response, read whole.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub json: Value,
}

impl Resp {
    pub async fn from(r: reqwest::Response) -> Resp {
        let status = r.status();
        let headers = r.headers().clone();
        let bytes = r.bytes().await.unwrap();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Resp { status, headers, json }
    }

    /// Asserts the contract's error shape with this status and code; returns the `field`.
    #[track_caller]
    pub fn error(&self, status: u16, code: &str) -> Option<String> {
        assert_eq!(self.status.as_u16(), status, "unexpected status, body {}", self.json);
        assert_eq!(self.json["error"]["code"], code, "unexpected error body {}", self.json);
        assert!(
            self.json["error"]["message"].as_str().is_some_and(|m| !m.is_empty()),
            "message missing: {}",
            self.json
        );
        self.json["error"]["field"].as_str().map(str::to_string)
    }

    #[track_caller]
    pub fn field_error(&self, field: &str) {
        assert_eq!(self.error(422, "validation").as_deref(), Some(field), "body {}", self.json);
    }

    #[track_caller]
    pub fn ok(&self, status: u16) -> &Value {
        assert_eq!(self.status.as_u16(), status, "unexpected status, body {}", self.json);
        &self.json
    }
}

impl TestApp {
    /// Logs `phone` in through OTP (reading the code from the dev sink) and returns the user JWT.
    pub async fn login(&self, phone: &str) -> String {
        self.login_device(phone, None).await.0
    }

    /// As [`login`], with a device uuid; returns the token and the verify response.
    pub async fn login_device(&self, phone: &str, device: Option<&str>) -> (String, Value) {
        let r = self
            .request(Method::POST, "/api/v1/auth/otp/start", None, Some(&serde_json::json!({"phone": phone})))
            .await;
        r.ok(202);
        let code = self.last_code(phone).await;
        let mut body = serde_json::json!({"phone": phone, "code": code});
        if let Some(d) = device {
            body["device_uuid"] = Value::from(d);
        }
        let r = self.request(Method::POST, "/api/v1/auth/otp/verify", None, Some(&body)).await;
        let json = r.ok(200).clone();
        (json["token"].as_str().unwrap().to_string(), json)
    }

    /// The 6-digit code of the newest SMS the dev sink holds for `phone`.
    pub async fn last_code(&self, phone: &str) -> String {
        let sms = hubbub_host::store::dev_sink::list(&self.state.db, Some(phone), Some("sms"), None, 1).await.unwrap();
        let text = &sms.first().expect("an SMS was sent").text;
        text.split(|c: char| !c.is_ascii_digit()).find(|w| w.len() == 6).expect("a 6-digit code").to_string()
    }

    /// Texts the dev sink holds for a phone and channel, oldest first.
    pub async fn sink(&self, phone: &str, channel: &str) -> Vec<String> {
        let rows =
            hubbub_host::store::dev_sink::list(&self.state.db, Some(phone), Some(channel), None, 1000).await.unwrap();
        rows.into_iter().rev().map(|r| r.text).collect()
    }

    /// The message as its partner sees it, with attempts.
    /// Posts a WhatsApp Cloud API notification (signed with the fake providers' app secret).
    pub async fn whatsapp_notify(&self, changes: Value) -> Resp {
        whatsapp_notify(&self.client, &self.base, changes).await
    }

    /// `phone` writes to the business on WhatsApp now, which opens its 24-hour window for free-form text.
    pub async fn whatsapp_wrote(&self, phone: &str) {
        whatsapp_wrote(&self.client, &self.base, phone, self.now()).await;
    }

    /// Uploads a bot component (`PUT /bots/{code}/component`, raw `application/wasm`).
    pub async fn upload_component(&self, key: &str, code: &str, bytes: &[u8]) -> Resp {
        let r = self
            .client
            .put(format!("{}/api/v1/bots/{code}/component", self.base))
            .bearer_auth(key)
            .header("content-type", "application/wasm")
            .body(bytes.to_vec())
            .send()
            .await
            .unwrap();
        Resp::from(r).await
    }

    pub async fn message(&self, key: &str, id: i64) -> Value {
        self.get(key, &format!("/api/v1/messages/{id}?include=attempts")).await.ok(200).clone()
    }

    /// Rows of `from` (a table, or tables joined) matching `filter`, read from the host's database.
    pub async fn rows(&self, from: &str, filter: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {from} WHERE {filter}");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_one(self.state.db.reader()).await.unwrap()
    }

    /// Waits until the message leaves `queued` (delivery is asynchronous); returns it with attempts.
    pub async fn delivered(&self, key: &str, id: i64) -> Value {
        let mut last = Value::Null;
        for _ in 0..300 {
            last = self.message(key, id).await;
            if last["state"] != "queued" {
                return last;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("message {id} still queued: {last}");
    }
}

/// Runs the `hubbub` binary with `args`, feeding `stdin`; answers stdout. On a blocking thread: the binary
/// calls the server this test runs.
pub async fn hubbub_with_input(args: &[&str], env: &[(&str, &str)], stdin: &str) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hubbub"))
            .args(&args)
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "hubbub {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    })
    .await
    .unwrap()
}

/// `hubbub serve` as a child process on `database_url` with the extra `env`, answered once it serves
/// (or panics after ~10 s). Tests kill it to check what survives a crash.
pub async fn spawn_server(database_url: &str, env: &[(&str, &str)]) -> (std::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hubbub"))
        .arg("serve")
        .env("HUBBUB_DATABASE_URL", database_url)
        .env("HUBBUB_LISTEN", format!("127.0.0.1:{port}"))
        .env("HUBBUB_SECRET_KEY", TEST_SECRET_KEY)
        // Tests run side by side on one PostgreSQL server: a few connections per process.
        .env("HUBBUB_DB_MAX_CONNECTIONS", "4")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let probe = format!("http://127.0.0.1:{port}/api/v1/openapi.json");
    for _ in 0..200 {
        if reqwest::get(&probe).await.is_ok() {
            return (child, port);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("hubbub serve did not start");
}

/// Polls `check` until it is true (up to ~10 s).
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..500 {
        if check().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// A local HTTP server standing in for a provider or a webhook receiver: answers with a configurable
/// status after a configurable delay, and records every request.
#[derive(Clone)]
pub struct FakeServer {
    pub url: String,
    pub behaviour: Arc<std::sync::Mutex<(u16, u64)>>,
    pub requests: Arc<std::sync::Mutex<Vec<Recorded>>>,
    /// Answers set for particular paths (`answer`), instead of the provider-shaped default.
    pub answers: Arc<std::sync::Mutex<HashMap<String, (u16, Value)>>>,
    /// Files served at particular paths (`file`): their content type and bytes.
    pub files: Arc<std::sync::Mutex<HashMap<String, (String, Vec<u8>)>>>,
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

impl FakeServer {
    /// Starts it answering `status` with a JSON body after `delay_ms`.
    pub async fn start(status: u16, delay_ms: u64) -> FakeServer {
        let behaviour = Arc::new(std::sync::Mutex::new((status, delay_ms)));
        let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
        let answers = Arc::new(std::sync::Mutex::new(HashMap::new()));
        let files = Arc::new(std::sync::Mutex::new(HashMap::new()));
        let (b, r, a, f) = (behaviour.clone(), requests.clone(), answers.clone(), files.clone());
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let (b, r, a, f) = (b.clone(), r.clone(), a.clone(), f.clone());
            async move {
                use axum::response::IntoResponse;
                let (parts, body) = req.into_parts();
                let body = axum::body::to_bytes(body, 16 * 1024 * 1024).await.unwrap().to_vec();
                let path = parts.uri.path().to_string();
                let n = {
                    let mut seen = r.lock().unwrap();
                    seen.push(Recorded { path: path.clone(), headers: parts.headers, body });
                    seen.len()
                };
                let (status, delay) = *b.lock().unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
                if let Some((content_type, bytes)) = f.lock().unwrap().get(&path).cloned() {
                    return ([(axum::http::header::CONTENT_TYPE, content_type)], bytes).into_response();
                }
                if let Some((status, payload)) = a.lock().unwrap().get(&path).cloned() {
                    return (axum::http::StatusCode::from_u16(status).unwrap(), axum::Json(payload)).into_response();
                }
                // Provider-shaped answers with an id per request (`SM<n>`, `wamid.<n>`, n counting from 1);
                // Stripe's Checkout Sessions and refunds by their paths.
                let payload = match path.as_str() {
                    "/v1/checkout/sessions" => serde_json::json!({"id": format!("cs_test_{n}"), "object": "checkout.session", "url": format!("https://checkout.stripe.test/c/pay/cs_test_{n}"), "error": {"message": "fake says no"}}),
                    "/v1/refunds" => serde_json::json!({"id": format!("re_test_{n}"), "object": "refund", "status": "succeeded", "error": {"message": "fake says no"}}),
                    _ => serde_json::json!({"sid": format!("SM{n}"), "messages": [{"id": format!("wamid.{n}")}], "message": "fake says no", "error": {"message": "fake says no"}}),
                };
                (axum::http::StatusCode::from_u16(status).unwrap(), axum::Json(payload)).into_response()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeServer { url, behaviour, requests, answers, files }
    }

    /// Serves `bytes` as `content_type` at `path` from now on (a file a provider keeps).
    pub fn file(&self, path: &str, content_type: &str, bytes: &[u8]) {
        self.files.lock().unwrap().insert(path.to_string(), (content_type.to_string(), bytes.to_vec()));
    }

    /// Answers requests to `path` with `status` and `payload` from now on.
    pub fn answer(&self, path: &str, status: u16, payload: Value) {
        self.answers.lock().unwrap().insert(path.to_string(), (status, payload));
    }

    pub fn set(&self, status: u16, delay_ms: u64) {
        *self.behaviour.lock().unwrap() = (status, delay_ms);
    }

    pub fn received(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

/// (channel, state, error) of each attempt of a message record (the error empty when there is none).
pub fn tries(m: &Value) -> Vec<(String, String, String)> {
    m["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let text = |k: &str| a[k].as_str().unwrap_or("").to_string();
            (text("channel"), text("state"), text("error"))
        })
        .collect()
}

/// An attempt as [`tries`] gives it.
pub fn t(channel: &str, state: &str, error: &str) -> (String, String, String) {
    (channel.to_string(), state.to_string(), error.to_string())
}

/// (channel, state) of each attempt of a message record.
pub fn attempts(m: &Value) -> Vec<(String, String)> {
    m["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["channel"].as_str().unwrap().to_string(), a["state"].as_str().unwrap().to_string()))
        .collect()
}
