//! `/accounts` and `/settings/account-fields`: partners link user accounts (creating them when needed,
//! with their custom field values, optionally inviting the user by SMS) and define those fields.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E404, E409, List, parse_id};
use crate::accounts::{self, Account, AccountField, FieldInput, LinkRequest};
use crate::forms::{ACCOUNT_FIELD_TYPES, Choice, FieldDef};
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::AccountState;
use crate::partners::Partner;

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
fn partner_account(account: &Account, partner: &Partner, fields: &Map<String, Value>, blocked: bool) -> AccountRecord {
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
    for (linked, defs) in accounts::linked_partners(&state.db, account.id).await? {
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
    let request = LinkRequest {
        phone: req.phone.as_deref(),
        display_name: req.display_name.as_deref(),
        fields: req.fields.unwrap_or_default(),
        invite: req.invite.unwrap_or(false),
    };
    let sms = (state.delivery.sms.as_ref(), state.config.public_url.as_str());
    let linked = accounts::link(&state.db, (partner.id, &partner.name), request, sms, state.now()).await?;
    let accounts::Linked { account, fields, blocked, invited } = linked;
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
    let (account, fields, blocked) =
        accounts::find_linked(&state.db, partner.id, &phone).await?.ok_or_else(|| ApiError::not_found("account"))?;
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
    let erased = accounts::erase_for_partner(&state.db, partner.id, phone)
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

impl From<FieldBody> for FieldInput {
    fn from(b: FieldBody) -> Self {
        FieldInput { key: b.key, label: b.label, kind: b.kind, required: b.required, options: b.options }
    }
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
    let fields = accounts::fields(&state.db, partner.id).await?;
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
    let created = accounts::create_field(&state.db, partner.id, body.into(), state.now()).await?;
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
    let updated = accounts::update_field(&state.db, partner.id, id, body.into()).await?;
    Ok(Json(FieldRecord::from(&updated)))
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
    accounts::delete_field(&state.db, partner.id, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
