//! `/accounts` and `/settings/account-fields`: partners link user accounts (creating them when needed,
//! with their custom field values, optionally inviting the user by SMS) and define those fields.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E404, E409, List, parse_id};
use crate::forms::{self, ACCOUNT_FIELD_TYPES, Choice, FieldDef, account_field_kind};
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::AccountState;
use crate::store::accounts::{self as store, Account, AccountField};
use crate::store::is_unique_violation;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(link))
        .routes(routes!(get_account, erase_account))
        .routes(routes!(list_fields, create_field))
        .routes(routes!(update_field, delete_field))
}

/// A user account: as a partner sees it (only that partner in `partners`, with its field values), or as
/// its user sees it (every linked partner, no field values).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Account)]
pub struct AccountRecord {
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    pub phone: String,
    pub state: AccountState,
    pub display_name: Option<String>,
    pub partners: Vec<PartnerRef>,
    /// The calling partner's custom values (partner view only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub fields: Option<Map<String, Value>>,
    /// Partner view only: `true` when the person blocked the calling partner in the app (its messages to
    /// them fail, error `blocked_by_user`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<bool>,
}

/// A partner, by code and name.
#[derive(Debug, Serialize, ToSchema)]
pub struct PartnerRef {
    pub code: String,
    pub name: String,
    /// The values this partner keeps in the account's fields (the user's own view only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<FieldValue>>,
}

/// One account field's value, as the user sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct FieldValue {
    pub key: String,
    /// The field's label (its key when the partner has since deleted the field).
    pub label: String,
    /// The value as stored (`selection`: the option's id).
    #[schema(value_type = Object)]
    pub value: Value,
    /// The value as text: the option's label, `Yes`/`No`, or the value itself.
    pub text: String,
}

impl FieldValue {
    fn new(key: &str, value: &Value, def: Option<&FieldDef>) -> FieldValue {
        let text = match (value, def) {
            (Value::String(id), Some(def)) if !def.options.is_empty() => {
                def.options.iter().find(|o| &o.id == id).map_or_else(|| id.clone(), |o| o.label.clone())
            }
            (Value::Bool(yes), _) => (if *yes { "Yes" } else { "No" }).to_string(),
            (Value::String(text), _) => text.clone(),
            (other, _) => other.to_string(),
        };
        FieldValue {
            key: key.to_string(),
            label: def.map_or_else(|| key.to_string(), |d| d.label.clone()),
            value: value.clone(),
            text,
        }
    }
}

/// The account as a partner sees it.
fn partner_account(
    account: &Account,
    partner: &crate::store::partners::Partner,
    fields: &Map<String, Value>,
    blocked: bool,
) -> AccountRecord {
    AccountRecord {
        blocked: Some(blocked),
        phone: account.phone.clone(),
        state: account.state,
        display_name: account.display_name.clone(),
        partners: vec![PartnerRef { code: partner.code.clone(), name: partner.name.clone(), fields: None }],
        fields: Some(fields.clone()),
    }
}

/// The account as its user sees it.
pub async fn user_account(state: &AppState, account: &Account) -> ApiResult<AccountRecord> {
    let mut partners = Vec::new();
    for linked in store::linked_partners(&state.db, account.id).await? {
        let defs = store::list_fields(&state.db, linked.id).await?;
        let fields = linked
            .fields
            .iter()
            .map(|(key, value)| FieldValue::new(key, value, defs.iter().map(|f| &f.def).find(|d| &d.key == key)))
            .collect();
        partners.push(PartnerRef { code: linked.code, name: linked.name, fields: Some(fields) });
    }
    Ok(AccountRecord {
        phone: account.phone.clone(),
        state: account.state,
        display_name: account.display_name.clone(),
        partners,
        fields: None,
        blocked: None,
    })
}

/// Link a user: the account is created when it does not exist yet.
#[derive(Deserialize, ToSchema)]
#[schema(as = AccountLink)]
struct Link {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
    /// Send the user an SMS invitation (unclaimed accounts only).
    invite: Option<bool>,
    #[schema(max_length = 200)]
    display_name: Option<String>,
    /// Values of the partner's account fields (`/settings/account-fields`).
    #[schema(value_type = Option<Object>)]
    fields: Option<Map<String, Value>>,
}

#[derive(Serialize, ToSchema)]
struct Linked {
    account: AccountRecord,
    linked: bool,
    /// Whether the invitation SMS went out.
    invited: bool,
}

/// Create or fetch an account, link it, store custom field values, optionally invite by SMS.
#[utoipa::path(
    post,
    path = "/accounts/link",
    tag = "accounts",
    security(("partnerKey" = [])),
    request_body = Link,
    responses((status = 200, description = "Linked", body = Linked))
)]
async fn link(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<Link>,
) -> ApiResult<Json<Linked>> {
    let phone = crate::validate::required_phone(req.phone.as_deref())?;
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
    let invited = if req.invite.unwrap_or(false) && account.state != AccountState::Claimed {
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
    let blocked = crate::store::preferences::blocked(&state.db, &account.phone, partner.id).await?;
    Ok(Json(Linked { account: partner_account(&account, &partner, &fields, blocked), linked: true, invited }))
}

/// An account linked to the caller.
#[utoipa::path(
    get,
    path = "/accounts/{phone}",
    tag = "accounts",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The account", body = AccountRecord), (status = 404, response = E404))
)]
async fn get_account(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(phone): Path<String>,
) -> ApiResult<Json<AccountRecord>> {
    let (account, fields) =
        store::find_linked(&state.db, partner.id, phone.trim()).await?.ok_or_else(|| ApiError::not_found("account"))?;
    let blocked = crate::store::preferences::blocked(&state.db, &account.phone, partner.id).await?;
    Ok(Json(partner_account(&account, &partner, &fields, blocked)))
}

