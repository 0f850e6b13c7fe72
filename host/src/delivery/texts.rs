//! The words a message goes out as on WhatsApp and SMS: who it is from, its text or a link into the app,
//! the opaque alert about an encrypted message, and a satisfaction question as a WhatsApp list.

use serde_json::Value;

use super::is_encrypted;
use crate::store::messages::Message;

/// Where the app opens a message: `/m/{ref}` (after the user signs in, when needed).
pub fn app_link(public_url: &str, m: &Message) -> String {
    format!("{}/m/{}", public_url.trim_end_matches('/'), m.reference)
}

/// The text sent by SMS or WhatsApp: who it is from ([`sender`]), then the body (or rendered template), with a
/// link into the app for flow invitations, newsletters and stored media (URL media and links go to their own
/// URL). An encrypted message is never described: the text only says one is waiting, and links to it in the
/// app.
pub fn fallback_text(m: &Message, partner_name: &str, public_url: &str) -> String {
    if is_encrypted(m) {
        return alert_text(partner_name, public_url, m);
    }
    let in_app = app_link(public_url, m);
    let body = m.body.as_deref().unwrap_or("").trim();
    let text = match m.content_type.as_str() {
        "link" => {
            let link = &m.content["link"];
            let lead = [Some(body), link["title"].as_str()].into_iter().flatten().find(|s| !s.is_empty()).unwrap_or("");
            format!("{lead} {}", link["url"].as_str().unwrap_or(&in_app))
        }
        "image" | "document" | "audio" | "video" => {
            let url = m.content["media"]["url"].as_str().unwrap_or("");
            let url = if url.starts_with("https://") || url.starts_with("http://") { url.to_string() } else { in_app };
            format!("{body} {url}")
        }
        "html" => {
            let title = [m.content["subject"].as_str(), m.content["preview"].as_str()]
                .into_iter()
                .flatten()
                .find(|s| !s.is_empty())
                .unwrap_or("A new newsletter");
            format!("{title} {in_app}")
        }
        _ => match m.content["flow"]["ref"].as_str() {
            // A flow invitation opens its form.
            Some(flow) => format!("{body} {}/forms/{flow}", public_url.trim_end_matches('/')),
            None => body.to_string(),
        },
    };
    format!("{}: {}", sender(m, partner_name), text.trim())
}

/// Who a text on another channel says it is from: the partner, or for an agent's reply the agent's first
/// name with it ("Ana from Acme").
pub fn sender(m: &Message, partner_name: &str) -> String {
    match crate::members::first_name(m.author_name.as_deref()) {
        Some(first) => format!("{first} from {partner_name}"),
        None => partner_name.to_string(),
    }
}

/// The opaque alert about an encrypted message: who sent it and the link that opens it in the app, never
/// what it says.
pub fn alert_text(partner_name: &str, public_url: &str, m: &Message) -> String {
    format!(
        "{partner_name} sent you a new message. It is waiting in your Hubbub inbox: open the app to read it: {}",
        app_link(public_url, m)
    )
}

/// A satisfaction question as a WhatsApp list: `question`, and a row for each score, its title the number.
pub(super) fn rating_list(question: &str) -> Value {
    let words = ["Poor", "Not great", "OK", "Good", "Great"];
    let rows: Vec<Value> = (1..=5)
        .rev()
        .map(
            |n| serde_json::json!({ "id": format!("rating:{n}"), "title": n.to_string(), "description": words[n - 1] }),
        )
        .collect();
    let body: String = question.chars().take(1024).collect();
    serde_json::json!({
        "type": "list",
        "body": { "text": body },
        "action": { "button": "Rate", "sections": [{ "title": "Your rating", "rows": rows }] },
    })
}
