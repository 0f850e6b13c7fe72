//! SMS and WhatsApp providers behind one trait: the dev sink, Twilio's Messages API and the WhatsApp
//! Cloud API. A provider error or timeout is a failed attempt with a reason, never a crash.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde_json::{Value, json};

use crate::clock::SharedClock;
use crate::config::{Config, SmsProviderKind, WhatsAppProviderKind};
use crate::names::Channel;
pub use crate::store::dev_sink::{SinkRecord, list as dev_sink_list};
use crate::store::writer::GroupCommit;
use crate::store::{Db, dev_sink};
use crate::validate::is_global_unicast;

pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<String, SendError>> + Send + 'a>>;

/// Why a provider did not take a message, as delivery acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The provider asks us to slow down (HTTP 429; WhatsApp 130429, 131056, 80007, 131048; Twilio 20429,
    /// 14107): the message waits and goes again, after `retry_after_ms` when the provider said. Never a
    /// failure, never a reason for the next channel.
    Throttled { reason: String, retry_after_ms: Option<u64> },
    /// The provider could not be reached or failed on its side (5xx, a timeout, a refused connection): the
    /// message goes again while the partner's retry budget lasts, then the next channel takes over.
    Unavailable(String),
    /// The provider refused this message: the next channel takes over.
    Refused(String),
}

impl SendError {
    /// What the attempt records.
    pub fn reason(&self) -> &str {
        match self {
            SendError::Throttled { reason, .. } | SendError::Unavailable(reason) | SendError::Refused(reason) => reason,
        }
    }
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason())
    }
}

impl From<String> for SendError {
    fn from(reason: String) -> Self {
        SendError::Refused(reason)
    }
}

/// WhatsApp Cloud API error codes that mean "slow down" (throughput, pair rate, the app's rate, spam rate).
const META_THROTTLES: [i64; 4] = [130429, 131056, 80007, 131048];

/// Twilio error codes that mean "slow down" (too many requests, the sender's rate exceeded).
const TWILIO_THROTTLES: [i64; 2] = [20429, 14107];

/// The provider's `Retry-After` (seconds), in milliseconds.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(|s| s.min(3_600) * 1000)
}

/// How a provider's answer that was not a success is acted on: a throttle by its status (429) or its error
/// code, an outage by a 5xx, else a refusal.
fn classify(
    status: u16,
    code: Option<i64>,
    throttles: &[i64],
    retry_after_ms: Option<u64>,
    reason: String,
) -> SendError {
    if status == 429 || code.is_some_and(|c| throttles.contains(&c)) {
        SendError::Throttled { reason, retry_after_ms }
    } else if status >= 500 {
        SendError::Unavailable(reason)
    } else {
        SendError::Refused(reason)
    }
}

/// A file a person sent, as the provider keeps it: its bytes and its content type.
pub struct Fetched {
    pub bytes: Vec<u8>,
    pub mimetype: Option<String>,
}

/// Why a file could not be fetched: for good (gone at the provider, too large), or for now (the provider
/// could not be reached, answered 5xx) — then it is tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    Permanent(String),
    Transient(String),
}

pub type FetchFuture<'a> = Pin<Box<dyn Future<Output = Result<Fetched, FetchError>> + Send + 'a>>;

