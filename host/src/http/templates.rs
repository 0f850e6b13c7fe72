//! `/templates`: create, list, read and submit for review. Decisions are recorded as `template.status`
//! events in the same transaction.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, ApiQuery, E404, E409, List, PageParams, parse_id};
use crate::clock::record_time;
use crate::events;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::{Category, Channel, TemplateStatus};
use crate::store::templates::{self as store, NewTemplate, Template};
use crate::template;
use crate::validate::is_code;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_template, list_templates))
        .routes(routes!(get_template))
        .routes(routes!(submit_template))
}

/// A template as the API answers it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Template)]
pub struct TemplateRecord {
    pub template_id: i64,
    pub code: String,
    #[schema(value_type = Channel)]
    pub channel: String,
    pub lang: String,
    #[schema(value_type = Category)]
    pub category: String,
    pub body: String,
    pub status: TemplateStatus,
    /// The `{{name}}` variables of the body, in order of first use.
    pub variables: Vec<String>,
    /// Why the review rejected it.
    pub rejection_reason: Option<String>,
    pub created_at: String,
}

impl From<&Template> for TemplateRecord {
    fn from(t: &Template) -> Self {
        TemplateRecord {
            template_id: t.id,
            code: t.code.clone(),
            channel: t.channel.clone(),
            lang: t.lang.clone(),
            category: t.category.clone(),
            body: t.body.clone(),
            status: t.status,
            variables: t.variables.clone(),
            rejection_reason: t.rejection_reason.clone(),
            created_at: record_time(t.created_at),
        }
    }
}

/// A new template (status `draft`).
#[derive(Deserialize, ToSchema)]
struct CreateTemplate {
    #[schema(value_type = String, required = true, pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    code: Option<String>,
    #[schema(value_type = Channel, required = true)]
    channel: Option<Channel>,
    /// `en` when absent or empty: a language tag such as `en`, `pt-BR`, `es_419`.
    #[schema(pattern = "^([a-z]{2,3}([-_][A-Za-z0-9]{2,8})*)?$")]
    lang: Option<String>,
    #[schema(value_type = Category, required = true)]
    category: Option<Category>,
    /// The text, with `{{name}}` variables.
    #[schema(value_type = String, required = true, pattern = "\\S")]
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

/// Create a template (status draft).
#[utoipa::path(
    post,
    path = "/templates",
    tag = "templates",
    security(("partnerKey" = [])),
    request_body = CreateTemplate,
    responses((status = 201, description = "The template", body = TemplateRecord), (status = 409, response = E409))
)]
async fn create_template(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<CreateTemplate>,
) -> ApiResult<(StatusCode, Json<TemplateRecord>)> {
    let code = req.code.as_deref().unwrap_or("").trim();
    if !is_code(code) {
        return Err(ApiError::validation("code", "code must match ^[a-z0-9][a-z0-9_-]{0,63}$"));
    }
    let channel = req.channel.ok_or_else(|| {
        ApiError::validation("channel", format!("channel must be one of {}", Channel::names().join(", ")))
    })?;
    let channel = channel.as_str();
    let lang = req.lang.as_deref().map(str::trim).filter(|l| !l.is_empty()).unwrap_or("en");
    if !is_lang(lang) {
        return Err(ApiError::validation("lang", "lang must be a language code such as en or pt-BR"));
    }
    let category = req.category.ok_or_else(|| {
        ApiError::validation("category", format!("category must be one of {}", Category::names().join(", ")))
    })?;
    let category = category.as_str();
    let body = req.body.as_deref().unwrap_or("");
    if body.trim().is_empty() {
        return Err(ApiError::validation("body", "body is required"));
    }
    let variables = template::variables(body);
    let new = NewTemplate { code, channel, lang, category, body, variables: &variables };
    let created = store::insert_template(&state.db, partner.id, &new, state.now())
        .await?
        .ok_or_else(|| ApiError::conflict(format!("template {code:?} already exists for {channel} in {lang}")))?;
    Ok((StatusCode::CREATED, Json(TemplateRecord::from(&created))))
}

/// List templates, newest first.
#[utoipa::path(
    get,
    path = "/templates",
    tag = "templates",
    security(("partnerKey" = [])),
    params(PageParams),
    responses((status = 200, description = "A page of templates", body = List<TemplateRecord>))
)]
async fn list_templates(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<TemplateRecord>>> {
    let page = page.page()?;
    let rows = store::list_templates(&state.db, partner.id, page.before, page.fetch()).await?;
    Ok(Json(page.list(rows, |t| t.id, |t| TemplateRecord::from(t))))
}

/// Get a template.
#[utoipa::path(
    get,
    path = "/templates/{id}",
    tag = "templates",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The template", body = TemplateRecord), (status = 404, response = E404))
)]
async fn get_template(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<TemplateRecord>> {
    let id = parse_id(&id, "template")?;
    let t = store::find_template(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("template"))?;
    Ok(Json(TemplateRecord::from(&t)))
}

/// The automatic review's decision for a body: `approved`, or `rejected` with the reason.
pub fn auto_decision(body: &str) -> (TemplateStatus, Option<String>) {
    match template::review(body) {
        Ok(()) => (TemplateStatus::Approved, None),
        Err(problem) => (TemplateStatus::Rejected, Some(problem.to_string())),
    }
}

/// Submit for review: with automatic review the answer is already approved or rejected, otherwise pending.
#[utoipa::path(
    post,
    path = "/templates/{id}/submit",
    tag = "templates",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The template", body = TemplateRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
    )
)]
async fn submit_template(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<TemplateRecord>> {
    let id = parse_id(&id, "template")?;
    let t = store::find_template(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("template"))?;
    if !t.status.can_submit() {
        return Err(ApiError::conflict(format!("the template is already {}", t.status)));
    }
    // WhatsApp templates are Meta's to approve, when Meta's review is configured (a body our own review
    // rejects never goes there).
    let by_meta = state.delivery.meta_review.as_ref().filter(|_| t.channel == Channel::Whatsapp.as_str());
    if let Some(review) = by_meta.filter(|_| template::review(&t.body).is_ok()) {
        let submitted = review.submit(&state.delivery, &t, &partner.code).await?;
        return Ok(Json(TemplateRecord::from(&submitted)));
    }
    let (status, reason) =
        if state.config.auto_review() { auto_decision(&t.body) } else { (TemplateStatus::Pending, None) };
    let now = state.now();
    let decided = store::set_status(&state.db, partner.id, id, status, reason.as_deref(), now, |t| {
        events::template_status(&partner.code, t, now)
    })
    .await?
    .ok_or_else(|| ApiError::not_found("template"))?;
    Ok(Json(TemplateRecord::from(&decided)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn languages() {
        assert!(super::is_lang("en") && super::is_lang("pt-BR") && super::is_lang("es_419"));
        assert!(!super::is_lang("EN") && !super::is_lang("e") && !super::is_lang("en-") && !super::is_lang(""));
    }
}
