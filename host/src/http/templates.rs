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
use crate::delivery::meta_review;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::{Category, Channel, TemplateStatus};
use crate::template::{self, Template};

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
    let input = template::NewTemplateInput {
        code: req.code.as_deref(),
        channel: req.channel,
        lang: req.lang.as_deref(),
        category: req.category,
        body: req.body.as_deref(),
    };
    let created = template::create(&state.db, partner.id, input, state.now()).await?;
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
    let rows = template::list(&state.db, partner.id, page.before, page.fetch()).await?;
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
    let t = template::find(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("template"))?;
    Ok(Json(TemplateRecord::from(&t)))
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
    let submitted =
        meta_review::submit(&state.delivery, (partner.id, &partner.code), id, state.config.auto_review()).await?;
    Ok(Json(TemplateRecord::from(&submitted)))
}