/// Sends a text to a phone on one channel; `Ok` carries the provider's message id, `Err` the reason.
pub trait Provider: Send + Sync {
    fn send<'a>(&'a self, phone: &'a str, text: &'a str) -> SendFuture<'a>;

    /// Sends a message from an approved template (WhatsApp); providers without templates refuse.
    fn send_template<'a>(&'a self, phone: &'a str, template: &'a TemplateMessage) -> SendFuture<'a> {
        let _ = (phone, template);
        Box::pin(async { Err(SendError::Refused("this provider sends no templates".to_string())) })
    }

    /// Sends a WhatsApp `interactive` message (reply buttons, a list, a `cta_url` button); providers without
    /// them send `text`, which says the same in words.
    fn send_interactive<'a>(&'a self, phone: &'a str, interactive: &'a Value, text: &'a str) -> SendFuture<'a> {
        let _ = interactive;
        self.send(phone, text)
    }

    /// Fetches a file a person sent (a WhatsApp media id, a Twilio `MediaUrl`), at most `limit` bytes.
    fn fetch_media<'a>(&'a self, media: &'a str, limit: usize) -> FetchFuture<'a> {
        let _ = (media, limit);
        Box::pin(async { Err(FetchError::Permanent("this provider keeps no files".into())) })
    }

    /// Shows the person that a reply is being written, as an answer to their message `reply_to` (WhatsApp's
    /// typing indicator, which marks that message read too); providers without one do nothing.
    fn typing<'a>(&'a self, reply_to: &'a str) -> SendFuture<'a> {
        let _ = reply_to;
        Box::pin(async { Ok(String::new()) })
    }

    /// Whether free-form text reaches only people who wrote in the last 24 hours (Meta's customer-service
    /// window); such a provider is skipped for them unless a template is sent.
    fn has_free_form_window(&self) -> bool {
        false
    }

    /// Whether its sends are paced (a real provider's: Twilio, the Cloud API); the development sink and a
    /// provider that is not configured are not.
    fn paced(&self) -> bool {
        false
    }
}

/// A message sent from an approved WhatsApp template: its name and language at the provider, the body's
/// parameters in the order of the template's placeholders, and the rendered text (what the dev sink keeps).
#[derive(Debug, Clone)]
pub struct TemplateMessage {
    pub name: String,
    pub lang: String,
    pub parameters: Vec<String>,
    pub text: String,
    /// Its category is `marketing` (what a person who stopped marketing messages does not get).
    pub marketing: bool,
}

/// The name a template has at Meta: its code, with `_` for `-` (Meta allows lowercase letters, digits and
/// underscores).
pub fn meta_template_name(code: &str) -> String {
    code.replace('-', "_")
}

/// A language as Meta writes it: `pt_BR` for `pt-BR`.
pub fn meta_lang(lang: &str) -> String {
    lang.replace('-', "_")
}

/// Records what would be sent; `GET /api/v1/dev-sink/messages` lists it.
pub struct DevSink {
    pub sink: GroupCommit<dev_sink::Sent, i64>,
    pub clock: SharedClock,
    pub channel: Channel,
}

/// The dev sink keeps free-form text at any time (it stands in for a test number) and a template message
/// as its rendered text.
impl Provider for DevSink {
    fn send<'a>(&'a self, phone: &'a str, text: &'a str) -> SendFuture<'a> {
        Box::pin(async move {
            let sent = dev_sink::Sent {
                channel: self.channel.as_str(),
                phone: phone.to_string(),
                text: text.to_string(),
                at: self.clock.now_ms(),
            };
            let id = self.sink.write(sent).await.map_err(|e| SendError::Unavailable(format!("dev sink: {e}")))?;
            Ok(format!("sink_{id}"))
        })
    }

    fn send_template<'a>(&'a self, phone: &'a str, template: &'a TemplateMessage) -> SendFuture<'a> {
        self.send(phone, &template.text)
    }
}

/// No provider configured: every attempt fails with that reason.
pub struct Unconfigured(pub &'static str);

impl Provider for Unconfigured {
    fn send<'a>(&'a self, _: &'a str, _: &'a str) -> SendFuture<'a> {
        Box::pin(async move { Err(SendError::Refused(format!("no {} provider is configured", self.0))) })
    }
}

/// Twilio's `POST /2010-04-01/Accounts/{sid}/Messages.json` (form-encoded `To`, `From`, `Body`, and
/// `StatusCallback` for delivery receipts).
pub struct TwilioSms {
    pub http: reqwest::Client,
    pub base_url: String,
    pub account_sid: String,
    pub auth_token: String,
    pub from: String,
    /// Where Twilio posts status callbacks: only a public https URL (Twilio cannot reach anything else).
    pub status_callback: Option<String>,
}

