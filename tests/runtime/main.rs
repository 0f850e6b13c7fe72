//! The bot runtime against real components: the sample bots of `flows/` and the hostile
//! `tests/guests/evil`. Build them first with `bash flows/build.sh`.
//!
//! The components are compiled once per test process (one shared [`Runtime`]); their artifacts stay in
//! `target/tmp/runtime-artifacts`, so later runs compile nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hubbub_host::forms::{self, FieldDef};
use hubbub_host::runtime::{
    Entry, FlowInfo, GuestContext, GuestEvent, GuestReply, LoadedComponent, Runtime, RuntimeError, RuntimeLimits,
    SlotLimits,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

/// The HTTP test harness of tests/api, for the other languages' samples over the API.
#[path = "../api/common.rs"]
#[allow(dead_code)]
mod common;
mod langs;

/// The shared runtime with every test component loaded.
struct Loaded {
    runtime: Runtime,
    signup: LoadedComponent,
    shop: LoadedComponent,
    chat: LoadedComponent,
    evil: LoadedComponent,
}

static LOADED: OnceCell<Loaded> = OnceCell::const_new();

/// A runtime with `limits` on the shared artifacts (`target/tmp/runtime-artifacts`): what it loads was
/// compiled once, by whichever test came first.
fn runtime_with(limits: RuntimeLimits) -> Runtime {
    Runtime::new(limits, Path::new(env!("CARGO_TARGET_TMPDIR")).join("runtime-artifacts")).expect("runtime")
}

async fn loaded() -> &'static Loaded {
    LOADED
        .get_or_init(|| async {
            // `RUST_LOG=hubbub_host=debug,hubbub::guest=debug` shows the runtime's and the guests' logs.
            let filter = tracing_subscriber::EnvFilter::from_default_env();
            let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
            let runtime = runtime_with(RuntimeLimits::default());
            let load = |name: &'static str| {
                let runtime = runtime.clone();
                async move {
                    runtime.load(&component(name)).await.unwrap_or_else(|e| panic!("{name}.wasm does not load: {e}"))
                }
            };
            Loaded {
                signup: load("signup").await,
                shop: load("shop").await,
                chat: load("chat").await,
                evil: load("evil").await,
                runtime,
            }
        })
        .await
}

fn wasm_path(name: &str) -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    target.join(format!("wasm32-wasip2/release/{name}.wasm"))
}

fn component(name: &str) -> Vec<u8> {
    let path = wasm_path(name);
    std::fs::read(&path).unwrap_or_else(|_| {
        panic!("{} is missing: build the test components first with `bash flows/build.sh`", path.display())
    })
}

fn ctx() -> GuestContext {
    GuestContext { partner: "acme".into(), bot: "demo".into(), phone: "+31612345678".into() }
}

fn flow(code: &str) -> Entry {
    Entry::Flow(code.into())
}

async fn start(component: &LoadedComponent, entry: Entry) -> Result<GuestReply, RuntimeError> {
    let runtime = &loaded().await.runtime;
    runtime.start(&component.digest, "demo", entry, ctx()).await
}

async fn handle(component: &LoadedComponent, state: &str, event: GuestEvent) -> Result<GuestReply, RuntimeError> {
    let runtime = &loaded().await.runtime;
    runtime.handle(&component.digest, "demo", state.into(), event, ctx()).await
}

/// The fields of a `flow_screen` step.
fn screen_fields(step: &Value) -> Vec<FieldDef> {
    assert_eq!(step["type"], "flow_screen", "{step}");
    serde_json::from_value(step["screen"]["fields"].clone()).expect("fields are FieldDef JSON")
}

/// A submission as the API builds it: validated and normalised against the screen's fields.
fn submit(step: &Value, values: Value) -> GuestEvent {
    let fields = screen_fields(step);
    let values = forms::validate(&fields, values.as_object().unwrap()).expect("valid values");
    GuestEvent::Submit { screen: step["screen"]["id"].as_str().unwrap().into(), values, fields }
}

fn select(id: &str) -> GuestEvent {
    GuestEvent::Select(id.into())
}