/// What an erasure removed of the partner's data about one person.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AccountErased)]
struct ErasedRecord {
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: String,
    /// The partner's messages to and from them (with their attempts, history and files) now gone.
    messages: u64,
    /// The partner's conversations with them (with their notes and keys) now gone.
    conversations: u64,
    /// Whether the partner was linked to their account (its custom values went with the link).
    unlinked: bool,
}

/// Erase a person from my data.
///
/// Removes, at once and for good, what the calling partner holds about the phone: its messages to and from
/// them (with their delivery attempts, history, search entries and files), its conversations with them (with
/// their notes and keys), and its link to their account with its custom values. Other partners' data, and the
/// person's own account, stay. Recorded in the audit log. `404` when the partner holds nothing about the phone.
#[utoipa::path(
    delete,
    path = "/accounts/{phone}",
    tag = "accounts",
    security(("partnerKey" = []), ("memberSession" = [])),
    responses((status = 200, description = "What was erased", body = ErasedRecord), (status = 404, response = E404))
)]
async fn erase_account(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(phone): Path<String>,
) -> ApiResult<Json<ErasedRecord>> {
    let phone = phone.trim();
    let erased = crate::store::erasure::partner_erases(&state.db, partner.id, phone)
        .await?
        .ok_or_else(|| ApiError::not_found("account"))?;
    tracing::info!(partner = partner.code, messages = erased.messages, "a person erased from the partner's data");
    Ok(Json(ErasedRecord {
        phone: phone.to_string(),
        messages: erased.messages,
        conversations: erased.conversations,
        unlinked: erased.unlinked,
    }))
}

/// A custom field of the partner's accounts.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AccountField)]
struct FieldRecord {
    id: i64,
    key: String,
    label: String,
    #[serde(rename = "type")]
    #[schema(schema_with = field_type_schema)]
    kind: String,
    required: bool,
    /// Selection fields: the choices.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    options: Vec<Choice>,
}

impl From<&AccountField> for FieldRecord {
    fn from(f: &AccountField) -> Self {
        FieldRecord {
            id: f.id,
            key: f.def.key.clone(),
            label: f.def.label.clone(),
            kind: f.type_name.clone(),
            required: f.def.required,
            options: f.def.options.clone(),
        }
    }
}

/// The account field types, as a string enum.
fn field_type_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(ACCOUNT_FIELD_TYPES.iter().copied()))
        .build()
}

/// An account field definition; on PATCH, the fields given replace those stored.
#[derive(Deserialize, Default, ToSchema)]
#[schema(as = AccountFieldInput)]
struct FieldBody {
    #[schema(pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    key: Option<String>,
    #[schema(min_length = 1, pattern = "\\S")]
    label: Option<String>,
    #[serde(rename = "type")]
    #[schema(schema_with = field_type_schema)]
    kind: Option<String>,
    required: Option<bool>,
    /// Selection fields: the choices (each `id` and `label` non-empty).
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

/// Account field definitions (all of them, in one page).
#[utoipa::path(
    get,
    path = "/settings/account-fields",
    tag = "accounts",
    security(("partnerKey" = [])),
    responses((status = 200, description = "All definitions", body = List<FieldRecord>))
)]
async fn list_fields(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<List<FieldRecord>>> {
    let fields = store::list_fields(&state.db, partner.id).await?;
    Ok(Json(List { data: fields.iter().map(FieldRecord::from).collect(), next_cursor: None }))
}

/// Define an account field.
#[utoipa::path(
    post,
    path = "/settings/account-fields",
    tag = "accounts",
    security(("partnerKey" = [])),
    request_body = FieldBody,
    responses((status = 201, description = "The definition", body = FieldRecord), (status = 409, response = E409))
)]
async fn create_field(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(body): ApiJson<FieldBody>,
) -> ApiResult<(StatusCode, Json<FieldRecord>)> {
    let (type_name, def) = build_field(body, None)?;
    let created = store::insert_field(&state.db, partner.id, &type_name, &def, state.now())
        .await?
        .ok_or_else(|| ApiError::conflict(format!("field key {:?} already exists", def.key)))?;
    Ok((StatusCode::CREATED, Json(FieldRecord::from(&created))))
}

/// Change an account field.
#[utoipa::path(
    patch,
    path = "/settings/account-fields/{id}",
    tag = "accounts",
    security(("partnerKey" = [])),
    request_body = FieldBody,
    responses(
        (status = 200, description = "The definition", body = FieldRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
    )
)]
async fn update_field(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<FieldBody>,
) -> ApiResult<Json<FieldRecord>> {
    let id = parse_id(&id, "account field")?;
    let current =
        store::find_field(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("account field"))?;
    let (type_name, def) = build_field(body, Some(&current))?;
    match store::update_field(&state.db, partner.id, id, &type_name, &def).await {
        Ok(Some(updated)) => Ok(Json(FieldRecord::from(&updated))),
        Ok(None) => Err(ApiError::not_found("account field")),
        Err(e) if is_unique_violation(&e) => Err(ApiError::conflict(format!("field key {:?} already exists", def.key))),
        Err(e) => Err(e.into()),
    }
}

/// Delete an account field.
#[utoipa::path(
    delete,
    path = "/settings/account-fields/{id}",
    tag = "accounts",
    security(("partnerKey" = [])),
    responses((status = 204, description = "Deleted"), (status = 404, response = E404))
)]
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