impl Provider for TwilioSms {
    fn send<'a>(&'a self, phone: &'a str, text: &'a str) -> SendFuture<'a> {
        Box::pin(async move {
            let url = format!(
                "{}/2010-04-01/Accounts/{}/Messages.json",
                self.base_url.trim_end_matches('/'),
                self.account_sid
            );
            let mut fields = vec![("To", phone), ("From", self.from.as_str()), ("Body", text)];
            if let Some(url) = &self.status_callback {
                fields.push(("StatusCallback", url.as_str()));
            }
            let form = serde_urlencoded::to_string(fields).map_err(|e| SendError::Refused(format!("twilio: {e}")))?;
            let response = self
                .http
                .post(url)
                .basic_auth(&self.account_sid, Some(&self.auth_token))
                .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(form)
                .send()
                .await
                .map_err(|e| SendError::Unavailable(describe("twilio", &e)))?;
            let status = response.status();
            let wait = retry_after(response.headers());
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if !status.is_success() {
                let detail = body["message"].as_str().unwrap_or("");
                let reason = format!("twilio: HTTP {} {detail}", status.as_u16()).trim_end().to_string();
                return Err(classify(status.as_u16(), body["code"].as_i64(), &TWILIO_THROTTLES, wait, reason));
            }
            Ok(body["sid"].as_str().unwrap_or("").to_string())
        })
    }

    fn paced(&self) -> bool {
        true
    }

    /// A `MediaUrl` of an inbound message: only a file of this account's messages
    /// (`{base}/2010-04-01/Accounts/{sid}/Messages/{message}/Media/{media}`), fetched with its credentials
    /// (Twilio answers with a redirect to the file); nothing else of the API is ever fetched for one.
    fn fetch_media<'a>(&'a self, url: &'a str, limit: usize) -> FetchFuture<'a> {
        Box::pin(async move {
            let ours =
                format!("{}/2010-04-01/Accounts/{}/Messages/", self.base_url.trim_end_matches('/'), self.account_sid);
            let file =
                url.strip_prefix(&ours).and_then(|rest| rest.split_once("/Media/")).is_some_and(|(message, media)| {
                    let id = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
                    id(message) && id(media)
                });
            if !file {
                return Err(FetchError::Permanent(format!("twilio: {url} is not a file of this Twilio account")));
            }
            download("twilio", self.http.get(url).basic_auth(&self.account_sid, Some(&self.auth_token)), limit).await
        })
    }
}

/// The WhatsApp Cloud API's `POST /{phone_number_id}/messages` with a text message.
pub struct WhatsAppCloud {
    pub http: reqwest::Client,
    pub base_url: String,
    pub token: String,
    pub phone_number_id: String,
}

