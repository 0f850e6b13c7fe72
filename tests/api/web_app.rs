//! The end-user web app on the API's origin: its page at `/` and at every app path a browser opens, its
//! bundled files, the page's Content-Security-Policy, and the API's JSON 404 kept for everything else; and
//! `GET /me/messages/{ref}`, which the app opens a message from a link with.

use reqwest::header::{ACCEPT, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use serde_json::json;

use crate::common::TestApp;

const PAGE: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

async fn fetch(app: &TestApp, path: &str, accept: Option<&str>) -> reqwest::Response {
    let mut request = app.client.get(format!("{}{path}", app.base));
    if let Some(accept) = accept {
        request = request.header(ACCEPT, accept);
    }
    request.send().await.unwrap()
}

fn header(r: &reqwest::Response, name: reqwest::header::HeaderName) -> &str {
    r.headers().get(&name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn the_root_url_and_every_app_path_show_the_app_with_a_strict_policy() {
    let app = TestApp::start().await;
    let root = fetch(&app, "/", None).await;
    assert_eq!(root.status(), 200);
    assert!(header(&root, CONTENT_TYPE).starts_with("text/html"));
    let policy = header(&root, CONTENT_SECURITY_POLICY).to_string();
    for directive in ["script-src 'self'", "object-src 'none'", "frame-ancestors 'none'", "base-uri 'none'"] {
        assert!(policy.contains(directive), "{directive} missing from {policy}");
    }
    assert!(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"), "{policy}");
    let page = root.text().await.unwrap();
    assert!(page.contains("<script") && !page.contains("<script>"), "the page loads its scripts from files only");

    // The app's own routes (deep links sent by SMS) load the same page.
    for path in ["/m/msg_abcdefghijklmnopqrstuv", "/forms/flow_x", "/conversations", "/login?next=%2Faccount"] {
        let r = fetch(&app, path, Some(PAGE)).await;
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.text().await.unwrap(), page, "{path}");
    }

    // The partner console is a page of its own, at /console/ and below, with the same policy; its script is
    // not the app's.
    let console = fetch(&app, "/console/", Some(PAGE)).await;
    assert_eq!(header(&console, CONTENT_SECURITY_POLICY), policy);
    let console = console.text().await.unwrap();
    assert!(console.contains("id=\"console\"") && console != page, "{console}");
    for path in ["/console", "/console/c/12", "/console/members"] {
        let r = fetch(&app, path, Some(PAGE)).await;
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.text().await.unwrap(), console, "{path}");
    }
    let app_scripts = |html: &str| -> Vec<String> {
        html.split("src=\"").skip(1).filter_map(|s| s.split('"').next()).map(str::to_string).collect()
    };
    assert!(
        app_scripts(&console).iter().all(|s| !app_scripts(&page).contains(s)),
        "neither page loads the other's code"
    );
    // So is the developer portal, at /dashboard/ and below.
    let dashboard = fetch(&app, "/dashboard/", Some(PAGE)).await.text().await.unwrap();
    assert!(dashboard.contains("id=\"dashboard\""), "{dashboard}");
    assert_eq!(fetch(&app, "/dashboard", Some(PAGE)).await.text().await.unwrap(), dashboard);
    for other in [&page, &console] {
        assert!(app_scripts(&dashboard).iter().all(|s| !app_scripts(other).contains(s)));
    }
    // A path that only starts like a page is the app's.
    assert_eq!(fetch(&app, "/dashboards", Some(PAGE)).await.text().await.unwrap(), page);

    // Every script the page names is served, cached for good (its name is its content).
    let scripts: Vec<&str> =
        page.split("src=\"").skip(1).filter_map(|s| s.split('"').next()).filter(|s| s.ends_with(".js")).collect();
    assert!(!scripts.is_empty(), "{page}");
    for script in scripts {
        let r = fetch(&app, script, None).await;
        assert_eq!(r.status(), 200, "{script}");
        assert!(header(&r, CONTENT_TYPE).starts_with("text/javascript"), "{script}");
        if script.starts_with("/assets/") {
            assert!(header(&r, CACHE_CONTROL).contains("immutable"), "{script}");
        }
    }

    // A page already held is not sent again.
    let again = fetch(&app, "/", None).await;
    let etag = header(&again, ETAG).to_string();
    let r = app.client.get(format!("{}/", app.base)).header(IF_NONE_MATCH, etag).send().await.unwrap();
    assert_eq!(r.status(), 304);
    app.stop().await;
}

#[tokio::test]
async fn the_api_keeps_its_json_404_and_no_file_outside_the_app_is_served() {
    let app = TestApp::start().await;
    // An unknown API route is the API's 404, even for a browser.
    for (path, accept) in [("/api/v1/nope", Some(PAGE)), ("/api/nope", None), ("/nope", None), ("/nope", Some("*/*"))] {
        let r = fetch(&app, path, accept).await;
        assert_eq!(r.status(), 404, "{path}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_found", "{path}");
    }
    // Only GET and HEAD reach the app.
    let r = app.client.post(format!("{}/", app.base)).header(ACCEPT, PAGE).send().await.unwrap();
    assert_eq!(r.status(), 404);
    // Nothing outside the built app: dot segments and hidden names never name a file.
    for path in ["/../Cargo.toml", "/%2e%2e/Cargo.toml", "/assets/..%2f..%2fpackage.json", "/.vite/manifest.json"] {
        let r = fetch(&app, path, None).await;
        assert_eq!(r.status(), 404, "{path}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_user_opens_one_of_their_messages_by_ref_and_it_is_delivered() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let phone = "+15551230000";
    app.post(&key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    let token = app.login(phone).await;
    let sent = app.send_text(&key, phone, "Your parcel is ready").await.ok(201).clone();
    let reference = sent["ref"].as_str().unwrap();
    let r = app.get(&token, &format!("/api/v1/me/messages/{reference}")).await;
    assert_eq!(r.ok(200)["body"], "Your parcel is ready");
    assert_eq!(r.json["state"], "delivered");
    assert_eq!(app.message(&key, sent["message_id"].as_i64().unwrap()).await["state"], "delivered");
    // Read stays read when it is opened again.
    app.post(&token, &format!("/api/v1/me/messages/{reference}/read"), json!({})).await.ok(200);
    assert_eq!(app.get(&token, &format!("/api/v1/me/messages/{reference}")).await.ok(200)["state"], "read");
    // Another user's message, or no message, is 404.
    let stranger = app.login("+15557776666").await;
    app.get(&stranger, &format!("/api/v1/me/messages/{reference}")).await.error(404, "not_found");
    app.get(&token, "/api/v1/me/messages/msg_doesnotexist0000000000").await.error(404, "not_found");
    app.stop().await;
}

#[tokio::test]
async fn the_app_reads_the_account_fields_and_a_flow_card_by_ref() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let phone = "+15551230000";
    let tier =
        json!({"key": "tier", "label": "Tier", "type": "selection", "options": [{"id": "gold", "label": "Gold"}]});
    app.post(&key, "/api/v1/settings/account-fields", tier).await.ok(201);
    app.post(&key, "/api/v1/settings/account-fields", json!({"key": "news", "label": "Newsletter", "type": "boolean"}))
        .await
        .ok(201);
    let link = json!({"phone": phone, "fields": {"tier": "gold", "news": true}});
    app.post(&key, "/api/v1/accounts/link", link).await.ok(200);
    let token = app.login(phone).await;

    // The user's account shows each partner's values, labelled, as text.
    let me = app.get(&token, "/api/v1/me/account").await;
    let fields = me.ok(200)["partners"][0]["fields"].as_array().unwrap().clone();
    let tier = fields.iter().find(|f| f["key"] == "tier").unwrap();
    assert_eq!(
        (tier["label"].as_str(), tier["value"].as_str(), tier["text"].as_str()),
        (Some("Tier"), Some("gold"), Some("Gold"))
    );
    let news = fields.iter().find(|f| f["key"] == "news").unwrap();
    assert_eq!((news["value"].as_bool(), news["text"].as_str()), (Some(true), Some("Yes")));
    // The partner's own view of the account is unchanged: its values as an object, no per-partner list.
    let seen = app.get(&key, &format!("/api/v1/accounts/{}", phone.replace('+', "%2B"))).await;
    assert_eq!(seen.ok(200)["fields"], json!({"tier": "gold", "news": true}));
    assert!(seen.json["partners"][0].get("fields").is_none(), "{}", seen.json);

    // A flow invitation's card, by the ref its SMS link names.
    let bot =
        json!({"code": "desk", "name": "Desk", "runtime_mode": "webhook", "webhook_url": "http://127.0.0.1:9/hook"});
    app.post(&key, "/api/v1/bots", bot).await.ok(201);
    let invited = app.post(&key, "/api/v1/bots/desk/flows/intake/invite", json!({"phone": phone})).await;
    let flow_ref = invited.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
    let card = app.get(&token, &format!("/api/v1/me/flows/{flow_ref}")).await;
    assert_eq!(card.ok(200)["state"], "invited");
    assert_eq!((card.json["bot"].as_str(), card.json["flow"].as_str()), (Some("desk"), Some("intake")));
    assert!(card.json.get("summary").is_none_or(|s| s.is_null()));
    let inbox = app.get(&token, "/api/v1/me/messages").await;
    assert_eq!(card.json["message_ref"], inbox.ok(200)["data"][0]["ref"]);
    // Another user's flow is 404.
    let stranger = app.login("+15557776666").await;
    app.get(&stranger, &format!("/api/v1/me/flows/{flow_ref}")).await.error(404, "not_found");
    app.stop().await;
}

#[tokio::test]
async fn the_app_is_served_compressed_and_its_hashed_files_cached_for_good() {
    let app = TestApp::start().await;
    let get = |path: String, encoding: Option<&'static str>| {
        let app = &app;
        async move {
            let mut request = app.client.get(format!("{}{path}", app.base));
            if let Some(encoding) = encoding {
                request = request.header("accept-encoding", encoding);
            }
            request.send().await.unwrap()
        }
    };
    let page = get("/".into(), None).await.text().await.unwrap();
    let script = page.split("src=\"").nth(1).and_then(|s| s.split('"').next()).expect("the page loads a script");
    assert!(script.starts_with("/assets/"), "{script}");
    let plain = get(script.to_string(), None).await;
    assert_eq!(header(&plain, CACHE_CONTROL), "public, max-age=31536000, immutable");
    assert!(plain.headers().get("content-encoding").is_none());
    let size = plain.bytes().await.unwrap().len();
    for encoding in ["br", "gzip"] {
        let r = get(script.to_string(), Some(encoding)).await;
        assert_eq!(header(&r, reqwest::header::CONTENT_ENCODING), encoding);
        assert_eq!(header(&r, CACHE_CONTROL), "public, max-age=31536000, immutable");
        let compressed = r.bytes().await.unwrap().len();
        assert!(compressed * 2 < size, "{encoding}: {compressed} of {size} bytes");
    }
    let page = get("/".into(), Some("br")).await;
    assert_eq!(header(&page, reqwest::header::CONTENT_ENCODING), "br");
    assert_eq!(header(&page, CACHE_CONTROL), "no-cache");
    // The API and the event stream are not the app's files: left as they are.
    let api = get("/api/v1/openapi.json".into(), Some("br")).await;
    assert!(api.headers().get("content-encoding").is_none());
}
