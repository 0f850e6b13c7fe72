//! The Python (componentize-py) and JavaScript (ComponentizeJS) sample bots of `flows/python-signup` and
//! `flows/js-signup` over the HTTP API, as a partner and a user would use them: upload the component, invite,
//! start, an invalid then a valid submission, completion; and a chat session with a menu. Also: a big
//! interpreter component compiling does not hold up another bot's answers.
//!
//! `bash flows/build.sh` builds the components (it installs the toolchains into the flows' folders).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Resp, TestApp, wasm};

const PHONE: &str = "+15551230000";

/// These tests compile interpreter components of 12–19 MB: in the debug build, 15–35 s each on this
/// machine's two cores. Run together, four compilations share the cores and each took over the hosts'
/// 60 s request timeout on CI. So they take turns (the other runtime tests still run beside them), and
/// their hosts allow an upload (and its compiler process) more time than a release host needs (5–6 s, docs/performance.md).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const UPLOAD_TIMEOUT_MS: u64 = 300_000;

async fn create_bot(app: &TestApp, key: &str, code: &str) {
    app.post(key, "/api/v1/bots", json!({"code": code, "name": format!("{code} bot"), "runtime_mode": "local"}))
        .await
        .ok(201);
}

/// A user linked to the partner, logged in; returns the token.
async fn user(app: &TestApp, key: &str, phone: &str) -> String {
    app.post(key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    app.login(phone).await
}

/// The signup flow of `flows/{sample}` end to end, and its chat.
async fn signup_flow_over_http(sample: &str, title: &str) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = TestApp::start_with(|c| {
        c.request_timeout_ms = UPLOAD_TIMEOUT_MS;
        c.bot_compile_timeout_ms = UPLOAD_TIMEOUT_MS;
    })
    .await;
    let key = app.partner("acme").await;
    create_bot(&app, &key, "signup").await;
    let bytes = wasm(sample);
    let r = app.upload_component(&key, "signup", &bytes).await;
    let component = r.ok(200)["component"].clone();
    assert_eq!(component["size"], bytes.len());
    assert_eq!(component["flows"], json!([{"code": "signup", "title": title}]));
    let token = user(&app, &key, PHONE).await;

    let r = app.post(&key, "/api/v1/bots/signup/flows/signup/invite", json!({"phone": PHONE})).await;
    let reference = r.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
    let path = |p: &str| format!("/api/v1/me/flows/{reference}/{p}");
    let r = app.post(&token, &path("start"), json!({})).await;
    let started = r.ok(200).clone();
    assert_eq!(started["state"], "in_progress");
    assert_eq!(started["steps"][0]["type"], "flow_screen", "{started}");
    let screen = &started["steps"][0]["screen"];
    assert_eq!(
        (&screen["id"], &screen["kind"], &screen["title"]),
        (&json!("details"), &json!("form"), &json!("Your details"))
    );
    let fields = screen["fields"].as_array().unwrap();
    let keys: Vec<&str> = fields.iter().map(|f| f["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["name", "email", "plan", "newsletter"]);
    assert_eq!(fields[0]["placeholder"], "Ana");
    assert_eq!(fields[2]["options"], json!([{"id": "free", "label": "Free"}, {"id": "pro", "label": "Pro"}]));
    assert_eq!(fields[3]["required"], false);

    // Invalid values: 422 with a message per field (the host checks them before the guest sees them).
    let bad = json!({"name": "", "email": "ana@", "plan": "gold"});
    let r = app.post(&token, &path("submit"), json!({"screen": "details", "values": bad})).await;
    r.error(422, "validation");
    let errors = r.json["error"]["fields"].as_object().unwrap();
    for field in ["name", "email", "plan"] {
        assert!(errors.contains_key(field), "{field} not reported: {errors:?}");
    }
    // Valid: completed, the summary echoing the typed values the guest got.
    let good = json!({"name": "Ana", "email": "ana@example.com", "plan": "pro", "newsletter": "yes"});
    let r = app.post(&token, &path("submit"), json!({"screen": "details", "values": good})).await;
    let done = r.ok(200).clone();
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["steps"][0]["type"], "flow_completed");
    assert_eq!(done["summary"]["name"], "Ana");
    assert_eq!(done["summary"]["email"], "ana@example.com");
    assert_eq!(done["summary"]["plan"], "pro");
    assert_eq!(done["summary"]["newsletter"], true);
    app.post(&token, &path("submit"), json!({"screen": "details", "values": good})).await.error(409, "conflict");

    // The chat: a menu, a pick answered with a message and the menu again.
    let r = app.post(&token, "/api/v1/me/bots/signup/sessions", json!({})).await;
    let session = r.ok(201)["session"].as_str().unwrap().to_string();
    let menu = r.json["steps"][0].clone();
    assert_eq!(menu["type"], "menu", "{menu}");
    assert_eq!(menu["style"], "button");
    let r = app
        .post(
            &token,
            &format!("/api/v1/me/bots/signup/sessions/{session}/events"),
            json!({"type": "select", "id": "plans"}),
        )
        .await;
    let steps = r.ok(200)["steps"].clone();
    assert_eq!(steps[0]["type"], "message", "{steps}");
    assert!(steps[0]["text"].as_str().unwrap().contains("Pro"), "{steps}");
    assert_eq!(steps[1]["type"], "menu");
}

#[tokio::test]
async fn python_signup_flow_over_http() {
    signup_flow_over_http("python-signup", "Sign up (Python)").await;
}

#[tokio::test]
async fn javascript_signup_flow_over_http() {
    signup_flow_over_http("js-signup", "Sign up (JavaScript)").await;
}

/// A componentize-py component (~18 MB) takes seconds to compile: the compilation runs on a blocking thread
/// under the compiler semaphore, so another bot keeps answering meanwhile, and a second upload finds the
/// only compiler busy (503) instead of queueing behind it.
#[tokio::test]
async fn another_bot_answers_while_a_big_upload_compiles() {
    let _turn = ONE_AT_A_TIME.lock().await;
    // A cache directory of its own, so the upload really compiles.
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().to_path_buf();
    let app = TestApp::start_with(move |c| {
        c.component_cache_dir = dir;
        c.bot_compile_concurrency = 1;
        c.request_timeout_ms = UPLOAD_TIMEOUT_MS;
        c.bot_compile_timeout_ms = UPLOAD_TIMEOUT_MS;
    })
    .await;
    let key = app.partner("acme").await;
    create_bot(&app, &key, "signup").await;
    create_bot(&app, &key, "big").await;
    create_bot(&app, &key, "other").await;
    app.upload_component(&key, "signup", &wasm("signup")).await.ok(200);
    let token = user(&app, &key, PHONE).await;
    let big = wasm("python-signup");

    let uploading = tokio::spawn({
        let (client, base, key) = (app.client.clone(), app.base.clone(), key.clone());
        async move {
            let started = Instant::now();
            let r = client
                .put(format!("{base}/api/v1/bots/big/component"))
                .bearer_auth(&key)
                .header("content-type", "application/wasm")
                .body(big)
                .send()
                .await
                .unwrap();
            (Resp::from(r).await, started.elapsed())
        }
    });
    // Wait until the compiler is taken (the upload is streamed, hashed, then compiled).
    let deadline = Instant::now() + Duration::from_secs(20);
    while app.state.runtime.free_compilers() > 0 {
        assert!(Instant::now() < deadline, "the upload never started compiling");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A second upload is refused at once rather than waiting for the compiler.
    app.upload_component(&key, "other", &wasm("js-signup")).await.error(503, "unavailable");

    // The Rust signup bot answers whole flows while the big component compiles.
    let mut slowest = Duration::ZERO;
    let mut flows = 0;
    while !uploading.is_finished() {
        let r = app.post(&key, "/api/v1/bots/signup/flows/signup/invite", json!({"phone": PHONE})).await;
        let reference = r.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
        let begun = Instant::now();
        let r = app.post(&token, &format!("/api/v1/me/flows/{reference}/start"), json!({})).await;
        slowest = slowest.max(begun.elapsed());
        assert_eq!(r.ok(200)["steps"][0]["type"], "flow_screen");
        flows += 1;
    }
    let (r, took) = uploading.await.unwrap();
    assert_eq!(r.ok(200)["component"]["flows"][0]["code"], "signup");
    eprintln!("python-signup compiled in {took:?}; meanwhile {flows} starts of another bot, the slowest {slowest:?}");
    assert!(flows >= 3, "{flows} starts ran during the compilation ({took:?})");
    // Not held up by the compilation (bounded by it, not by a fixed time: the suite runs tests in parallel).
    assert!(slowest * 3 < took, "a start took {slowest:?} while the upload compiled for {took:?}");
}

/// The figures of docs/performance.md ("Bots in other languages"), on the build it runs in:
/// `cargo test -p hubbub-host --test runtime langs::figures -- --ignored --nocapture` (add `--release` for
/// release figures). Per component: size, compile (upload) time, load of its precompiled artifact, a step
/// through the runtime (fresh store, instantiate, `start`), and a chat event over HTTP, p50 / p99.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement, run on demand"]
async fn figures() {
    use hubbub_host::runtime::{Entry, GuestContext, Runtime, RuntimeLimits};

    const STEPS: usize = 400;
    let pct = |mut times: Vec<Duration>| {
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!("p50 {:.2} ms, p99 {:.2} ms", ms(times[times.len() / 2]), ms(times[times.len() * 99 / 100]))
    };
    // (component, the flow its `start` step runs, the chat bot and event measured over HTTP)
    let samples = [
        ("signup", "chat", json!({"type": "text", "text": "hello"})),
        ("python-signup", "python-signup", json!({"type": "select", "id": "plans"})),
        ("js-signup", "js-signup", json!({"type": "select", "id": "plans"})),
    ];
    for (name, chat, event) in samples {
        let bytes = wasm(name);
        let dir = tempfile::tempdir().unwrap();
        let runtime = Runtime::new(RuntimeLimits::default(), dir.path().into()).unwrap();
        let started = Instant::now();
        let loaded = runtime.load(&bytes).await.unwrap();
        let compile = started.elapsed();
        let restarted = Runtime::new(RuntimeLimits::default(), dir.path().into()).unwrap();
        let started = Instant::now();
        assert!(restarted.load(&bytes).await.unwrap().from_cache);
        let artifact = started.elapsed();
        let ctx = GuestContext { partner: "acme".into(), bot: "bench".into(), phone: "+31612345678".into() };
        let mut steps = Vec::with_capacity(STEPS);
        for i in 0..STEPS + 20 {
            let started = Instant::now();
            runtime.start(&loaded.digest, "bench", Entry::Flow("signup".into()), ctx.clone()).await.unwrap();
            if i >= 20 {
                steps.push(started.elapsed());
            }
        }

        // Over HTTP: one chat session, events one after another.
        let app = TestApp::start().await;
        let key = app.partner("acme").await;
        create_bot(&app, &key, chat).await;
        app.upload_component(&key, chat, &wasm(chat)).await.ok(200);
        let token = user(&app, &key, PHONE).await;
        let r = app.post(&token, &format!("/api/v1/me/bots/{chat}/sessions"), json!({})).await;
        let session = r.ok(201)["session"].as_str().unwrap().to_string();
        let path = format!("/api/v1/me/bots/{chat}/sessions/{session}/events");
        let mut http = Vec::with_capacity(STEPS);
        for i in 0..STEPS + 20 {
            let started = Instant::now();
            app.post(&token, &path, event.clone()).await.ok(200);
            if i >= 20 {
                http.push(started.elapsed());
            }
        }
        app.stop().await;
        println!(
            "{name}: {} bytes; compile {:.2} s; artifact load {:.1} ms; runtime step {}; HTTP chat event ({chat}) {}",
            bytes.len(),
            compile.as_secs_f64(),
            artifact.as_secs_f64() * 1e3,
            pct(steps),
            pct(http)
        );
    }
}

/// `result::err` from each toolchain: a Python `raise Err(…)` and a JavaScript `throw` reach the host as
/// the bot's error message; an event the flow does not expect too.
#[tokio::test]
async fn errors_of_python_and_javascript_guests_reach_the_host() {
    use hubbub_host::runtime::{Entry, GuestContext, GuestEvent, Runtime, RuntimeError, RuntimeLimits};

    let _turn = ONE_AT_A_TIME.lock().await;
    // The test hosts' cache directory (tests/api/common.rs): the artifacts of the tests above are reused.
    let dir = std::env::temp_dir().join("hubbub-test-components");
    let runtime = Runtime::new(RuntimeLimits::default(), dir).unwrap();
    let ctx = GuestContext { partner: "acme".into(), bot: "demo".into(), phone: "+31612345678".into() };
    for name in ["python-signup", "js-signup"] {
        let loaded = runtime.load(&wasm(name)).await.unwrap();
        let r = runtime.start(&loaded.digest, "demo", Entry::Flow("nope".into()), ctx.clone()).await;
        assert_eq!(r, Err(RuntimeError::Guest("unknown flow nope".into())), "{name}");
        let started = runtime.start(&loaded.digest, "demo", Entry::Flow("signup".into()), ctx.clone()).await.unwrap();
        let text = GuestEvent::Text("hello".into());
        let r = runtime.handle(&loaded.digest, "demo", started.state, text, ctx.clone()).await;
        assert_eq!(r, Err(RuntimeError::Guest("expected the details screen".into())), "{name}");
    }
}