impl Provider for WhatsAppCloud {
    fn send<'a>(&'a self, phone: &'a str, text: &'a str) -> SendFuture<'a> {
        let payload = json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": phone.trim_start_matches('+'),
            "type": "text",
            "text": { "preview_url": true, "body": text },
        });
        Box::pin(self.post_message(payload))
    }

    /// A `type: template` message: the template's name and language, and its body's parameters.
    fn send_template<'a>(&'a self, phone: &'a str, template: &'a TemplateMessage) -> SendFuture<'a> {
        let mut body = json!({ "name": template.name, "language": { "code": meta_lang(&template.lang) } });
        if !template.parameters.is_empty() {
            let parameters: Vec<Value> =
                template.parameters.iter().map(|p| json!({ "type": "text", "text": p })).collect();
            body["components"] = json!([{ "type": "body", "parameters": parameters }]);
        }
        let payload = json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": phone.trim_start_matches('+'),
            "type": "template",
            "template": body,
        });
        Box::pin(self.post_message(payload))
    }

    /// A `type: interactive` message.
    fn send_interactive<'a>(&'a self, phone: &'a str, interactive: &'a Value, _text: &'a str) -> SendFuture<'a> {
        let payload = json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": phone.trim_start_matches('+'),
            "type": "interactive",
            "interactive": interactive,
        });
        Box::pin(self.post_message(payload))
    }

    /// `GET /{media id}` (its download URL and type), then the file from that URL, both with the token.
    fn fetch_media<'a>(&'a self, id: &'a str, limit: usize) -> FetchFuture<'a> {
        Box::pin(async move {
            if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(FetchError::Permanent(format!("whatsapp: {id:?} is not a media id")));
            }
            let url = format!("{}/{id}", self.base_url.trim_end_matches('/'));
            let about = meta_call(self.http.get(url).bearer_auth(&self.token)).await.map_err(|e| match e.status {
                Some(status) if status < 500 && status != 429 => FetchError::Permanent(e.reason),
                _ => FetchError::Transient(e.reason),
            })?;
            if about["file_size"].as_u64().is_some_and(|size| size > limit as u64) {
                return Err(FetchError::Permanent(format!("the file is larger than {limit} bytes")));
            }
            let Some(location) = about["url"].as_str() else {
                return Err(FetchError::Permanent("whatsapp: the media has no url".into()));
            };
            let mut fetched = download("whatsapp", self.http.get(location).bearer_auth(&self.token), limit).await?;
            fetched.mimetype = about["mime_type"].as_str().map(str::to_string).or(fetched.mimetype);
            Ok(fetched)
        })
    }

    /// The Cloud API's typing indicator: the message `reply_to` marked read, with "typing…" shown for up to
    /// 25 seconds or until the reply comes.
    fn typing<'a>(&'a self, reply_to: &'a str) -> SendFuture<'a> {
        let payload = json!({
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": reply_to,
            "typing_indicator": { "type": "text" },
        });
        Box::pin(self.post_message(payload))
    }

    fn has_free_form_window(&self) -> bool {
        true
    }

    fn paced(&self) -> bool {
        true
    }
}

/// The answer to `request`, at most `limit` bytes (read as it comes, so a larger file is never held whole).
async fn download(provider: &str, request: reqwest::RequestBuilder, limit: usize) -> Result<Fetched, FetchError> {
    let mut response = request.send().await.map_err(|e| FetchError::Transient(describe(provider, &e)))?;
    let status = response.status();
    if !status.is_success() {
        let why = format!("{provider}: the file answered HTTP {}", status.as_u16());
        return Err(match status.is_server_error() || status.as_u16() == 429 {
            true => FetchError::Transient(why),
            false => FetchError::Permanent(why),
        });
    }
    let too_large = || FetchError::Permanent(format!("the file is larger than {limit} bytes"));
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mimetype = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or(v).trim().to_string());
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| FetchError::Transient(describe(provider, &e)))? {
        if bytes.len() + chunk.len() > limit {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Fetched { bytes, mimetype })
}

impl WhatsAppCloud {
    /// `POST /{phone_number_id}/messages`; `Ok` with the message id Meta gave it.
    async fn post_message(&self, payload: Value) -> Result<String, SendError> {
        let url = format!("{}/{}/messages", self.base_url.trim_end_matches('/'), self.phone_number_id);
        let body = meta_call(self.http.post(url).bearer_auth(&self.token).json(&payload)).await.map_err(|e| match e
            .status
        {
            None => SendError::Unavailable(e.reason),
            Some(status) => classify(status, e.code, &META_THROTTLES, e.retry_after_ms, e.reason),
        })?;
        Ok(body["messages"][0]["id"].as_str().unwrap_or("").to_string())
    }
}

/// Why a Graph API call failed: the HTTP status Meta answered with (none when it was not reached), Meta's
/// error code and `Retry-After` when it gave them, and the reason with Meta's error message.
#[derive(Debug)]
pub struct MetaError {
    pub status: Option<u16>,
    pub code: Option<i64>,
    pub retry_after_ms: Option<u64>,
    pub reason: String,
}

impl MetaError {
    /// Meta refused the request itself (4xx): sending it again would not help.
    pub fn is_refusal(&self) -> bool {
        self.status.is_some_and(|s| (400..500).contains(&s))
    }
}

