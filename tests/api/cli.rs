//! The `hubbub` binary's operator commands and its graceful shutdown.

use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::common::{TestApp, TestDb, spawn_server};

/// Runs `hubbub ARGS…` against a database and waits for it.
pub fn hubbub(database_url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hubbub"))
        .args(args)
        .env("HUBBUB_DATABASE_URL", database_url)
        .env("HUBBUB_JWT_SECRET", crate::common::TEST_JWT_SECRET)
        .env("HUBBUB_SECRET_KEY", crate::common::TEST_SECRET_KEY)
        .env_remove("HUBBUB_DEV")
        .output()
        .expect("hubbub runs")
}

#[tokio::test]
async fn partner_create_prints_a_working_key_once_and_rotation_revokes_the_old_one() {
    let app = TestApp::start().await;
    let out = hubbub(&app.db.url, &["partner", "create", "--code", "acme", "--name", "Acme Corp"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["partner"], "acme");
    let key = line["api_key"].as_str().unwrap().to_string();
    assert!(key.starts_with("sk_"));
    app.get(&key, "/api/v1/messages").await.ok(200);
    // Only the digest is stored.
    let stored: String = sqlx::query_scalar("SELECT key_hash FROM partners WHERE code = 'acme'")
        .fetch_one(app.state.db.reader())
        .await
        .unwrap();
    assert_ne!(stored, key);
    assert!(!stored.contains(&key[3..]));
    // Duplicate code fails cleanly.
    let dup = hubbub(&app.db.url, &["partner", "create", "--code", "acme", "--name", "Again"]);
    assert!(!dup.status.success());
    let bad = hubbub(&app.db.url, &["partner", "create", "--code", "Not Valid", "--name", "x"]);
    assert!(!bad.status.success());

    let out = hubbub(&app.db.url, &["partner", "rotate-key", "--code", "acme"]);
    assert!(out.status.success());
    let new_key = serde_json::from_slice::<Value>(&out.stdout).unwrap()["api_key"].as_str().unwrap().to_string();
    assert_ne!(new_key, key);
    app.get(&key, "/api/v1/messages").await.error(401, "unauthorized");
    app.get(&new_key, "/api/v1/messages").await.ok(200);
    assert!(!hubbub(&app.db.url, &["partner", "rotate-key", "--code", "nobody"]).status.success());
}

#[tokio::test]
async fn user_token_prints_a_verifiable_jwt() {
    let db = TestDb::new().await;
    let app = TestApp::start_on(std::sync::Arc::new(db), |_| {}).await;
    let out = hubbub(&app.db.url, &["user", "token", "+15551230000"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(token.split('.').count(), 3);
    let claims = hubbub_host::http::auth::verify_user_token(&app.state, &token).expect("valid for the same secret");
    assert_eq!(claims.sub, "+15551230000");
    assert!(claims.dev.is_none());
    assert!(!hubbub(&app.db.url, &["user", "token", "5551230000"]).status.success());
}

// Multi-threaded: the test waits on the `hubbub` process while the fake Twilio it asks serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sets_a_partners_own_sender_with_its_secrets_from_the_environment() {
    let app = TestApp::start().await;
    app.partner("acme").await;
    let sid = "AC0123456789abcdef0123456789abcdef";
    // Twilio shows the account's numbers to its credentials: the sender is asked about before it is kept.
    let twilio = crate::common::FakeServer::start(200, 0).await;
    let numbers = serde_json::json!({"incoming_phone_numbers": [{"phone_number": "+15550002222"}]});
    twilio.answer(&format!("/2010-04-01/Accounts/{sid}/IncomingPhoneNumbers.json"), 200, numbers);
    let set = |extra: &[&str], token: Option<&str>| {
        let mut args = vec!["partner", "set-sender", "--code", "acme", "--channel", "sms", "--account-sid", sid];
        args.extend_from_slice(extra);
        let mut command = Command::new(env!("CARGO_BIN_EXE_hubbub"));
        command
            .args(&args)
            .env("HUBBUB_DATABASE_URL", &app.db.url)
            .env("HUBBUB_JWT_SECRET", crate::common::TEST_JWT_SECRET)
            .env("HUBBUB_SECRET_KEY", crate::common::TEST_SECRET_KEY)
            .env("HUBBUB_TWILIO_BASE_URL", &twilio.url)
            .env_remove("HUBBUB_DEV");
        match token {
            Some(token) => command.env("HUBBUB_SENDER_AUTH_TOKEN", token),
            None => command.env_remove("HUBBUB_SENDER_AUTH_TOKEN"),
        };
        command.output().expect("hubbub runs")
    };
    let missing = set(&["--from", "+15550002222"], None);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--auth-token"), "{missing:?}");
    let bad = set(&["--from", "2222"], Some("tw-secret-token"));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--from"), "{bad:?}");
    // A number the account does not hold is refused.
    let not_held = set(&["--from", "+15550003333"], Some("tw-secret-token"));
    assert!(!not_held.status.success());
    assert!(String::from_utf8_lossy(&not_held.stderr).contains("has no number +15550003333"), "{not_held:?}");
    let out = set(&["--from", "+15550002222"], Some("tw-secret-token"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((shown["address"].as_str(), shown["token_prefix"].as_str()), (Some("+15550002222"), Some("tw-sec…")));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("tw-secret-token"));
    // The API sees it; the CLI lists it and removes it.
    let acme = hubbub(&app.db.url, &["partner", "senders", "--code", "acme"]);
    let listed: Value = serde_json::from_slice(&acme.stdout).unwrap();
    assert_eq!(listed["account"], sid);
    let partner = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap();
    let sms = hubbub_host::names::Channel::Sms;
    let sender = hubbub_host::store::senders::of_partner(&app.state.db, partner.id, sms).await;
    assert_eq!(sender.unwrap().map(|s| s.token).as_deref(), Some("tw-secret-token"));
    assert!(hubbub(&app.db.url, &["partner", "remove-sender", "--code", "acme", "--channel", "sms"]).status.success());
    assert!(!hubbub(&app.db.url, &["partner", "remove-sender", "--code", "acme", "--channel", "sms"]).status.success());
}

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["serve", "--help"],
        vec!["partner", "create", "--help"],
        vec!["partner", "rotate-key", "--help"],
        vec!["partner", "create-key", "--help"],
        vec!["partner", "keys", "--help"],
        vec!["partner", "revoke-key", "--help"],
        vec!["partner", "set-sender", "--help"],
        vec!["partner", "senders", "--help"],
        vec!["partner", "remove-sender", "--help"],
        vec!["user", "token", "--help"],
        vec!["template", "review", "--help"],
        vec!["template", "pending", "--help"],
        vec!["secrets", "rotate-key", "--help"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_hubbub")).args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("Usage"), "{args:?}: {text}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_hubbub")).args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for var in [
        "HUBBUB_DATABASE_URL",
        "HUBBUB_LISTEN",
        "HUBBUB_DEV",
        "HUBBUB_JWT_SECRET",
        "HUBBUB_OFFLINE_AFTER_S",
        "HUBBUB_TEMPLATE_REVIEW",
    ] {
        assert!(text.contains(var), "{var} missing from serve --help");
    }
}

/// The README's configuration table is the reference an operator reads: it names every setting `hubbub serve
/// --help` names (global ones included), and nothing else.
#[test]
fn every_setting_is_in_the_readme_table() {
    let vars_in = |text: &str, marker: &str| -> BTreeSet<String> {
        text.match_indices(marker)
            .map(|(at, _)| &text[at + marker.len()..])
            .map(|rest| {
                rest.chars().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_').collect()
            })
            .map(|name: String| format!("HUBBUB_{name}"))
            .collect()
    };
    let mut help = String::new();
    for args in [vec!["--help"], vec!["serve", "--help"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_hubbub")).args(&args).output().unwrap();
        help.push_str(&String::from_utf8(out.stdout).unwrap());
    }
    let settings = vars_in(&help, "[env: HUBBUB_");
    assert!(settings.len() > 40, "{settings:?}");
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let table: String = readme
        .lines()
        .filter(|l| l.starts_with("| `HUBBUB_"))
        .map(|l| l.split(" | ").next().unwrap().to_string() + "\n")
        .collect();
    let documented = vars_in(&table, "`HUBBUB_");
    let missing: Vec<_> = settings.difference(&documented).collect();
    assert!(missing.is_empty(), "settings missing from the README's table: {missing:?}");
    let unknown: Vec<_> = documented.difference(&settings).collect();
    assert!(unknown.is_empty(), "the README's table names settings that do not exist: {unknown:?}");
}

/// `hubbub serve` answers, and on SIGTERM finishes and exits cleanly.
#[tokio::test]
async fn serve_runs_and_shuts_down_gracefully_on_sigterm() {
    let db = TestDb::new().await;
    let create = hubbub(&db.url, &["partner", "create", "--code", "acme", "--name", "Acme"]);
    let key = serde_json::from_slice::<Value>(&create.stdout).unwrap()["api_key"].as_str().unwrap().to_string();
    let (mut child, port) = spawn_server(&db.url, &[]).await;
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/v1/messages");
    let mut up = false;
    for _ in 0..100 {
        if let Ok(r) = client
            .post(&url)
            .bearer_auth(&key)
            .json(&serde_json::json!({"phone": "+15551230000", "body": "hi"}))
            .send()
            .await
        {
            assert_eq!(r.status(), 201);
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "server did not come up");
    // SIGTERM: the process stops and exits with success.
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut exited = None;
    for _ in 0..100 {
        if let Some(status) = child.try_wait().unwrap() {
            exited = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = exited.expect("exits after SIGTERM");
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn a_config_file_sits_under_the_environment_and_secrets_come_from_files() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = dir.path().join("hubbub.toml");
    std::fs::write(
        &config,
        format!(
            "database_url = {:?}\nlisten = \"127.0.0.1:1\"\ndev = true\nwebhook_backoff_s = [1, 2]\nlog = \"warn\"\n",
            db.url
        ),
    )
    .unwrap();
    let secret_file = dir.path().join("jwt");
    std::fs::write(&secret_file, "a-jwt-secret-read-from-a-file-0123456789\n").unwrap();
    let hubbub = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hubbub"));
        command
            .args(args)
            .arg("--config")
            .arg(&config)
            .env_remove("HUBBUB_DATABASE_URL")
            .env_remove("HUBBUB_JWT_SECRET")
            .env("HUBBUB_JWT_SECRET_FILE", &secret_file)
            .env("HUBBUB_SECRET_KEY", crate::common::TEST_SECRET_KEY);
        command
    };
    // The environment wins over the file (the file's listen address is unusable).
    let mut server = hubbub(&["serve"])
        .env("HUBBUB_LISTEN", format!("127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..200 {
        if reqwest::get(format!("{base}/healthz")).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "the host serves on the environment's address");
    // The JWT secret came from its file: a token the CLI signs with the same layers is accepted.
    let token = hubbub(&["user", "token", "+15551230000"]).output().unwrap();
    assert!(token.status.success(), "{}", String::from_utf8_lossy(&token.stderr));
    let token = String::from_utf8(token.stdout).unwrap();
    let me = reqwest::Client::new()
        .get(format!("{base}/api/v1/me/messages"))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);
    server.kill().unwrap();
    let _ = server.wait();

    // The file's settings are the defaults `--help` shows.
    let help = hubbub(&["serve", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("[default: 1,2]") && help.contains("HUBBUB_LOG_FORMAT"), "{help}");
    // Mistakes are refused with what is wrong.
    std::fs::write(&config, "listn = \"127.0.0.1:8080\"\n").unwrap();
    let bad = hubbub(&["serve"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown setting \"listn\""), "{bad:?}");
    std::fs::write(&config, "").unwrap();
    let both = hubbub(&["user", "token", "+15551230000"]).env("HUBBUB_JWT_SECRET", "x".repeat(40)).output().unwrap();
    assert!(String::from_utf8_lossy(&both.stderr).contains("HUBBUB_JWT_SECRET_FILE"), "{both:?}");
}

#[tokio::test]
async fn bot_cli_uploads_invites_and_walks_a_flow_in_the_terminal() {
    let app = TestApp::start().await;
    let key = app.partner_with("acme", true).await;
    let env = [("HUBBUB_API_URL", app.base.as_str()), ("HUBBUB_API_KEY", key.as_str())];
    let wasm = format!("{}/../target/wasm32-wasip2/release/signup.wasm", env!("CARGO_MANIFEST_DIR"));

    // The first upload creates the bot; the component's flows are printed.
    let uploaded: Value =
        serde_json::from_str(&crate::common::hubbub_with_input(&["bot", "upload", "signup", &wasm], &env, "").await)
            .unwrap();
    assert_eq!(uploaded["flows"][0]["code"], "signup");
    assert_eq!(app.get(&key, "/api/v1/bots/signup").await.ok(200)["bot"]["runtime_mode"], "local");

    let invited: Value = serde_json::from_str(
        &crate::common::hubbub_with_input(&["bot", "invite", "signup", "signup", "+15551234567"], &env, "").await,
    )
    .unwrap();
    assert!(invited["ref"].as_str().unwrap().starts_with("flow_"), "{invited}");

    // Walking the flow as a user (logged in through the dev sink): the host refuses the bad answers, the
    // walk asks for those again, and the flow completes.
    let answers = [
        "",
        "ana@",
        "555",
        "",
        "",
        "", // name (required), e-mail, phone, birthday, plan (required), newsletter
        "Ana",
        "ana@example.com",
        "+15551230000",
        "2", // the refused ones, again
    ]
    .join("\n")
        + "\n";
    let walked = crate::common::hubbub_with_input(
        &["bot", "try", "signup", "signup", "--phone", "+15557654321"],
        &env,
        &answers,
    )
    .await;
    assert!(walked.contains("== Your details =="), "{walked}");
    assert!(
        walked.contains("The host refused some answers") && walked.contains("! not a valid e-mail address"),
        "{walked}"
    );
    assert!(walked.contains("Completed.") && walked.contains("name: Ana") && walked.contains("plan: pro"), "{walked}");
    app.stop().await;
}

/// Runs cargo (the one running these tests) in `dir` with the workspace's target folder, so what the suite
/// already built is reused.
fn cargo(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", concat!(env!("CARGO_MANIFEST_DIR"), "/../target"))
        .output()
        .expect("cargo runs")
}

#[tokio::test]
async fn bot_new_scaffolds_a_rust_bot_whose_test_passes_and_whose_flow_completes_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let new = Command::new(env!("CARGO_BIN_EXE_hubbub"))
        .args(["bot", "new", "hello-bot", "--lang", "rust", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(new.status.success(), "{}", String::from_utf8_lossy(&new.stderr));
    let bot = dir.path().join("hello-bot");
    for file in ["Cargo.toml", "src/lib.rs", "tests/hello.rs", "README.md"] {
        assert!(bot.join(file).is_file(), "{file}");
    }
    // The same dependency versions as this workspace (nothing new to fetch or build).
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"), bot.join("Cargo.lock")).unwrap();
    let again = Command::new(env!("CARGO_BIN_EXE_hubbub"))
        .args(["bot", "new", "hello-bot", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("already exists"));

    // Its own test passes natively, with the host's validation.
    let test = cargo(&bot, &["test", "--quiet"]);
    assert!(
        test.status.success(),
        "{}{}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
    // It builds into a component that a host runs: uploaded and walked through the API.
    let build = cargo(&bot, &["build", "--target", "wasm32-wasip2", "--release", "--quiet"]);
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
    let wasm = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/wasm32-wasip2/release/hello_bot.wasm");
    let app = TestApp::start().await;
    let key = app.partner_with("acme", true).await;
    let env = [("HUBBUB_API_URL", app.base.as_str()), ("HUBBUB_API_KEY", key.as_str())];
    crate::common::hubbub_with_input(&["bot", "upload", "hello-bot", wasm], &env, "").await;
    let walked = crate::common::hubbub_with_input(&["bot", "try", "hello-bot", "hello"], &env, "\n1\nAna\n").await;
    assert!(walked.contains("Welcome!") && walked.contains("! is required"), "{walked}");
    assert!(
        walked.contains("Completed.") && walked.contains("name: Ana") && walked.contains("source: friend"),
        "{walked}"
    );
    app.stop().await;
}

/// The tools `flows/build.sh` installed for the Python and JavaScript samples.
const LANGS_TOOLS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/langs-tools");

#[tokio::test]
async fn bot_new_scaffolds_python_and_javascript_bots_whose_flows_complete_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let app = TestApp::start().await;
    let key = app.partner_with("acme", true).await;
    let env = [("HUBBUB_API_URL", app.base.as_str()), ("HUBBUB_API_KEY", key.as_str())];
    let builds: [(&str, &str, Vec<String>); 2] = [
        (
            "hello-py",
            "python",
            ["-d", "wit", "-w", "bot", "componentize", "-p", ".", "app", "-o", "hello-py.wasm"]
                .map(String::from)
                .to_vec(),
        ),
        (
            "hello-js",
            "js",
            [
                "bot.js",
                "--wit",
                "wit",
                "--world-name",
                "bot",
                "--disable",
                "http",
                "fetch-event",
                "-o",
                "hello-js.wasm",
            ]
            .map(String::from)
            .to_vec(),
        ),
    ];
    for (name, lang, args) in builds {
        let new = Command::new(env!("CARGO_BIN_EXE_hubbub"))
            .args(["bot", "new", name, "--lang", lang, "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(new.status.success(), "{}", String::from_utf8_lossy(&new.stderr));
        let bot = dir.path().join(name);
        assert!(bot.join("wit/bot.wit").is_file() && bot.join("README.md").is_file(), "{name}");
        // Built with the toolchain its README names (installed once by flows/build.sh).
        let tool = match lang {
            "python" => format!("{LANGS_TOOLS}/python/bin/componentize-py"),
            _ => format!("{LANGS_TOOLS}/node/node_modules/.bin/componentize-js"),
        };
        let built = Command::new(&tool).args(&args).current_dir(&bot).output().unwrap();
        assert!(built.status.success(), "{name}: {}", String::from_utf8_lossy(&built.stderr));
        let wasm = bot.join(format!("{name}.wasm"));
        crate::common::hubbub_with_input(&["bot", "upload", name, wasm.to_str().unwrap()], &env, "").await;
        let walked = crate::common::hubbub_with_input(&["bot", "try", name, "hello"], &env, "\n2\nAna\n").await;
        assert!(walked.contains("Welcome!") && walked.contains("! is required"), "{name}: {walked}");
        assert!(
            walked.contains("Completed.") && walked.contains("name: Ana") && walked.contains("source: web"),
            "{name}: {walked}"
        );
    }
    app.stop().await;
}