fn payment(id: &str, status: &str, reference: Option<&str>) -> GuestEvent {
    GuestEvent::Payment { id: id.into(), status: status.into(), reference: reference.map(str::to_string) }
}

fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hubbub_host::secrets::hex(&Sha256::digest(bytes)))
}

fn flow_info(code: &str, title: &str) -> FlowInfo {
    FlowInfo { code: code.into(), title: title.into() }
}

#[tokio::test]
async fn samples_load_with_their_digest_and_flows() {
    let loaded = loaded().await;
    for (name, sample, flows) in [
        ("signup", &loaded.signup, vec![flow_info("signup", "Sign up")]),
        ("shop", &loaded.shop, vec![flow_info("order", "Order a drink")]),
        ("chat", &loaded.chat, vec![]),
    ] {
        let bytes = component(name);
        assert_eq!(sample.digest, sha256_digest(&bytes), "{name}");
        assert_eq!(sample.size, bytes.len(), "{name}");
        assert_eq!(sample.flows, flows, "{name}");
        assert!(loaded.runtime.is_loaded(&sample.digest), "{name}");
    }
    assert_eq!(loaded.evil.flows.len(), 14);

    // Loading the same bytes again answers from memory.
    let again = loaded.runtime.load(&component("signup")).await.unwrap();
    assert!(again.from_cache);
    assert_eq!(again.digest, loaded.signup.digest);
}