/// One Graph API call: the answer's JSON on 2xx.
pub async fn meta_call(request: reqwest::RequestBuilder) -> Result<Value, MetaError> {
    let response = request.send().await.map_err(|e| MetaError {
        status: None,
        code: None,
        retry_after_ms: None,
        reason: describe("whatsapp", &e),
    })?;
    let status = response.status();
    let retry_after_ms = retry_after(response.headers());
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let detail = body["error"]["message"].as_str().unwrap_or("");
        let code = body["error"]["code"].as_i64();
        let reason = match code {
            Some(code) => format!("whatsapp: HTTP {} ({code}) {detail}", status.as_u16()),
            None => format!("whatsapp: HTTP {} {detail}", status.as_u16()),
        };
        return Err(MetaError {
            status: Some(status.as_u16()),
            code,
            retry_after_ms,
            reason: reason.trim_end().into(),
        });
    }
    Ok(body)
}

fn describe(provider: &str, e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("{provider}: timed out")
    } else if e.is_connect() {
        format!("{provider}: could not connect")
    } else {
        format!("{provider}: {e}")
    }
}

/// The HTTP client providers share (timeouts from the configuration).
pub fn http_client(config: &Config) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_millis(config.provider_timeout_ms))
        .connect_timeout(Duration::from_millis(config.provider_timeout_ms.min(5_000)))
        .build()
        .expect("HTTP client builds")
}

