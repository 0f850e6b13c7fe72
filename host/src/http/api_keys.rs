//! A partner's API keys: several at once, so a key is replaced without downtime — create a new one, move the
//! clients to it, revoke the old one. A key is shown once, when created; lists show its prefix, when it was
//! created, last used (written at most once a minute) and revoked. The last key that works cannot be revoked
//! (409): a partner never locks itself out. `hubbub partner create-key | keys | revoke-key` do the same from
//! the command line, and `hubbub partner rotate-key` still replaces them all with one.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E403, E404, E409, List, parse_id};
use crate::clock::record_time;
use crate::http::auth::{PartnerActor, PartnerAuth};
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::MemberRole;
use crate::partners::{self, PartnerKey, Revoked};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_keys, create_key)).routes(routes!(revoke_key))
}

/// One of the partner's API keys (never the key itself).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ApiKey)]
pub struct ApiKeyRecord {
    pub id: i64,
    pub name: String,
    /// `sk_` and the key's first 8 characters.
    pub prefix: String,
    /// What the key may do: the role of the member who made it (`owner` for keys made on the command
    /// line), as far as a member of that role may in the console.
    pub role: MemberRole,
    /// The member who made it (null: the command line; or the member was removed, and the key revoked).
    pub created_by: Option<i64>,
    pub created_at: String,
    /// Within a minute; null when never used.
    pub last_used_at: Option<String>,
    /// Null while the key works.
    pub revoked_at: Option<String>,
}

impl From<&PartnerKey> for ApiKeyRecord {
    fn from(k: &PartnerKey) -> Self {
        ApiKeyRecord {
            id: k.id,
            name: k.name.clone(),
            prefix: k.prefix.clone(),
            role: k.role,
            created_by: k.created_by,
            created_at: record_time(k.created_at),
            last_used_at: k.last_used_at.map(record_time),
            revoked_at: k.revoked_at.map(record_time),
        }
    }
}

/// A new API key.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewApiKey)]
struct NewKey {
    /// What the key is for, shown in lists: 1 to 100 characters.
    #[schema(
        value_type = String,
        required = true,
        min_length = 1,
        max_length = 100,
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*[^\\s\\x00-\\x1F\\x7F-\\x9F][^\\x00-\\x1F\\x7F-\\x9F]*$"
    )]
    name: Option<String>,
}

/// A new key, shown this once.
#[derive(Serialize, ToSchema)]
#[schema(as = ApiKeyCreated)]
struct Created {
    key: ApiKeyRecord,
    /// The key itself: store it now, it is never shown again.
    api_key: String,
}

/// My API keys.
///
/// Newest first, revoked ones too.
#[utoipa::path(
    get,
    path = "/api-keys",
    tag = "api_keys",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The keys", body = List<ApiKeyRecord>))
)]
async fn list_keys(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<List<ApiKeyRecord>>> {
    let keys = partners::list_keys(&state.db, partner.id).await?;
    Ok(Json(List { data: keys.iter().map(ApiKeyRecord::from).collect(), next_cursor: None }))
}

/// Create an API key.
///
/// The key works at once, beside the others; it is in the answer this once. It acts with the role of the
/// member who made it (a key made with a key: that key's role), and stops working when that member is
/// removed.
#[utoipa::path(
    post,
    path = "/api-keys",
    tag = "api_keys",
    security(("partnerKey" = [])),
    request_body = NewKey,
    responses((status = 201, description = "The key, shown once", body = Created))
)]
async fn create_key(
    State(state): State<AppState>,
    actor: PartnerActor,
    ApiJson(req): ApiJson<NewKey>,
) -> ApiResult<(StatusCode, Json<Created>)> {
    let (key, api_key) =
        partners::create_key(&state.db, actor.partner.id, req.name.as_deref(), actor.key_maker(), state.now()).await?;
    Ok((StatusCode::CREATED, Json(Created { key: ApiKeyRecord::from(&key), api_key })))
}

/// Revoke an API key.
///
/// It stops working at once, on every host. Revoking one already revoked answers it as it is; the last key
/// that works cannot be revoked (409: create another first); an owner's key only by an owner (403).
#[utoipa::path(
    delete,
    path = "/api-keys/{id}",
    tag = "api_keys",
    security(("partnerKey" = [])),
    params(("id" = i64, Path, description = "The key's id")),
    responses(
        (status = 200, description = "The key, revoked", body = ApiKeyRecord),
        (status = 403, response = E403),
        (status = 404, response = E404),
        (status = 409, response = E409),
    )
)]
async fn revoke_key(
    State(state): State<AppState>,
    actor: PartnerActor,
    Path(id): Path<String>,
) -> ApiResult<Json<ApiKeyRecord>> {
    let id = parse_id(&id, "API key")?;
    match partners::revoke_key(&state.db, actor.partner.id, id, actor.key_maker().role, state.now()).await? {
        Revoked::Done(key) => Ok(Json(ApiKeyRecord::from(&key))),
        Revoked::NotFound => Err(ApiError::not_found("API key")),
        Revoked::LastKey => {
            Err(ApiError::conflict("this is the last key that works: create another before revoking it"))
        }
        Revoked::Outranked => Err(ApiError::forbidden("this key acts as an owner: only an owner may revoke it")),
    }
}
