//! Delivery that respects the providers: each sender's rate (shared by the hosts on one database), WhatsApp's
//! pair rate, throttles that wait instead of failing, and outages that wait out the partner's retry budget
//! before the chain moves on. The fake providers here enforce the rates they stand for.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hubbub_host::clock::ManualClock;
use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, TestDb, eventually, fake_providers, t, tries};

/// A provider that takes at most `per_s` messages in any sliding second per sender (and, when set, one per
/// `pair_ms` to the same person), and answers a throttle past that, as Meta's Cloud API (`130429`, `131056`)
/// and Twilio (`429`/`20429`) do.
#[derive(Clone)]
struct RateLimited {
    url: String,
    /// When each message it took arrived, by the person it is for.
    taken: Arc<Mutex<Vec<(Instant, String)>>>,
    throttled: Arc<AtomicUsize>,
}

impl RateLimited {
    async fn start(per_s: usize, pair_ms: u64, twilio: bool) -> RateLimited {
        let taken: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
        let window: Arc<Mutex<VecDeque<Instant>>> = Arc::default();
        let last_to: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let throttled = Arc::new(AtomicUsize::new(0));
        let (t, th) = (taken.clone(), throttled.clone());
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let (taken, throttled, window, last_to) = (t.clone(), th.clone(), window.clone(), last_to.clone());
            async move {
                use axum::response::IntoResponse;
                let body = axum::body::to_bytes(req.into_body(), 1 << 20).await.unwrap();
                let to = match twilio {
                    true => url::form_urlencoded::parse(&body)
                        .find(|(k, _)| k == "To")
                        .map(|(_, v)| v.to_string())
                        .unwrap_or_default(),
                    false => serde_json::from_slice::<Value>(&body).unwrap()["to"].as_str().unwrap().to_string(),
                };
                let now = Instant::now();
                let too_fast = {
                    let mut window = window.lock().unwrap();
                    while window.front().is_some_and(|at| now.duration_since(*at) >= Duration::from_secs(1)) {
                        window.pop_front();
                    }
                    let mut last_to = last_to.lock().unwrap();
                    let pair = pair_ms > 0
                        && last_to.get(&to).is_some_and(|at| now.duration_since(*at) < Duration::from_millis(pair_ms));
                    let over = window.len() >= per_s || pair;
                    if !over {
                        window.push_back(now);
                        last_to.insert(to.clone(), now);
                    }
                    over
                };
                if too_fast {
                    throttled.fetch_add(1, Ordering::SeqCst);
                    return match twilio {
                        true => (
                            axum::http::StatusCode::TOO_MANY_REQUESTS,
                            axum::Json(json!({"code": 20429, "message": "Too Many Requests"})),
                        )
                            .into_response(),
                        false => (
                            axum::http::StatusCode::BAD_REQUEST,
                            axum::Json(json!({"error": {"code": 130429, "message": "Rate limit hit"}})),
                        )
                            .into_response(),
                    };
                }
                let n = {
                    let mut taken = taken.lock().unwrap();
                    taken.push((now, to));
                    taken.len()
                };
                axum::Json(json!({"sid": format!("SM{n}"), "messages": [{"id": format!("wamid.{n}")}]})).into_response()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        RateLimited { url, taken, throttled }
    }

    fn taken(&self) -> Vec<(Instant, String)> {
        self.taken.lock().unwrap().clone()
    }

    /// The most messages it took in any one second.
    fn busiest_second(&self) -> usize {
        let times: Vec<Instant> = self.taken().into_iter().map(|(at, _)| at).collect();
        let mut most = 0;
        let mut start = 0;
        for end in 0..times.len() {
            while times[end].duration_since(times[start]) >= Duration::from_secs(1) {
                start += 1;
            }
            most = most.max(end - start + 1);
        }
        most
    }

    /// Stands in for the fake providers' Cloud API (`whatsapp`) or Twilio (`sms`) in `c`.
    fn fake(&self) -> FakeServer {
        FakeServer {
            url: self.url.clone(),
            behaviour: Arc::default(),
            requests: Arc::default(),
            answers: Arc::default(),
            files: Arc::default(),
        }
    }
}

/// Meta's and Twilio's default rates (80 a second a number, 1 a second a long code, a message every 6 s to
/// one person), on a host whose clock runs in real time: pacing waits are real.
fn paced(c: &mut hubbub_host::config::Config) {
    c.whatsapp_mps = 80;
    c.sms_mps = 1;
    c.whatsapp_pair_interval_ms = 6_000;
}

/// Sends `count` text messages, one to each of `phones`, from `key` (eight at a time); answers their ids.
async fn send_all(app: &TestApp, key: &str, phones: &[String]) -> Vec<i64> {
    let next = Arc::new(AtomicUsize::new(0));
    let ids = Arc::new(Mutex::new(Vec::new()));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (next, ids, phones) = (next.clone(), ids.clone(), phones.to_vec());
        let (client, base, key) = (app.client.clone(), app.base.clone(), key.to_string());
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(phone) = phones.get(i) else { break };
                let r = client
                    .post(format!("{base}/api/v1/messages"))
                    .bearer_auth(&key)
                    .json(&json!({"phone": phone, "content_type": "text", "body": format!("Hello {i}")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 201);
                let m: Value = r.json().await.unwrap();
                ids.lock().unwrap().push(m["message_id"].as_i64().unwrap());
            }
        });
    }
    while workers.join_next().await.is_some() {}
    Arc::try_unwrap(ids).unwrap().into_inner().unwrap()
}