/// A DNS resolver that keeps only globally routable unicast addresses (see [`is_global_unicast`]), so a URL
/// someone else gave (a webhook, a push endpoint) cannot reach inside the network even when its DNS changes
/// after it was checked.
struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = addrs.into_iter().filter(|a| is_global_unicast(a.ip())).collect();
            if public.is_empty() {
                return Err(format!("{host} resolves to no public address").into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// The client for URLs other people give (webhooks, Web Push endpoints): no redirects, no proxy, the given
/// timeout, and outside dev mode only public addresses.
pub fn outbound_client(config: &Config, timeout_ms: u64, user_agent: &str) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .timeout(Duration::from_millis(timeout_ms))
        .redirect(reqwest::redirect::Policy::none())
        // A proxy from the environment (`HTTPS_PROXY`) would connect on our behalf, past the address check.
        .no_proxy()
        .user_agent(user_agent.to_string());
    if !config.dev {
        builder = builder.dns_resolver(Arc::new(PublicOnly));
    }
    builder.build().expect("outbound client builds")
}

/// The innermost cause of a request's error (the refused address, the TLS failure), for logs and attempts.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut current = e;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

/// The SMS provider kind the configuration selects: the one named, else the dev sink in dev mode, Twilio
/// when an account SID is set, else none.
fn sms_kind(config: &Config) -> Option<SmsProviderKind> {
    config.sms_provider.or(if config.dev {
        Some(SmsProviderKind::DevSink)
    } else if config.twilio_account_sid.is_some() {
        Some(SmsProviderKind::Twilio)
    } else {
        None
    })
}

/// The WhatsApp provider kind the configuration selects: the one named, else the dev sink in dev mode, the
/// Cloud API when a token is set, else none.
fn whatsapp_kind(config: &Config) -> Option<WhatsAppProviderKind> {
    config.whatsapp_provider.or(if config.dev {
        Some(WhatsAppProviderKind::DevSink)
    } else if config.whatsapp_token.is_some() {
        Some(WhatsAppProviderKind::Cloud)
    } else {
        None
    })
}

/// Why a partner's own sender was not shown to be its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnershipError {
    /// The provider answered, and the sender is not the credentials' (or the credentials are refused):
    /// the field at fault and why.
    Refused { field: &'static str, reason: String },
    /// The provider could not be asked now (unreachable, 5xx, 429): try again.
    Unreachable(String),
}

/// Asks the provider whether the credentials of `sender` (a partner's own) hold its address: a WhatsApp
/// number that is in the business account the token can see (`GET /{waba}/phone_numbers`), a Twilio number
/// of the account (`GET …/IncomingPhoneNumbers.json?PhoneNumber=`) or a messaging service of it
/// (`GET /v1/Services/{MG…}`). Where the host's provider for the channel is the development sink, which
/// stands in for every number, nothing is asked.
pub async fn check_ownership(
    config: &Config,
    http: &reqwest::Client,
    sender: &crate::store::senders::Sender,
) -> Result<(), OwnershipError> {
    match sender.channel {
        Channel::Whatsapp if whatsapp_kind(config) == Some(WhatsAppProviderKind::DevSink) => Ok(()),
        Channel::Sms if sms_kind(config) == Some(SmsProviderKind::DevSink) => Ok(()),
        Channel::Whatsapp => {
            // The business account's numbers, page after page (a few at most: Meta allows 20 by default).
            let base = config.whatsapp_base_url.trim_end_matches('/');
            let mut url = format!("{base}/{}/phone_numbers?fields=id&limit=100", sender.account);
            for _ in 0..WHATSAPP_NUMBER_PAGES {
                let found = ownership_call("whatsapp", http.get(&url).bearer_auth(&sender.token), "token").await?;
                let mut ids = found["data"].as_array().into_iter().flatten().filter_map(|n| n["id"].as_str());
                if ids.any(|id| id == sender.address) {
                    return Ok(());
                }
                // Meta's `paging.next` is a URL of its own; only the cursor is taken, on our base URL.
                let Some(after) =
                    found["paging"]["cursors"]["after"].as_str().filter(|_| found["paging"]["next"].is_string())
                else {
                    break;
                };
                let after = serde_urlencoded::to_string([("after", after)]).unwrap_or_default();
                url = format!("{base}/{}/phone_numbers?fields=id&limit=100&{after}", sender.account);
            }
            Err(OwnershipError::Refused {
                field: "phone_number_id",
                reason: format!(
                    "Meta lists no number {} in business account {} for this token",
                    sender.address, sender.account
                ),
            })
        }
        Channel::Sms if sender.address.starts_with("MG") => {
            let url =
                format!("{}/v1/Services/{}", config.twilio_messaging_base_url.trim_end_matches('/'), sender.address);
            let request = http.get(url).basic_auth(&sender.account, Some(&sender.token));
            let found = ownership_call("twilio", request, "auth_token").await?;
            if found["account_sid"].as_str() != Some(sender.account.as_str()) {
                return Err(OwnershipError::Refused {
                    field: "from",
                    reason: format!("messaging service {} is not of account {}", sender.address, sender.account),
                });
            }
            Ok(())
        }
        _ => {
            let query = serde_urlencoded::to_string([("PhoneNumber", sender.address.as_str())]).unwrap_or_default();
            let url = format!(
                "{}/2010-04-01/Accounts/{}/IncomingPhoneNumbers.json?{query}",
                config.twilio_base_url.trim_end_matches('/'),
                sender.account
            );
            let request = http.get(url).basic_auth(&sender.account, Some(&sender.token));
            let found = ownership_call("twilio", request, "auth_token").await?;
            let numbers = found["incoming_phone_numbers"].as_array().into_iter().flatten();
            if !numbers.filter_map(|n| n["phone_number"].as_str()).any(|n| n == sender.address) {
                return Err(OwnershipError::Refused {
                    field: "from",
                    reason: format!("Twilio account {} has no number {}", sender.account, sender.address),
                });
            }
            Ok(())
        }
    }
}

/// The pages of a WhatsApp business account's numbers read at most (100 a page).
const WHATSAPP_NUMBER_PAGES: usize = 10;

/// Meta's error codes that mean "too many calls, try later" (its rate limits answer 4xx with them).
const META_THROTTLED: [i64; 6] = [4, 17, 32, 613, 80007, 80008];

/// One lookup of [`check_ownership`]: the answer's JSON on 2xx; refused credentials (401, 403) are the
/// `credentials` field's fault, another 4xx (404: no such account or service) too; a 5xx, a 429 or one of
/// Meta's rate-limit codes is [`OwnershipError::Unreachable`].
async fn ownership_call(
    provider: &str,
    request: reqwest::RequestBuilder,
    credentials: &'static str,
) -> Result<Value, OwnershipError> {
    let response = request.send().await.map_err(|e| OwnershipError::Unreachable(describe(provider, &e)))?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(body);
    }
    let detail = body["error"]["message"].as_str().or(body["message"].as_str()).unwrap_or("");
    let reason = format!("{provider} answered HTTP {} {detail}", status.as_u16()).trim_end().to_string();
    let throttled = body["error"]["code"].as_i64().is_some_and(|code| META_THROTTLED.contains(&code));
    if status.is_server_error() || status.as_u16() == 429 || throttled {
        return Err(OwnershipError::Unreachable(reason));
    }
    Err(OwnershipError::Refused { field: credentials, reason: format!("{reason}: these credentials do not hold it") })
}

