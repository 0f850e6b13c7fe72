//! A partner's several API keys: a key replaced without downtime, over the API and the command line.

use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::hubbub;
use crate::common::TestApp;

fn ids(list: &Value) -> Vec<i64> {
    list["data"].as_array().unwrap().iter().map(|k| k["id"].as_i64().unwrap()).collect()
}

#[tokio::test]
async fn a_key_is_replaced_without_downtime_and_the_last_one_cannot_be_revoked() {
    let app = TestApp::start().await;
    let old = app.partner("acme").await;
    let other = app.partner("globex").await;

    // The key the partner was created with is listed, by prefix only, and its use is noted.
    app.get(&old, "/api/v1/messages").await.ok(200);
    crate::common::eventually("the key's last use is written", || async {
        app.get(&old, "/api/v1/api-keys").await.ok(200)["data"][0]["last_used_at"].is_string()
    })
    .await;
    let listed = app.get(&old, "/api/v1/api-keys").await.ok(200).clone();
    let first = &listed["data"][0];
    assert_eq!(first["name"], "default");
    assert_eq!(first["prefix"], old[..11]);
    assert!(first["revoked_at"].is_null());
    assert!(!listed.to_string().contains(&old[11..]), "never the key itself");
    let old_id = first["id"].as_i64().unwrap();

    // A second key works at once, beside the first; it is shown once.
    let created = app.post(&old, "/api/v1/api-keys", json!({"name": "billing service"})).await.ok(201).clone();
    let new = created["api_key"].as_str().unwrap().to_string();
    assert!(new.starts_with("sk_") && new != old);
    assert_eq!(created["key"]["prefix"], new[..11]);
    assert_eq!(created["key"]["name"], "billing service");
    let new_id = created["key"]["id"].as_i64().unwrap();
    app.get(&new, "/api/v1/messages").await.ok(200);
    app.get(&old, "/api/v1/messages").await.ok(200);
    assert_eq!(ids(&app.get(&new, "/api/v1/api-keys").await.ok(200)), [new_id, old_id], "newest first");
    assert!(!app.get(&new, "/api/v1/api-keys").await.ok(200).to_string().contains(&new[11..]));

    // Another partner's key is not there to revoke; a name is required.
    app.request(Method::DELETE, &format!("/api/v1/api-keys/{old_id}"), Some(&other), None)
        .await
        .error(404, "not_found");
    app.post(&old, "/api/v1/api-keys", json!({"name": "  "})).await.field_error("name");
    app.post(&old, "/api/v1/api-keys", json!({"name": "x".repeat(101)})).await.field_error("name");

    // The old key is revoked with the new one: it stops working, the new one goes on.
    let revoked =
        app.request(Method::DELETE, &format!("/api/v1/api-keys/{old_id}"), Some(&new), None).await.ok(200).clone();
    assert!(revoked["revoked_at"].is_string());
    app.get(&old, "/api/v1/messages").await.error(401, "unauthorized");
    app.get(&new, "/api/v1/messages").await.ok(200);
    // Again: answered as it is.
    app.request(Method::DELETE, &format!("/api/v1/api-keys/{old_id}"), Some(&new), None).await.ok(200);
    // The last key that works cannot be revoked.
    app.request(Method::DELETE, &format!("/api/v1/api-keys/{new_id}"), Some(&new), None).await.error(409, "conflict");
    app.get(&new, "/api/v1/messages").await.ok(200);
}

#[tokio::test]
async fn the_command_line_creates_lists_and_revokes_keys_and_rotation_still_replaces_them_all() {
    let app = TestApp::start().await;
    let first = app.partner("acme").await;
    let run = |args: &[&str]| {
        let out = hubbub(&app.db.url, args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let created: Value =
        serde_json::from_str(&run(&["partner", "create-key", "--code", "acme", "--name", "deploy bot"])).unwrap();
    let second = created["api_key"].as_str().unwrap().to_string();
    app.get(&second, "/api/v1/messages").await.ok(200);
    app.get(&first, "/api/v1/messages").await.ok(200);
    let listed: Vec<Value> =
        run(&["partner", "keys", "--code", "acme"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["name"], "deploy bot");
    assert!(!listed.iter().any(|k| k.to_string().contains(&second[11..])));
    let first_id = listed[1]["id"].to_string();
    run(&["partner", "revoke-key", "--code", "acme", "--id", &first_id]);
    app.get(&first, "/api/v1/messages").await.error(401, "unauthorized");
    let second_id = listed[0]["id"].to_string();
    assert!(!hubbub(&app.db.url, &["partner", "revoke-key", "--code", "acme", "--id", &second_id]).status.success());
    assert!(!hubbub(&app.db.url, &["partner", "create-key", "--code", "nobody", "--name", "x"]).status.success());

    // rotate-key replaces every key with one.
    run(&["partner", "create-key", "--code", "acme", "--name", "third"]);
    let rotated: Value = serde_json::from_str(&run(&["partner", "rotate-key", "--code", "acme"])).unwrap();
    let rotated = rotated["api_key"].as_str().unwrap();
    app.get(&second, "/api/v1/messages").await.error(401, "unauthorized");
    app.get(rotated, "/api/v1/messages").await.ok(200);
    let after = app.get(rotated, "/api/v1/api-keys").await.ok(200).clone();
    let working: Vec<&Value> = after["data"].as_array().unwrap().iter().filter(|k| k["revoked_at"].is_null()).collect();
    assert_eq!(working.len(), 1);
    assert_eq!(working[0]["name"], "rotated");
}