/// The people `phones`, each having written to the host's WhatsApp number just now (their window is open).
async fn with_open_windows(app: &TestApp, count: usize, prefix: &str) -> Vec<String> {
    let phones: Vec<String> = (0..count).map(|i| format!("{prefix}{i:05}")).collect();
    for chunk in phones.chunks(16) {
        let messages: Vec<Value> = chunk
            .iter()
            .enumerate()
            .map(|(i, phone)| {
                json!({"from": phone.trim_start_matches('+'), "id": format!("wamid.in.{phone}.{i}"), "timestamp": (app.now() / 1000).to_string(), "type": "reaction", "reaction": {"message_id": "wamid.1", "emoji": "👍"}})
            })
            .collect();
        let change = json!([{"field": "messages", "value": {"messaging_product": "whatsapp", "metadata": {"phone_number_id": "12345"}, "messages": messages}}]);
        app.whatsapp_notify(change).await.ok(200);
    }
    phones
}

/// How many of `ids` are `sent` on WhatsApp, as the host's database says.
async fn sent_on_whatsapp(app: &TestApp, ids: &[i64]) -> usize {
    let db = &app.state.db;
    let mut n = 0;
    for chunk in ids.chunks(500) {
        let list = chunk.iter().map(|id| id.to_string()).collect::<Vec<_>>().join(",");
        let sql =
            format!("SELECT COUNT(*) FROM messages WHERE id IN ({list}) AND state = 'sent' AND channel = 'whatsapp'");
        let count: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_one(db.reader()).await.unwrap();
        n += count as usize;
    }
    n
}

