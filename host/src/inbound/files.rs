//! Files people send (WhatsApp media, SMS `MediaUrl`s): fetched from the provider and kept as Hubbub media.

use crate::delivery::Delivery;
use crate::messages::compose::SendMessage;
use crate::names::{Channel, ContentType};
use crate::providers::FetchError;
use crate::store::inbound::Inbound;
use crate::store::senders;

/// A file a person sent: the provider's reference to it (a WhatsApp media id, a Twilio `MediaUrl`), what
/// kind of message it makes, and what the provider said of it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct File {
    reference: String,
    kind: ContentType,
    filename: Option<String>,
    mimetype: Option<String>,
    /// WhatsApp's caption of it.
    caption: Option<String>,
}

/// The files of `m`: a WhatsApp image, document, audio, video or sticker; an SMS's `MediaUrl`s.
pub(super) fn files_of(m: &Inbound) -> Vec<File> {
    let c = &m.content;
    match m.channel {
        Channel::Whatsapp => {
            let kind = match c["type"].as_str() {
                Some("image" | "sticker") => ContentType::Image,
                Some("document") => ContentType::Document,
                Some("audio") => ContentType::Audio,
                Some("video") => ContentType::Video,
                _ => return Vec::new(),
            };
            let media = &c[c["type"].as_str().unwrap_or_default()];
            let Some(id) = media["id"].as_str() else { return Vec::new() };
            let text = |k: &str| media[k].as_str().map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
            vec![File {
                reference: id.to_string(),
                kind,
                filename: text("filename"),
                mimetype: text("mime_type"),
                caption: text("caption"),
            }]
        }
        _ => c["media"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| {
                let mimetype = f["mimetype"].as_str().map(str::to_string);
                let kind = match mimetype.as_deref().and_then(|t| t.split('/').next()) {
                    Some("image") => ContentType::Image,
                    Some("audio") => ContentType::Audio,
                    Some("video") => ContentType::Video,
                    _ => ContentType::Document,
                };
                Some(File { reference: f["url"].as_str()?.to_string(), kind, filename: None, mimetype, caption: None })
            })
            .collect(),
    }
}

/// The messages `m`'s files become: each fetched from the provider (at most `HUBBUB_BODY_LIMIT` bytes) and
/// kept as Hubbub media, the first with the text that came with them — with the credentials of the partner
/// whose own number received them (`receiving`), else the host's. A file that cannot be fetched for
/// good (too large, gone) becomes a line saying so; one the provider cannot give now fails the routing,
/// which is tried again.
pub(super) async fn fetch_files(
    delivery: &Delivery,
    receiving: Option<i64>,
    m: &Inbound,
    files: &[File],
    body: Option<&str>,
) -> Result<Vec<SendMessage>, sqlx::Error> {
    use base64::Engine;
    // The files of a message a partner's own account signed are fetched with that account's credentials as
    // stored now (never the host's, whatever this host last read of the partner's senders); the others
    // with the host's.
    let provider = match receiving {
        Some(_) => match senders::by_address(&delivery.db, m.channel, &m.sender).await? {
            Some(own) if own.account == m.account => {
                crate::providers::own_sender(&delivery.config, &delivery.http, &own)
            }
            _ => return Err(sqlx::Error::Protocol("the partner's sender changed while its files were fetched".into())),
        },
        None => match delivery.sending(None, m.channel).await? {
            Some(sending) => sending.provider,
            None => return Ok(Vec::new()),
        },
    };
    let limit = delivery.config.body_limit;
    let mut requests = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let text = file.caption.clone().or(body.filter(|_| i == 0).map(str::to_string));
        match provider.fetch_media(&file.reference, limit).await {
            Ok(fetched) => requests.push(SendMessage {
                content_type: Some(file.kind),
                body: text,
                media_base64: Some(base64::engine::general_purpose::STANDARD.encode(&fetched.bytes)),
                media_filename: file.filename.clone(),
                media_mimetype: file.mimetype.clone().or(fetched.mimetype),
                ..Default::default()
            }),
            Err(FetchError::Transient(why)) => {
                return Err(sqlx::Error::Protocol(format!("a file could not be fetched now: {why}")));
            }
            Err(FetchError::Permanent(why)) => {
                tracing::warn!(inbound = m.id, reason = %why, "a file a person sent could not be kept");
                let what = match file.kind {
                    ContentType::Image => "a picture",
                    ContentType::Audio => "a recording",
                    ContentType::Video => "a video",
                    _ => "a file",
                };
                let note = format!("(The user sent {what} that could not be kept: {why}.)");
                let line = match text {
                    Some(text) => format!("{text}\n{note}"),
                    None => note,
                };
                requests.push(SendMessage { body: Some(line), ..Default::default() });
            }
        }
    }
    Ok(requests)
}