/// The SMS provider the configuration selects.
pub fn sms(config: &Config, db: &Db, clock: &SharedClock, http: &reqwest::Client) -> Arc<dyn Provider> {
    match sms_kind(config) {
        Some(SmsProviderKind::DevSink) => {
            Arc::new(DevSink { sink: dev_sink::writer(db.clone()), clock: clock.clone(), channel: Channel::Sms })
        }
        Some(SmsProviderKind::Twilio) => Arc::new(TwilioSms {
            http: http.clone(),
            base_url: config.twilio_base_url.clone(),
            account_sid: config.twilio_account_sid.clone().unwrap_or_default(),
            auth_token: config.twilio_auth_token.clone().unwrap_or_default(),
            from: config.twilio_from.clone().unwrap_or_default(),
            status_callback: Some(twilio_status_url(config))
                .filter(|url| crate::validate::check_public_url(url, false).is_ok()),
        }),
        None => Arc::new(Unconfigured("SMS")),
    }
}

/// The provider of a partner's own sender: its WhatsApp number through the Cloud API, or its Twilio
/// sender, with its credentials (the base URLs and the status callback are the host's).
pub fn own_sender(
    config: &Config,
    http: &reqwest::Client,
    sender: &crate::store::senders::Sender,
) -> Arc<dyn Provider> {
    match sender.channel {
        Channel::Whatsapp => Arc::new(WhatsAppCloud {
            http: http.clone(),
            base_url: config.whatsapp_base_url.clone(),
            token: sender.token.clone(),
            phone_number_id: sender.address.clone(),
        }),
        _ => Arc::new(TwilioSms {
            http: http.clone(),
            base_url: config.twilio_base_url.clone(),
            account_sid: sender.account.clone(),
            auth_token: sender.token.clone(),
            from: sender.address.clone(),
            status_callback: Some(twilio_status_url(config))
                .filter(|url| crate::validate::check_public_url(url, false).is_ok()),
        }),
    }
}

/// The WhatsApp provider the configuration selects.
pub fn whatsapp(config: &Config, db: &Db, clock: &SharedClock, http: &reqwest::Client) -> Arc<dyn Provider> {
    match whatsapp_kind(config) {
        Some(WhatsAppProviderKind::DevSink) => {
            Arc::new(DevSink { sink: dev_sink::writer(db.clone()), clock: clock.clone(), channel: Channel::Whatsapp })
        }
        Some(WhatsAppProviderKind::Cloud) => Arc::new(WhatsAppCloud {
            http: http.clone(),
            base_url: config.whatsapp_base_url.clone(),
            token: config.whatsapp_token.clone().unwrap_or_default(),
            phone_number_id: config.whatsapp_phone_number_id.clone().unwrap_or_default(),
        }),
        None => Arc::new(Unconfigured("WhatsApp")),
    }
}

/// The status callback URL given to Twilio with every SMS, and so the URL Twilio signs.
pub fn twilio_status_url(config: &crate::config::Config) -> String {
    format!("{}/api/v1/providers/twilio/status", config.public_url.trim_end_matches('/'))
}

/// The URL Twilio calls when a message comes in to our number (set as the number's or messaging service's
/// incoming-message webhook); its signature is over this URL.
pub fn twilio_inbound_url(config: &crate::config::Config) -> String {
    format!("{}/api/v1/providers/twilio/inbound", config.public_url.trim_end_matches('/'))
}