#[tokio::test]
async fn signup_shows_details_and_completes_with_the_values() {
    let signup = &loaded().await.signup;
    let reply = start(signup, flow("signup")).await.unwrap();
    assert_eq!(reply.state, r#"{"submits":0}"#);
    assert_eq!(reply.steps.len(), 1);
    let screen = &reply.steps[0];
    assert_eq!(screen["screen"]["id"], "details");
    assert_eq!(screen["screen"]["kind"], "form");
    let fields = screen_fields(screen);
    let described: Vec<(&str, Value, bool)> =
        fields.iter().map(|f| (f.key.as_str(), serde_json::to_value(f.kind).unwrap(), f.required)).collect();
    assert_eq!(
        described,
        [
            ("name", json!("text"), true),
            ("email", json!("email"), true),
            ("phone", json!("phone"), true),
            ("birthday", json!("date"), false),
            ("plan", json!("select"), true),
            ("newsletter", json!("boolean"), false),
        ]
    );
    assert_eq!(screen["screen"]["fields"][2]["placeholder"], "+31612345678");
    assert_eq!(
        screen["screen"]["fields"][4]["options"],
        json!([{"id": "basic", "label": "Basic"}, {"id": "pro", "label": "Pro"}])
    );

    let values = json!({
        "name": "Ana Silva", "email": "ana@example.com", "phone": "+31612345678",
        "birthday": "1990-02-28", "plan": "pro", "newsletter": "yes"
    });
    let reply = handle(signup, &reply.state, submit(screen, values)).await.unwrap();
    assert_eq!(reply.state, r#"{"submits":1}"#);
    assert_eq!(
        reply.steps,
        [json!({"type": "flow_completed", "summary": {
            "name": "Ana Silva", "email": "ana@example.com", "phone": "+31612345678",
            "birthday": "1990-02-28", "plan": "pro", "newsletter": true
        }})]
    );
}

#[tokio::test]
async fn guest_errors_are_reported_as_guest_errors() {
    let signup = &loaded().await.signup;
    let error = start(signup, flow("nope")).await.unwrap_err();
    assert_eq!(error, RuntimeError::Guest("unknown flow nope".into()));
    let error = handle(signup, "not json", GuestEvent::Text("hi".into())).await.unwrap_err();
    assert!(matches!(error, RuntimeError::Guest(m) if m.starts_with("bad state for signup::SignupState")));
}

#[tokio::test]
async fn shop_order_goes_through_menus_form_and_payment() {
    let shop = &loaded().await.shop;
    let reply = start(shop, flow("order")).await.unwrap();
    assert_eq!(
        reply.steps,
        [json!({"type": "menu", "style": "button", "text": "What would you like?", "sections": [
            {"title": null, "items": [
                {"id": "coffee", "label": "Coffee", "description": null},
                {"id": "tea", "label": "Tea", "description": null}
            ]}
        ]})]
    );

    let reply = handle(shop, &reply.state, select("tea")).await.unwrap();
    let menu = &reply.steps[0];
    assert_eq!(menu["style"], "list");
    assert_eq!(menu["sections"][0]["title"], "Size");
    assert_eq!(menu["sections"][1]["title"], "Extras");

    let reply = handle(shop, &reply.state, select("milk")).await.unwrap();
    assert_eq!(reply.steps[0], json!({"type": "message", "text": "Milk it is."}));
    assert_eq!(reply.steps[1]["type"], "menu");

    let reply = handle(shop, &reply.state, select("large")).await.unwrap();
    let form = &reply.steps[0];
    assert_eq!(form["screen"]["id"], "delivery");
    let keys: Vec<String> = screen_fields(form).into_iter().map(|f| f.key).collect();
    assert_eq!(keys, ["address", "when", "notes"]);

    let values = json!({"address": "Dam 1, Amsterdam", "when": "2030-01-15"});
    let reply = handle(shop, &reply.state, submit(form, values)).await.unwrap();
    assert_eq!(
        reply.steps,
        [json!({"type": "payment", "payment": {
            "id": "order-tea-large-milk-1", "amount_minor": 400, "currency": "EUR",
            "description": "large tea with milk"
        }})]
    );

    let reply = handle(shop, &reply.state, payment("order-tea-large-milk-1", "declined", None)).await.unwrap();
    assert_eq!(reply.steps[0]["text"], "The payment was declined. Please try again.");
    assert_eq!(reply.steps[1]["payment"]["id"], "order-tea-large-milk-2");

    let reply =
        handle(shop, &reply.state, payment("order-tea-large-milk-2", "confirmed", Some("ref-123"))).await.unwrap();
    assert_eq!(reply.steps[0]["type"], "message");
    assert_eq!(
        reply.steps[1],
        json!({"type": "flow_completed", "summary": {
            "item": "tea", "size": "large", "extra": "milk", "address": "Dam 1, Amsterdam",
            "when": "2030-01-15", "reference": "ref-123"
        }})
    );
}

#[tokio::test]
async fn chat_answers_text_menu_picks_and_single_field_screens() {
    let chat = &loaded().await.chat;
    let reply = start(chat, Entry::Chat).await.unwrap();
    assert_eq!(reply.state, r#"{"events":0}"#);
    assert_eq!(reply.steps[0], json!({"type": "message", "text": "Hi! I'm the Hubbub assistant."}));
    let ids: Vec<&str> = reply.steps[1]["sections"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["help", "hours", "agent"]);

    let reply = handle(chat, &reply.state, GuestEvent::Text("hello".into())).await.unwrap();
    assert_eq!(reply.state, r#"{"events":1}"#);
    assert_eq!(reply.steps[0]["text"], "You said: hello");

    let reply = handle(chat, "", select("help")).await.unwrap();
    let topic = &reply.steps[1];
    assert_eq!(topic["screen"]["kind"], "select");
    let reply = handle(chat, "", submit(topic, json!({"topic": "orders"}))).await.unwrap();
    assert!(reply.steps[0]["text"].as_str().unwrap().starts_with("Orders:"));

    let reply = handle(chat, "", select("agent")).await.unwrap();
    let question = &reply.steps[1];
    assert_eq!(question["screen"]["kind"], "input");
    let reply = handle(chat, "", submit(question, json!({"question": "Where is my tea?"}))).await.unwrap();
    assert_eq!(reply.steps[0]["text"], "Thanks, an agent will get back to you about: Where is my tea?");

    let error = start(chat, flow("signup")).await.unwrap_err();
    assert!(matches!(error, RuntimeError::Guest(_)));
}

/// Runs a hostile behaviour through `start` (and, for the loop, `handle` too).
async fn evil(code: &str) -> Result<GuestReply, RuntimeError> {
    start(&loaded().await.evil, flow(code)).await
}

#[tokio::test]
async fn an_endless_loop_times_out_quickly() {
    // 50 ms of CPU time: about that long on an idle machine, at most 500 ms of wall-clock time when
    // other tests compete for the CPUs.
    let evil_component = &loaded().await.evil;
    let started = Instant::now();
    assert_eq!(evil("loop").await, Err(RuntimeError::Timeout));
    assert!(started.elapsed() < Duration::from_millis(700), "{:?}", started.elapsed());

    let started = Instant::now();
    let result = handle(evil_component, "", GuestEvent::Text("loop".into())).await;
    assert_eq!(result, Err(RuntimeError::Timeout));
    assert!(started.elapsed() < Duration::from_millis(700), "{:?}", started.elapsed());

    // The component still serves (a fresh instance per call).
    assert_eq!(evil("ok").await.unwrap().steps, [json!({"type": "message", "text": "ok"})]);
}

#[tokio::test]
async fn a_guest_sleeping_in_the_host_is_stopped_by_the_wall_clock_budget() {
    loaded().await;
    let started = Instant::now();
    assert_eq!(evil("sleep").await, Err(RuntimeError::Timeout));
    // 10 × cpu_ms of wall-clock time.
    assert!(started.elapsed() < Duration::from_millis(900), "{:?}", started.elapsed());
}

/// An instance serves one call: a guest's globals start over on every call (state travels only in the
/// session state string).
#[tokio::test]
async fn every_call_gets_a_fresh_instance() {
    for _ in 0..3 {
        assert_eq!(messages(&evil("count").await.unwrap()), ["call 1 of this instance"]);
    }
    let evil_component = &loaded().await.evil;
    let reply = handle(evil_component, "", GuestEvent::Text("count".into())).await.unwrap();
    assert_eq!(messages(&reply), ["call 1 of this instance"]);
}

/// A guest whose working set is many separate runs of pages (here 512, where the pool's page scan
/// collects 32 at a time) gets them reset in place: the idle slot keeps them all resident for the next
/// call, instead of releasing them to fault in again, and the next call still finds them reset.
/// (The fix in `vendor/wasmtime`; without it the slot keeps only the first 32 runs.) Its own runtime, so
/// no other test's slots count.
#[tokio::test]
async fn a_scattered_working_set_is_reset_in_place() {
    let runtime = runtime_with(RuntimeLimits::default());
    let evil = runtime.load(&component("evil")).await.expect("evil loads");
    let idle = runtime.pool_resident_bytes();
    for _ in 0..3 {
        let reply = runtime.start(&evil.digest, "demo", flow("scatter"), ctx()).await.unwrap();
        assert_eq!(messages(&reply), ["512 pages written, 0 found dirty"]);
    }
    if !wasmtime::PoolingAllocationConfig::is_pagemap_scan_available() {
        eprintln!("no PAGEMAP_SCAN (Linux < 6.7): slots release their pages, nothing more to check");
        return;
    }
    let resident = runtime.pool_resident_bytes().saturating_sub(idle);
    assert!(resident >= 512 * 4096, "the slot kept {resident} bytes resident");
}

#[tokio::test]
async fn a_memory_bomb_runs_out_of_memory() {
    // A runtime of its own with time to spare: faulting in 32 MiB takes some of the default 50 ms of CPU,
    // all of it when the other tests load the machine, and then the call ends as a timeout instead.
    let runtime = runtime_with(RuntimeLimits { cpu_ms: 2_000, ..RuntimeLimits::default() });
    let evil = runtime.load(&component("evil")).await.expect("evil loads");
    let result = runtime.start(&evil.digest, "demo", flow("memory"), ctx()).await;
    assert!(matches!(result, Err(RuntimeError::OutOfMemory | RuntimeError::Trap(_))), "{result:?}");
    assert_eq!(result, Err(RuntimeError::OutOfMemory));
}

#[tokio::test]
async fn traps_and_stack_overflows_are_traps() {
    let result = evil("trap").await;
    assert!(matches!(&result, Err(RuntimeError::Trap(m)) if m.contains("unreachable")), "{result:?}");
    // Rust's stack lives in linear memory: overflowing it is an out-of-bounds access.
    let result = evil("stack").await;
    assert!(matches!(result, Err(RuntimeError::Trap(_))), "{result:?}");
}

#[tokio::test]
async fn a_huge_reply_is_refused() {
    assert_eq!(evil("huge").await, Err(RuntimeError::OutputTooLarge));
}

#[tokio::test]
async fn a_screen_without_fields_is_malformed() {
    let result = evil("malformed").await;
    assert!(matches!(&result, Err(RuntimeError::Malformed(m)) if m.contains("no fields")), "{result:?}");
}

fn messages(reply: &GuestReply) -> Vec<&str> {
    reply.steps.iter().map(|step| step["text"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn the_sandbox_has_no_files_environment_or_network() {
    let reply = evil("file").await.unwrap();
    let texts = messages(&reply);
    assert!(texts[0].starts_with("file read failed"), "{texts:?}");
    assert!(texts[1].starts_with("listing failed"), "{texts:?}");
    assert!(!texts.concat().contains("root:"), "{texts:?}");

    let reply = evil("env").await.unwrap();
    assert_eq!(messages(&reply), ["env: 0 vars []; 0 args []"]);

    let reply = evil("net").await.unwrap();
    assert!(messages(&reply)[0].starts_with("connect failed"), "{reply:?}");
}

#[tokio::test]
async fn a_log_flood_is_capped_and_the_call_succeeds() {
    let reply = evil("logs").await.unwrap();
    assert_eq!(messages(&reply), ["logged"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_calls_do_not_disturb_other_bots() {
    let loaded = loaded().await;
    let stop = Arc::new(AtomicBool::new(false));

    // Well-behaved calls in a loop on other tasks.
    let good: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            tokio::spawn(async move {
                let (mut calls, mut slowest) = (0u32, Duration::ZERO);
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let reply = start(&loaded.signup, flow("signup")).await;
                    assert!(reply.is_ok(), "a well-behaved call failed: {reply:?}");
                    slowest = slowest.max(started.elapsed());
                    calls += 1;
                }
                (calls, slowest)
            })
        })
        .collect();
    // The async runtime stays responsive: a timer keeps firing on time.
    let ticker = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut latest = Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                tokio::time::sleep(Duration::from_millis(5)).await;
                latest = latest.max(started.elapsed());
            }
            latest
        })
    };

    let hostile: Vec<_> = ["loop", "memory", "huge", "trap", "stack", "malformed", "sleep", "loop", "loop"]
        .into_iter()
        .map(|code| tokio::spawn(async move { (code, evil(code).await) }))
        .collect();
    for task in hostile {
        let (code, result) = task.await.unwrap();
        let expected = match code {
            "loop" | "sleep" => matches!(result, Err(RuntimeError::Timeout)),
            "memory" => matches!(result, Err(RuntimeError::OutOfMemory)),
            "huge" => matches!(result, Err(RuntimeError::OutputTooLarge)),
            "trap" | "stack" => matches!(result, Err(RuntimeError::Trap(_))),
            "malformed" => matches!(result, Err(RuntimeError::Malformed(_))),
            _ => unreachable!(),
        };
        assert!(expected, "{code}: {result:?}");
    }

    stop.store(true, Ordering::Relaxed);
    for task in good {
        let (calls, slowest) = task.await.unwrap();
        assert!(calls > 0);
        assert!(slowest < Duration::from_secs(2), "a good call took {slowest:?}");
    }
    let late = ticker.await.unwrap();
    assert!(late < Duration::from_millis(500), "a 5 ms timer took {late:?}");
}

#[tokio::test]
async fn bytes_that_are_not_a_bot_component_are_invalid() {
    let runtime = &loaded().await.runtime;
    let cases: [(&str, &[u8]); 4] = [
        ("random bytes", b"certainly not webassembly"),
        ("empty", b""),
        ("a core module", b"\0asm\x01\0\0\0"),
        ("a component of another world", b"\0asm\x0d\0\x01\0"),
    ];
    for (name, bytes) in cases {
        let result = runtime.load(bytes).await;
        assert!(matches!(result, Err(RuntimeError::InvalidComponent(_))), "{name}: {result:?}");
        assert!(!runtime.is_loaded(&sha256_digest(bytes)), "{name}");
    }
}

#[tokio::test]
async fn unknown_digests_are_not_loaded() {
    let runtime = &loaded().await.runtime;
    let digest = sha256_digest(b"never uploaded");
    assert!(!runtime.is_loaded(&digest));
    let result = runtime.start(&digest, "demo", Entry::Chat, ctx()).await;
    assert_eq!(result, Err(RuntimeError::NotLoaded));
    let result = runtime.handle(&digest, "demo", String::new(), GuestEvent::Text("hi".into()), ctx()).await;
    assert_eq!(result, Err(RuntimeError::NotLoaded));
}

#[tokio::test]
async fn a_restart_loads_the_artifact_instead_of_compiling() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = component("chat");
    let first = Runtime::new(RuntimeLimits::default(), dir.path().into()).unwrap();
    let loaded = first.load(&bytes).await.unwrap();
    assert!(!loaded.from_cache, "a fresh cache directory has no artifact");
    let hex = loaded.digest.strip_prefix("sha256:").unwrap();
    let artifact = dir.path().join(format!("{hex}.cwasm"));
    assert!(artifact.is_file());
    assert!(first.load(&bytes).await.unwrap().from_cache, "in memory");
    drop(first);

    let restarted = Runtime::new(RuntimeLimits::default(), dir.path().into()).unwrap();
    assert!(!restarted.is_loaded(&loaded.digest));
    let reloaded = restarted.load(&bytes).await.unwrap();
    assert!(reloaded.from_cache, "the artifact was not used");
    assert_eq!(reloaded.flows, loaded.flows);
    let reply = restarted.start(&reloaded.digest, "demo", Entry::Chat, ctx()).await.unwrap();
    assert_eq!(reply.state, r#"{"events":0}"#);
    drop(restarted);

    // A damaged artifact is replaced by a fresh compile.
    std::fs::write(&artifact, b"garbage").unwrap();
    let third = Runtime::new(RuntimeLimits::default(), dir.path().into()).unwrap();
    let recompiled = third.load(&bytes).await.unwrap();
    assert!(!recompiled.from_cache);
    assert!(third.start(&recompiled.digest, "demo", Entry::Chat, ctx()).await.is_ok());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "only the artifact: {leftovers:?}");
}

/// The context of a call for `partner`'s bot.
fn ctx_of(partner: &str) -> GuestContext {
    GuestContext { partner: partner.into(), ..ctx() }
}

#[tokio::test]
async fn partners_share_the_slots_and_a_slot_is_held_until_its_guest_returns() {
    let slots = SlotLimits { per_partner: 2, queue: 2, wait: Duration::from_millis(200) };
    let runtime = runtime_with(RuntimeLimits { slots, ..RuntimeLimits::default() });
    let evil = runtime.load(&component("evil")).await.unwrap();
    let free = runtime.free_call_slots();
    // Partner a floods: six calls whose guests sleep (each holds its slot until its wall-clock deadline).
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let (runtime, digest) = (runtime.clone(), evil.digest.clone());
            tokio::spawn(async move { runtime.start(&digest, "evil", flow("sleep"), ctx_of("a")).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(runtime.free_call_slots(), free - 2, "a holds its share and no more");
    // Partner b is admitted at once: its call is answered while a's first two still run.
    let answered = runtime.start(&evil.digest, "evil", flow("ok"), ctx_of("b")).await.unwrap();
    assert_eq!(answered.steps, [json!({"type": "message", "text": "ok"})]);
    assert!(!calls[0].is_finished() && !calls[1].is_finished(), "b did not wait behind a's calls");
    // Of a's six: two ran (and ran out of time), two waited past the deadline, two found the queue full.
    let mut outcomes: Vec<&str> = Vec::new();
    for call in calls {
        outcomes.push(match call.await.unwrap() {
            Err(RuntimeError::Timeout) => "ran",
            Err(RuntimeError::Busy) => "waited",
            Err(RuntimeError::QueueFull) => "refused",
            other => panic!("unexpected {other:?}"),
        });
    }
    outcomes.sort();
    assert_eq!(outcomes, ["ran", "ran", "refused", "refused", "waited", "waited"]);

    // A caller that hangs up frees nothing while its guest still runs.
    let call = runtime.start(&evil.digest, "evil", flow("sleep"), ctx_of("c"));
    assert!(tokio::time::timeout(Duration::from_millis(50), call).await.is_err(), "the call was still running");
    assert_eq!(runtime.free_call_slots(), free - 1, "the abandoned call keeps its slot until its guest returns");
    let deadline = Instant::now() + Duration::from_secs(10);
    while runtime.free_call_slots() != free {
        assert!(Instant::now() < deadline, "the slot never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn tighter_limits_apply() {
    let runtime = runtime_with(RuntimeLimits { max_output_bytes: 64, ..RuntimeLimits::default() });
    let signup = runtime.load(&component("signup")).await.unwrap();
    assert!(signup.from_cache, "the shared artifact is reused");
    let result = runtime.start(&signup.digest, "demo", flow("signup"), ctx()).await;
    assert_eq!(result, Err(RuntimeError::OutputTooLarge));
}

#[tokio::test]
async fn the_least_recently_used_component_is_dropped_past_the_limit_and_reloads() {
    let runtime = runtime_with(RuntimeLimits { max_loaded_components: 2, ..RuntimeLimits::default() });
    let signup = runtime.load(&component("signup")).await.unwrap();
    let shop = runtime.load(&component("shop")).await.unwrap();
    // signup is used after shop was loaded, so shop is now the least recently used.
    runtime.start(&signup.digest, "demo", flow("signup"), ctx()).await.unwrap();
    let chat = runtime.load(&component("chat")).await.unwrap();
    assert_eq!(runtime.loaded_count(), 2);
    assert!(runtime.is_loaded(&signup.digest) && runtime.is_loaded(&chat.digest));
    assert!(!runtime.is_loaded(&shop.digest), "the least recently used was dropped");
    assert_eq!(runtime.start(&shop.digest, "demo", flow("order"), ctx()).await, Err(RuntimeError::NotLoaded));
    // Loading it again uses its artifact (no compile) and it answers.
    let again = runtime.load(&component("shop")).await.unwrap();
    assert!(again.from_cache);
    assert!(runtime.start(&again.digest, "demo", flow("order"), ctx()).await.is_ok());
    assert_eq!(runtime.loaded_count(), 2);
}

/// A released WIT version never changes: every file under a released `wit/vX.Y.Z/` is listed, with its
/// SHA-256, in `wit/RELEASED.sha256`, and the directories hold exactly those files.
#[test]
fn released_wit_versions_are_frozen() {
    let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let manifest = std::fs::read_to_string(wit.join("RELEASED.sha256")).expect("wit/RELEASED.sha256");
    let mut listed = std::collections::BTreeSet::new();
    let mut versions = std::collections::BTreeSet::new();
    for line in manifest.lines().filter(|l| !l.trim().is_empty()) {
        let (digest, file) = line.split_once("  ").expect("sha256sum format");
        let bytes = std::fs::read(wit.join(file)).unwrap_or_else(|_| panic!("released file {file} is missing"));
        assert_eq!(
            sha256_digest(&bytes),
            format!("sha256:{digest}"),
            "released WIT file {file} changed: make a new version instead"
        );
        listed.insert(file.to_string());
        versions.insert(file.split('/').next().unwrap().to_string());
    }
    for version in &versions {
        for entry in std::fs::read_dir(wit.join(version)).unwrap() {
            let name = format!("{version}/{}", entry.unwrap().file_name().to_string_lossy());
            assert!(listed.contains(&name), "{name} was added to a released WIT version");
        }
    }
    assert!(
        versions.contains(&format!("v{}", hubbub_host::runtime::WIT_VERSION)),
        "the host's WIT version is released"
    );
}