async fn all_sent_on_whatsapp(app: &TestApp, ids: &[i64], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let sent = sent_on_whatsapp(app, ids).await;
        if sent == ids.len() {
            return;
        }
        assert!(Instant::now() < deadline, "{sent} of {} sent on WhatsApp in {within:?}", ids.len());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

const BROADCAST: usize = 2_000;

/// What 2,000 WhatsApp messages at 80 a second show at the fakes, after `took`: no SMS, at least 25 s, never
/// more than 80 in a second, and throttles well under the messages' number. Unpaced, nearly every try would be
/// throttled (sent as fast as they come); with a budget per host, two hosts would try 160 a second and about
/// one try in two would be throttled, some 2,000 in all; paced on one budget, only the scheduler's jitter
/// bunches tries into one second: 5 to 76 on a quiet machine, 245 once in CI beside the other tests on
/// PostgreSQL. Hence the bound: two fifths of the messages.
fn kept_to_the_rate(wa: &RateLimited, sms: &RateLimited, took: Duration, hosts: &str) {
    assert_eq!(sms.taken().len(), 0, "no SMS");
    assert!(took >= Duration::from_millis(24_900), "2,000 at 80/s take at least 25 s ({hosts}), took {took:?}");
    let busiest = wa.busiest_second();
    assert!(busiest <= 80, "at most 80 in any second ({hosts}), saw {busiest}");
    let throttled = wa.throttled.load(Ordering::SeqCst);
    assert!(throttled <= BROADCAST * 2 / 5, "one budget keeps under the rate ({hosts}): {throttled} throttled");
    eprintln!("2,000 WhatsApp messages at 80/s, {hosts}: {took:?}, busiest second {busiest}, {throttled} throttled");
}

/// The rate-limited fakes (80/s and the pair rate for WhatsApp, 1/s for Twilio), and a paced host on them
/// on `db` with a clock running in real time (or `clock`, shared with another host).
async fn paced_host(db: Arc<TestDb>, clock: Option<Arc<ManualClock>>, fakes: &(RateLimited, RateLimited)) -> TestApp {
    let (fake_wa, fake_sms) = (fakes.0.fake(), fakes.1.fake());
    let clock = clock.unwrap_or_else(|| Arc::new(ManualClock::running(chrono::Utc::now().timestamp_millis())));
    TestApp::start_on_clock(db, clock, move |c| {
        fake_providers(c, &fake_wa, &fake_sms);
        paced(c);
    })
    .await
}

/// Meta's Cloud API at 80 a second with its pair rate, and Twilio at 1 a second.
async fn rate_limited_fakes() -> (RateLimited, RateLimited) {
    (RateLimited::start(80, 6_000, false).await, RateLimited::start(1, 0, true).await)
}

#[tokio::test]
async fn two_thousand_whatsapp_messages_go_at_the_numbers_rate_with_no_sms() {
    let fakes = rate_limited_fakes().await;
    let app = paced_host(Arc::new(TestDb::new().await), None, &fakes).await;
    let (wa, sms) = &fakes;
    let key = app.partner("acme").await;
    let phones = with_open_windows(&app, BROADCAST, "+1555700").await;

    let started = Instant::now();
    let ids = send_all(&app, &key, &phones).await;
    all_sent_on_whatsapp(&app, &ids, Duration::from_secs(90)).await;
    kept_to_the_rate(wa, sms, started.elapsed(), "one host");
    app.stop().await;
}

#[tokio::test]
async fn two_hosts_on_one_database_share_the_numbers_rate() {
    let fakes = rate_limited_fakes().await;
    let db = Arc::new(TestDb::new().await);
    let clock = Arc::new(ManualClock::running(chrono::Utc::now().timestamp_millis()));
    let one = paced_host(db.clone(), Some(clock.clone()), &fakes).await;
    let two = paced_host(db, Some(clock), &fakes).await;
    let (wa, sms) = &fakes;
    let key = one.partner("acme").await;
    let phones = with_open_windows(&one, BROADCAST, "+1555710").await;

    let started = Instant::now();
    let (half_one, half_two) = phones.split_at(BROADCAST / 2);
    let (ids_one, ids_two) = tokio::join!(send_all(&one, &key, half_one), send_all(&two, &key, half_two));
    let ids: Vec<i64> = ids_one.into_iter().chain(ids_two).collect();
    all_sent_on_whatsapp(&one, &ids, Duration::from_secs(90)).await;
    kept_to_the_rate(wa, sms, started.elapsed(), "two hosts");
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn five_messages_to_one_person_go_six_seconds_apart() {
    let fakes = rate_limited_fakes().await;
    let app = paced_host(Arc::new(TestDb::new().await), None, &fakes).await;
    let (wa, sms) = &fakes;
    let key = app.partner("acme").await;
    let phone = with_open_windows(&app, 1, "+1555720").await.remove(0);
    let ids = send_all(&app, &key, &vec![phone.clone(); 5]).await;
    all_sent_on_whatsapp(&app, &ids, Duration::from_secs(60)).await;

    let taken = wa.taken();
    let m = app.message(&key, ids[4]).await;
    assert_eq!(taken.len(), 5, "{taken:?} {} throttled; {m}", wa.throttled.load(Ordering::SeqCst));
    for pair in taken.windows(2) {
        let gap = pair[1].0.duration_since(pair[0].0);
        assert!(gap >= Duration::from_millis(5_990), "one message every 6 s to one person, saw {gap:?}");
    }
    // The host keeps to the pair rate itself: at most one try lands early by the scheduler's jitter.
    assert!(wa.throttled.load(Ordering::SeqCst) <= 1, "{} throttled", wa.throttled.load(Ordering::SeqCst));
    assert_eq!(sms.taken().len(), 0);
    // While they waited, the attempts said so.
    let m = app.message(&key, ids[0]).await;
    assert_eq!(tries(&m).last().unwrap(), &t("whatsapp", "sent", ""));
    app.stop().await;
}

#[tokio::test]
async fn a_throttle_waits_with_its_reason_and_never_falls_back_to_sms() {
    let wa = FakeServer::start(200, 0).await;
    let sms = FakeServer::start(201, 0).await;
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let key = app.partner("acme").await;
    app.whatsapp_wrote("+15557300001").await;
    // Meta throttles the number (error 131056, the pair rate) and says when to come back.
    wa.answer("/12345/messages", 400, json!({"error": {"code": 131056, "message": "Pair rate limit hit"}}));
    let id = app.send_text(&key, "+15557300001", "Hello").await.ok(201)["message_id"].as_i64().unwrap();
    eventually("the attempt waits, throttled", || async {
        let m = app.message(&key, id).await;
        tries(&m) == vec![t("whatsapp", "waiting", "throttled")] && m["state"] == "queued"
    })
    .await;
    let m = app.message(&key, id).await;
    assert!(m["attempts"][0]["retry_at"].is_string(), "it says until when: {m}");
    // Again and again: still waiting, never failed, never SMS.
    for _ in 0..3 {
        app.clock.advance_ms(2_000);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let m = app.message(&key, id).await;
    assert_eq!(tries(&m), vec![t("whatsapp", "waiting", "throttled")]);
    assert_eq!(m["state"], "queued");
    // The throttle ends: it goes on WhatsApp, and its waiting attempt gives way to the try.
    wa.answers.lock().unwrap().clear();
    app.clock.advance_ms(61_000);
    eventually("sent on WhatsApp", || async { app.message(&key, id).await["channel"] == "whatsapp" }).await;
    let m = app.message(&key, id).await;
    assert_eq!(tries(&m), vec![t("whatsapp", "sent", "")]);
    assert!(sms.received().is_empty(), "no SMS");
    // Twilio's throttle (429) waits the same way.
    sms.set(429, 0);
    let otp = app
        .post(
            &key,
            "/api/v1/messages",
            json!({"phone": "+15557300002", "content_type": "text", "body": "Your code", "priority": "otp"}),
        )
        .await;
    let otp = otp.ok(201)["message_id"].as_i64().unwrap();
    eventually("the SMS waits, throttled", || async {
        tries(&app.message(&key, otp).await) == vec![t("sms", "waiting", "throttled")]
    })
    .await;
    sms.set(201, 0);
    app.clock.advance_ms(61_000);
    eventually("the code's SMS goes", || async { app.message(&key, otp).await["state"] == "sent" }).await;
    assert_eq!(tries(&app.message(&key, otp).await), vec![t("sms", "sent", "")]);
    app.stop().await;
}

#[tokio::test]
async fn an_outage_within_the_budget_waits_for_whatsapp_and_one_past_it_goes_by_sms() {
    let wa = FakeServer::start(503, 0).await;
    let sms = FakeServer::start(201, 0).await;
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let key = app.partner("acme").await;
    app.whatsapp_wrote("+15557400001").await;
    app.whatsapp_wrote("+15557400002").await;

    // A 20 s outage inside the default 60 s budget.
    let id = app.send_text(&key, "+15557400001", "Hello").await.ok(201)["message_id"].as_i64().unwrap();
    eventually("the attempt waits for the provider", || async {
        tries(&app.message(&key, id).await) == vec![t("whatsapp", "waiting", "provider_unavailable")]
    })
    .await;
    for _ in 0..10 {
        app.clock.advance_ms(2_000);
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    assert_eq!(app.message(&key, id).await["state"], "queued");
    wa.set(200, 0);
    for _ in 0..30 {
        if app.message(&key, id).await["state"] == "sent" {
            break;
        }
        app.clock.advance_ms(2_000);
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    let m = app.message(&key, id).await;
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("sent"), Some("whatsapp")), "{m}");
    assert_eq!(tries(&m), vec![t("whatsapp", "sent", "")]);
    assert!(sms.received().is_empty(), "no SMS within the budget");

    // Past a budget of 10 s: the chain moves on to SMS, and the attempts show the wait's end.
    let settings = json!({"provider_retry_s": 10});
    app.request(reqwest::Method::PUT, "/api/v1/settings/delivery", Some(&key), Some(&settings)).await.ok(200);
    wa.set(503, 0);
    let id = app.send_text(&key, "+15557400002", "Hello again").await.ok(201)["message_id"].as_i64().unwrap();
    eventually("it waits", || async {
        tries(&app.message(&key, id).await) == vec![t("whatsapp", "waiting", "provider_unavailable")]
    })
    .await;
    for _ in 0..20 {
        if app.message(&key, id).await["channel"] == "sms" {
            break;
        }
        app.clock.advance_ms(2_000);
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    let m = app.message(&key, id).await;
    assert_eq!(m["channel"], "sms", "{m}");
    let attempts = tries(&m);
    assert_eq!(attempts.len(), 2, "{m}");
    assert_eq!((attempts[0].0.as_str(), attempts[0].1.as_str()), ("whatsapp", "failed"));
    assert_eq!(attempts[1], t("sms", "sent", ""));
    assert_eq!(sms.received().len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn pace_and_retry_settings_refuse_what_cannot_be() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    for bad in [json!(0), json!(-5), json!(10_001), json!(2.5), json!("fast")] {
        let body = json!({"account_sid": format!("AC{}", "a".repeat(32)), "auth_token": "t", "from": "+15550009999", "mps": bad});
        let r = app.request(reqwest::Method::PUT, "/api/v1/settings/senders/sms", Some(&key), Some(&body)).await;
        assert_eq!(r.status, 422, "mps {bad}: {:?}", r.json);
        r.field_error("mps");
    }
    for bad in [json!(-1), json!(86_401), json!("soon")] {
        let body = json!({"provider_retry_s": bad});
        let r = app.request(reqwest::Method::PUT, "/api/v1/settings/delivery", Some(&key), Some(&body)).await;
        assert_eq!(r.status, 422, "provider_retry_s {bad}: {:?}", r.json);
        r.field_error("provider_retry_s");
    }
    let got = app.get(&key, "/api/v1/settings/delivery").await;
    assert_eq!(got.ok(200)["provider_retry_s"], 60);
    let set = json!({"provider_retry_s": 300});
    let r = app.request(reqwest::Method::PUT, "/api/v1/settings/delivery", Some(&key), Some(&set)).await;
    assert_eq!(r.ok(200)["provider_retry_s"], 300);
    app.stop().await;
}

#[tokio::test]
async fn a_development_hosts_clock_runs_ahead_by_its_offset_and_no_other_host_takes_one() {
    // The partner is made through a helper host on the same database (no workers).
    let helper = TestApp::start_with(|c| c.workers = false).await;
    let key = helper.partner("acme").await;
    let day = 86_400_i64;
    let offset = day.to_string();
    let env = [
        ("HUBBUB_DEV", "1"),
        ("HUBBUB_JWT_SECRET", crate::common::TEST_JWT_SECRET),
        ("HUBBUB_DEV_CLOCK_OFFSET_S", offset.as_str()),
    ];
    let (mut child, port) = crate::common::spawn_server(&helper.db.url, &env).await;
    let r = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/v1/messages"))
        .bearer_auth(&key)
        .json(&json!({"phone": "+15557500001", "content_type": "text", "body": "From tomorrow"}))
        .send()
        .await
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(r.status(), 201);
    let m: Value = r.json().await.unwrap();
    let created = hubbub_host::clock::parse_record_time(m["created_at"].as_str().unwrap()).unwrap();
    let ahead = created - chrono::Utc::now().timestamp_millis();
    assert!((day * 1000 - 60_000..=day * 1000 + 60_000).contains(&ahead), "a day ahead: {ahead} ms");

    // Without HUBBUB_DEV a host refuses to start with an offset.
    let mut config = crate::common::test_config(&helper.db.url);
    config.dev = false;
    config.dev_clock_offset_s = 60;
    assert!(config.refusals().iter().any(|r| r.contains("HUBBUB_DEV_CLOCK_OFFSET_S")), "{:?}", config.refusals());
    helper.stop().await;
}

#[tokio::test]
async fn a_partner_that_asks_hears_of_every_whatsapp_and_sms_try() {
    let wa = FakeServer::start(200, 0).await;
    let sms = FakeServer::start(201, 0).await;
    let receiver = FakeServer::start(200, 0).await;
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let key = app.partner("acme").await;
    let hook = json!({"webhook_url": format!("{}/hook", receiver.url)});
    app.request(reqwest::Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&hook)).await.ok(200);
    let asks = json!({"attempt_events": true});
    let settings = app.request(reqwest::Method::PUT, "/api/v1/settings/delivery", Some(&key), Some(&asks)).await;
    assert_eq!(settings.ok(200)["attempt_events"], true);
    app.whatsapp_wrote("+15557800001").await;
    // WhatsApp throttles once, then refuses the message: SMS takes it.
    wa.answer("/12345/messages", 400, json!({"error": {"code": 130429, "message": "Rate limit hit"}}));
    let id = app.send_text(&key, "+15557800001", "Hello").await.ok(201)["message_id"].as_i64().unwrap();
    eventually("it waits", || async {
        tries(&app.message(&key, id).await) == vec![t("whatsapp", "waiting", "throttled")]
    })
    .await;
    wa.answer("/12345/messages", 400, json!({"error": {"code": 131026, "message": "Message undeliverable"}}));
    app.clock.advance_ms(61_000);
    eventually("sent by SMS", || async { app.message(&key, id).await["channel"] == "sms" }).await;
    let events = || {
        receiver
            .received()
            .iter()
            .map(|r| r.json())
            .filter(|e| e["message_id"] == id)
            .map(|e| {
                let text = |k: &str| e[k].as_str().unwrap_or("").to_string();
                (text("event"), text("channel"), text("state"))
            })
            .collect::<Vec<_>>()
    };
    let want = vec![
        ("message.attempt".to_string(), "whatsapp".to_string(), "waiting".to_string()),
        ("message.attempt".to_string(), "whatsapp".to_string(), "failed".to_string()),
        ("message.attempt".to_string(), "sms".to_string(), "sent".to_string()),
        ("message.status".to_string(), "sms".to_string(), "sent".to_string()),
    ];
    eventually("the tries and the state reach the partner, in order", || async { events() == want }).await;
    let waiting = receiver.received().iter().map(|r| r.json()).find(|e| e["state"] == "waiting").unwrap();
    assert_eq!(waiting["error"], "throttled");
    assert!(waiting["retry_at"].is_string(), "{waiting}");

    // A partner that did not ask hears only of states.
    let other = app.partner("globex").await;
    let hook = json!({"webhook_url": format!("{}/other", receiver.url)});
    app.request(reqwest::Method::PUT, "/api/v1/settings/webhook", Some(&other), Some(&hook)).await.ok(200);
    wa.answers.lock().unwrap().clear();
    let quiet = app.send_text(&other, "+15557800001", "Hi").await.ok(201)["message_id"].as_i64().unwrap();
    eventually("sent", || async { app.message(&other, quiet).await["state"] == "sent" }).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let heard: Vec<Value> = receiver.received().iter().map(|r| r.json()).filter(|e| e["message_id"] == quiet).collect();
    assert!(heard.iter().all(|e| e["event"] == "message.status"), "{heard:?}");
    assert!(!heard.is_empty());
    app.stop().await;
}

/// A host whose WhatsApp is the fake Cloud API under business account `waba-1`, with the partner `acme`'s
/// `whatsapp` template `notice` approved by Meta: its key.
async fn with_approved_template(wa: &FakeServer, sms: &FakeServer) -> (TestApp, String) {
    let (w, s) = (wa.clone(), sms.clone());
    let app = TestApp::start_with(move |c| {
        fake_providers(c, &w, &s);
        c.whatsapp_business_account_id = Some("waba-1".into());
    })
    .await;
    let key = app.partner("acme").await;
    wa.answer("/waba-1/message_templates", 200, json!({"id": "88", "status": "PENDING", "category": "UTILITY"}));
    let t =
        json!({"code": "notice", "channel": "whatsapp", "lang": "en", "category": "utility", "body": "Hi {{name}}"});
    let id = app.post(&key, "/api/v1/templates", t).await.ok(201)["template_id"].as_i64().unwrap();
    app.post(&key, &format!("/api/v1/templates/{id}/submit"), json!({})).await.ok(200);
    let approved = json!([{"field": "message_template_status_update", "value": {"event": "APPROVED", "message_template_id": 88, "message_template_name": "notice", "message_template_language": "en", "reason": "NONE"}}]);
    assert_eq!(app.whatsapp_notify(approved).await.ok(200)["templates"], 1);
    (app, key)
}

/// Sends the template to each of `phones` (eight at a time); answers the message ids.
async fn send_template_to(app: &TestApp, key: &str, phones: &[String]) -> Vec<i64> {
    let mut ids = Vec::new();
    for chunk in phones.chunks(8) {
        let mut sends = tokio::task::JoinSet::new();
        for phone in chunk {
            let (client, base, key, phone) = (app.client.clone(), app.base.clone(), key.to_string(), phone.clone());
            sends.spawn(async move {
                let body = json!({"phone": phone, "template_code": "notice", "vars": {"name": "Ana"}});
                let r =
                    client.post(format!("{base}/api/v1/messages")).bearer_auth(&key).json(&body).send().await.unwrap();
                assert_eq!(r.status(), 201);
                r.json::<Value>().await.unwrap()["message_id"].as_i64().unwrap()
            });
        }
        while let Some(id) = sends.join_next().await {
            ids.push(id.unwrap());
        }
    }
    ids
}

#[tokio::test]
async fn the_daily_limit_of_new_people_waits_for_room_or_goes_by_sms_as_the_partner_chose() {
    let wa = FakeServer::start(200, 0).await;
    let sms = FakeServer::start(201, 0).await;
    let (app, key) = with_approved_template(&wa, &sms).await;
    let settings = app.get(&key, "/api/v1/settings/delivery").await.ok(200).clone();
    assert_eq!(settings["over_limit"], "wait");
    // 250 people reached first today: the host's default limit, all on WhatsApp.
    let phones: Vec<String> = (0..250).map(|i| format!("+1555790{i:04}")).collect();
    let ids = send_template_to(&app, &key, &phones).await;
    for id in &ids {
        eventually("sent on WhatsApp", || async { app.message(&key, *id).await["channel"] == "whatsapp" }).await;
    }
    // Someone who wrote today is answered, limit or not; the 251st new person waits for room.
    app.whatsapp_wrote("+15557909998").await;
    let answer =
        app.send_text(&key, "+15557909998", "Thanks for writing").await.ok(201)["message_id"].as_i64().unwrap();
    eventually("an answer goes", || async { app.message(&key, answer).await["channel"] == "whatsapp" }).await;
    let waits = send_template_to(&app, &key, &["+15557909999".to_string()]).await[0];
    eventually("it waits for room", || async {
        tries(&app.message(&key, waits).await) == vec![t("whatsapp", "waiting", "over_daily_limit")]
    })
    .await;
    let m = app.message(&key, waits).await;
    let retry_at = hubbub_host::clock::parse_record_time(m["attempts"][0]["retry_at"].as_str().unwrap()).unwrap();
    assert!(retry_at > app.now() + 23 * 3_600_000, "room comes when the first of today's people is a day old");
    assert!(sms.received().is_empty(), "no SMS while it waits");
    // A day later there is room: it goes on WhatsApp.
    app.clock.advance_ms(24 * 3_600_000 + 1_000);
    eventually("sent on WhatsApp a day later", || async { app.message(&key, waits).await["channel"] == "whatsapp" })
        .await;

    // The partner chooses SMS past the limit: the next new person over it gets an SMS at once.
    let sms_past = json!({"over_limit": "sms"});
    let r = app.request(reqwest::Method::PUT, "/api/v1/settings/delivery", Some(&key), Some(&sms_past)).await;
    assert_eq!(r.ok(200)["over_limit"], "sms");
    let more: Vec<String> = (0..249).map(|i| format!("+1555791{i:04}")).collect();
    for id in send_template_to(&app, &key, &more).await {
        eventually("sent on WhatsApp", || async { app.message(&key, id).await["channel"] == "whatsapp" }).await;
    }
    let over = send_template_to(&app, &key, &["+15557919999".to_string()]).await[0];
    eventually("over the limit, by SMS", || async { app.message(&key, over).await["channel"] == "sms" }).await;
    assert_eq!(
        tries(&app.message(&key, over).await),
        vec![t("whatsapp", "skipped", "over_daily_limit"), t("sms", "sent", "")]
    );
    let bad = json!({"over_limit": "never"});
    app.request(reqwest::Method::PUT, "/api/v1/settings/delivery", Some(&key), Some(&bad))
        .await
        .field_error("over_limit");

    // Meta raises the tier (its quality webhook, signed by the host's app): 1,000 from now on.
    let upgrade = json!([{"field": "phone_number_quality_update", "value": {"display_phone_number": "15550001111", "event": "UPGRADE", "current_limit": "TIER_1K"}}]);
    let body =
        json!({"object": "whatsapp_business_account", "entry": [{"id": "waba-1", "changes": upgrade}]}).to_string();
    let r = app
        .client
        .post(format!("{}/api/v1/providers/whatsapp/webhook", app.base))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", hubbub_host::delivery::receipts::meta_signature("app-secret", body.as_bytes()))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["limits"], 1);
    let kept = hubbub_host::store::limits::of(&app.state.db, "").await.unwrap().unwrap();
    assert_eq!((kept.daily_limit, kept.quality.as_deref()), (Some(1_000), Some("UPGRADE")));
    let next = send_template_to(&app, &key, &["+15557919998".to_string()]).await[0];
    eventually("room again under the new tier", || async { app.message(&key, next).await["channel"] == "whatsapp" })
        .await;
    app.stop().await;
}
