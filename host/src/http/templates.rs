//! `/templates`: create, list, read and submit for review. Decisions are recorded as `template.status`
//! events in the same transaction.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiJson, QueryMap, parse_id};
use crate::auth::PartnerAuth;
use crate::clock::record_time;
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::state::AppState;
use crate::store::templates::{self as store, NewTemplate, Template};
use crate::template::{self, CATEGORIES, CHANNELS, TemplateStatus};
use crate::validate::is_code;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/templates", post(create_template).get(list_templates))
        .route("/templates/{id}", get(get_template))
        .route("/templates/{id}/submit", post(submit_template))
}

pub fn template_json(t: &Template) -> Value {
    json!({
        "template_id": t.id,
        "code": t.code,
        "channel": t.channel,
        "lang": t.lang,
        "category": t.category,
        "body": t.body,
        "status": t.status,
        "variables": t.variables,
        "rejection_reason": t.rejection_reason,
        "created_at": record_time(t.created_at),
    })
}

#[derive(Deserialize)]
struct CreateTemplate {
    code: Option<String>,
    channel: Option<String>,
    lang: Option<String>,
    category: Option<String>,
    body: Option<String>,
}

/// Language tags like `en`, `pt-BR`, `es_419`.
fn is_lang(s: &str) -> bool {
    let mut parts = s.split(['-', '_']);
    let primary = parts.next().unwrap_or("");
    (2..=3).contains(&primary.len())
        && primary.chars().all(|c| c.is_ascii_lowercase())
        && parts.all(|p| (2..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

async fn create_template(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<CreateTemplate>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let code = req.code.as_deref().unwrap_or("").trim();
    if !is_code(code) {
        return Err(ApiError::validation("code", "code must match ^[a-z0-9][a-z0-9_-]{0,63}$"));
    }
    let channel = req.channel.as_deref().unwrap_or("").trim();
    if !CHANNELS.contains(&channel) {
        return Err(ApiError::validation("channel", format!("channel must be one of {}", CHANNELS.join(", "))));
    }
    let lang = req.lang.as_deref().map(str::trim).filter(|l| !l.is_empty()).unwrap_or("en");
    if !is_lang(lang) {
        return Err(ApiError::validation("lang", "lang must be a language code such as en or pt-BR"));
    }
    let category = req.category.as_deref().unwrap_or("").trim();
    if !CATEGORIES.contains(&category) {
        return Err(ApiError::validation("category", format!("category must be one of {}", CATEGORIES.join(", "))));
    }
    let body = req.body.as_deref().unwrap_or("");
    if body.trim().is_empty() {
        return Err(ApiError::validation("body", "body is required"));
    }
    let variables = template::variables(body);
    let new = NewTemplate { code, channel, lang, category, body, variables: &variables };
    let created = store::insert_template(&state.db, partner.id, &new, state.now())
        .await?
        .ok_or_else(|| ApiError::conflict(format!("template {code:?} already exists for {channel} in {lang}")))?;
    Ok((StatusCode::CREATED, Json(template_json(&created))))
}

async fn list_templates(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    let page = query.page()?;
    let rows = store::list_templates(&state.db, partner.id, page.before, page.fetch()).await?;
    Ok(Json(page.respond(rows, |t| t.id, template_json)))
}

async fn get_template(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, "template")?;
    let t = store::find_template(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("template"))?;
    Ok(Json(template_json(&t)))
}

/// The automatic review's decision for a body: `approved`, or `rejected` with the reason.
pub fn auto_decision(body: &str) -> (TemplateStatus, Option<String>) {
    match template::review(body) {
        Ok(()) => (TemplateStatus::Approved, None),
        Err(problem) => (TemplateStatus::Rejected, Some(problem.to_string())),
    }
}

async fn submit_template(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, "template")?;
    let t = store::find_template(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("template"))?;
    if !t.status.can_submit() {
        return Err(ApiError::conflict(format!("the template is already {}", t.status)));
    }
    let (status, reason) =
        if state.config.auto_review() { auto_decision(&t.body) } else { (TemplateStatus::Pending, None) };
    let now = state.now();
    let decided = store::set_status(&state.db, partner.id, id, status, reason.as_deref(), now, |t| {
        events::template_status(&partner.code, t, now)
    })
    .await?
    .ok_or_else(|| ApiError::not_found("template"))?;
    Ok(Json(template_json(&decided)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn languages() {
        assert!(super::is_lang("en") && super::is_lang("pt-BR") && super::is_lang("es_419"));
        assert!(!super::is_lang("EN") && !super::is_lang("e") && !super::is_lang("en-") && !super::is_lang(""));
    }
}
