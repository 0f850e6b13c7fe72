//! The command-line clients of a running host, over its HTTP API: `hubbub e2e …` (the E2E reference client)
//! and `hubbub bot …` (bot authors' tools). They share how they reach the API.

pub mod bot;
pub mod e2e;

use anyhow::bail;
use serde_json::Value;

/// Where the API is and the partner key to call it with.
#[derive(clap::Args)]
pub struct Api {
    /// The service's base URL.
    #[arg(long, env = "HUBBUB_API_URL", default_value = "http://127.0.0.1:8080")]
    pub api_url: String,
    /// The partner API key.
    #[arg(long, env = "HUBBUB_API_KEY", hide_env_values = true)]
    pub api_key: String,
}

impl Api {
    /// The URL of an API path (`/bots`, under `/api/v1`).
    pub fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.api_url.trim_end_matches('/'))
    }
}

/// Sends a request and answers its JSON body; a non-2xx answer is an error with the body.
pub async fn call(request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    let response = request.send().await?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!("HTTP {status}: {body}");
    }
    Ok(body)
}
