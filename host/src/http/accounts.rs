//! `/accounts` and `/settings/account-fields`: partners link user accounts (creating them when needed,
//! with their custom field values, optionally inviting the user by SMS) and define those fields.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{ApiJson, parse_id};
use crate::auth::PartnerAuth;
use crate::error::{ApiError, ApiResult};
use crate::forms::{self, ACCOUNT_FIELD_TYPES, Choice, FieldDef, account_field_kind};
use crate::state::AppState;
use crate::store::accounts::{self as store, Account, AccountField};
use crate::store::is_unique_violation;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/accounts/link", post(link))
        .route("/accounts/{phone}", get(get_account))
        .route("/settings/account-fields", get(list_fields).post(create_field))
        .route("/settings/account-fields/{id}", patch(update_field).delete(delete_field))
}

/// The account as a partner sees it: only that partner in `partners`, with its field values.
fn partner_account_json(
    account: &Account,
    partner: &crate::store::partners::Partner,
    fields: &Map<String, Value>,
) -> Value {
    json!({
        "phone": account.phone,
        "state": account.state,
        "display_name": account.display_name,
        "partners": [{ "code": partner.code, "name": partner.name }],
        "fields": fields,
    })
}

/// The account as its user sees it: every linked partner.
pub async fn user_account_json(state: &AppState, account: &Account) -> ApiResult<Value> {
    let partners = store::linked_partners(&state.db, account.id).await?;
    Ok(json!({
        "phone": account.phone,
        "state": account.state,
        "display_name": account.display_name,
        "partners": partners.iter().map(|(code, name)| json!({"code": code, "name": name})).collect::<Vec<_>>(),
    }))
}

#[derive(Deserialize)]
struct Link {
    phone: Option<String>,
    invite: Option<bool>,
    display_name: Option<String>,
    fields: Option<Map<String, Value>>,
}

async fn link(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<Link>,
) -> ApiResult<Json<Value>> {
    let phone = super::required_phone(req.phone.as_deref())?;
    let display_name = req.display_name.as_deref().map(str::trim).filter(|n| !n.is_empty());
    if display_name.is_some_and(|n| n.chars().count() > 200) {
        return Err(ApiError::validation("display_name", "display_name is at most 200 characters"));
    }
    // Required fields are checked over what the partner already stored plus what it sends now.
    let defs: Vec<FieldDef> = store::list_fields(&state.db, partner.id).await?.into_iter().map(|f| f.def).collect();
    let mut merged = store::find_linked(&state.db, partner.id, phone).await?.map(|(_, f)| f).unwrap_or_default();
    for (k, v) in req.fields.clone().unwrap_or_default() {
        merged.insert(k, v);
    }
    let clean = forms::validate(&defs, &merged).map_err(|errors| {
        ApiError::invalid_fields(
            errors.into_iter().map(|(k, v)| (format!("fields.{k}"), v)).collect::<BTreeMap<_, _>>(),
        )
    })?;
    let (account, fields) =
        store::link_account(&state.db, partner.id, phone, display_name, &clean, state.now()).await?;
    let invited = if req.invite.unwrap_or(false) && account.state != "claimed" {
        let text = format!(
            "{} invites you to Hubbub. Open {} and sign in with this phone number to claim your account.",
            partner.name,
            state.config.public_url.trim_end_matches('/')
        );
        match state.delivery.sms.send(phone, &text).await {
            Ok(_) => true,
            Err(reason) => {
                tracing::warn!(%reason, "invitation SMS failed");
                false
            }
        }
    } else {
        false
    };
    Ok(Json(
        json!({ "account": partner_account_json(&account, &partner, &fields), "linked": true, "invited": invited }),
    ))
}

async fn get_account(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(phone): Path<String>,
) -> ApiResult<Json<Value>> {
    let (account, fields) =
        store::find_linked(&state.db, partner.id, phone.trim()).await?.ok_or_else(|| ApiError::not_found("account"))?;
    Ok(Json(partner_account_json(&account, &partner, &fields)))
}

fn field_json(f: &AccountField) -> Value {
    let mut v =
        json!({"id": f.id, "key": f.def.key, "label": f.def.label, "type": f.type_name, "required": f.def.required});
    if !f.def.options.is_empty() {
        v["options"] = json!(f.def.options);
    }
    v
}

#[derive(Deserialize, Default)]
struct FieldBody {
    key: Option<String>,
    label: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    required: Option<bool>,
    options: Option<Vec<Choice>>,
}

/// A complete, checked definition from a body laid over `base` (PATCH) or nothing (POST).
fn build_field(body: FieldBody, base: Option<&AccountField>) -> ApiResult<(String, FieldDef)> {
    let key = body.key.or_else(|| base.map(|b| b.def.key.clone())).unwrap_or_default();
    let label = body.label.or_else(|| base.map(|b| b.def.label.clone())).unwrap_or_default();
    let type_name = body.kind.or_else(|| base.map(|b| b.type_name.clone())).unwrap_or_default();
    let required = body.required.or(base.map(|b| b.def.required)).unwrap_or(false);
    let options = body.options.or_else(|| base.map(|b| b.def.options.clone())).unwrap_or_default();
    if !crate::validate::is_code(&key) {
        return Err(ApiError::validation("key", "key must match ^[a-z0-9][a-z0-9_-]{0,63}$"));
    }
    if label.trim().is_empty() {
        return Err(ApiError::validation("label", "label is required"));
    }
    let kind = account_field_kind(&type_name).ok_or_else(|| {
        ApiError::validation("type", format!("type must be one of {}", ACCOUNT_FIELD_TYPES.join(", ")))
    })?;
    let def = FieldDef { key, kind, label: label.trim().to_string(), required, placeholder: None, options };
    forms::check_definitions(std::slice::from_ref(&def)).map_err(|msg| ApiError::validation("options", msg))?;
    Ok((type_name, def))
}

async fn list_fields(State(state): State<AppState>, PartnerAuth(partner): PartnerAuth) -> ApiResult<Json<Value>> {
    let fields = store::list_fields(&state.db, partner.id).await?;
    Ok(Json(json!({ "data": fields.iter().map(field_json).collect::<Vec<_>>(), "next_cursor": null })))
}

async fn create_field(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(body): ApiJson<FieldBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let (type_name, def) = build_field(body, None)?;
    let created = store::insert_field(&state.db, partner.id, &type_name, &def, state.now())
        .await?
        .ok_or_else(|| ApiError::conflict(format!("field key {:?} already exists", def.key)))?;
    Ok((StatusCode::CREATED, Json(field_json(&created))))
}

async fn update_field(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<FieldBody>,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, "account field")?;
    let current =
        store::find_field(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("account field"))?;
    let (type_name, def) = build_field(body, Some(&current))?;
    match store::update_field(&state.db, partner.id, id, &type_name, &def).await {
        Ok(Some(updated)) => Ok(Json(field_json(&updated))),
        Ok(None) => Err(ApiError::not_found("account field")),
        Err(e) if is_unique_violation(&e) => Err(ApiError::conflict(format!("field key {:?} already exists", def.key))),
        Err(e) => Err(e.into()),
    }
}

async fn delete_field(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = parse_id(&id, "account field")?;
    if store::delete_field(&state.db, partner.id, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("account field"))
    }
}
