//! Members' passkeys: a signed-in member registers one (`POST /members/me/passkeys/challenges`, then
//! `POST /members/me/passkeys` with the browser's answer), lists and removes theirs, and signs in with one
//! later (`POST /members/passkey-challenges` with their phone, then `POST /members/sessions/passkey`) into
//! the same session cookie as a one-time code gives. Each ceremony's state waits in the database, under the
//! digest of a single-use token, for five minutes (`crate::passkeys::CEREMONY_MS`), so any host may answer
//! its second request.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use webauthn_rs::Webauthn;
use webauthn_rs::prelude::{Passkey, PasskeyAuthentication, PasskeyRegistration};

use super::abuse::CodeRouteLimit;
use super::{ApiJson, E401, E403, E404, E409, E422, E429, List, parse_id};
use crate::clock::record_time;
use crate::http::auth::MemberAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::passkeys::CEREMONY_MS;
use crate::secrets::{digest, new_passkey_ceremony};
use crate::store::members;
use crate::store::passkeys::{self, Ceremony, StoredPasskey};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(registration_challenge))
        .routes(routes!(register, list_passkeys))
        .routes(routes!(remove_passkey))
        .routes(routes!(sign_in_challenge))
        .routes(routes!(sign_in))
}

/// A passkey of the signed-in member (the credential itself never leaves the server).
#[derive(Debug, Serialize, ToSchema)]
pub struct PasskeyRecord {
    pub id: i64,
    pub name: String,
    pub created_at: String,
    /// The last sign-in with it.
    pub last_used_at: Option<String>,
}

impl From<&StoredPasskey> for PasskeyRecord {
    fn from(p: &StoredPasskey) -> Self {
        PasskeyRecord {
            id: p.id,
            name: p.name.clone(),
            created_at: record_time(p.created_at),
            last_used_at: p.last_used_at.map(record_time),
        }
    }
}

/// A ceremony begun: what the browser passes to WebAuthn, and the token that names the ceremony when the
/// browser answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct PasskeyChallenge {
    /// Single use, good until `expires_at`.
    pub ceremony: String,
    /// The options for `navigator.credentials.create()` (registration) or `.get()` (sign-in), as WebAuthn's
    /// JSON form: `{"publicKey": {…}}` with every binary value base64url-encoded.
    #[schema(value_type = Object)]
    pub options: Value,
    pub expires_at: String,
}

fn relying_party(state: &AppState) -> ApiResult<&Webauthn> {
    state.passkeys.get().map_err(ApiError::conflict)
}

/// Keeps a ceremony's state and answers its challenge.
async fn begin<T: Serialize>(
    state: &AppState,
    kind: Ceremony,
    member_id: Option<i64>,
    options: impl Serialize,
    ceremony_state: &T,
) -> ApiResult<(StatusCode, Json<PasskeyChallenge>)> {
    let now = state.now();
    let token = new_passkey_ceremony();
    let kept = serde_json::to_string(ceremony_state).map_err(ApiError::internal)?;
    passkeys::begin(&state.db, &digest(&token), kind, member_id, &kept, now, now + CEREMONY_MS).await?;
    let options = serde_json::to_value(options).map_err(ApiError::internal)?;
    Ok((
        StatusCode::CREATED,
        Json(PasskeyChallenge { ceremony: token, options, expires_at: record_time(now + CEREMONY_MS) }),
    ))
}

/// Takes the ceremony named by `token` (once): the member who began it, if one did, and its state.
async fn take<T: DeserializeOwned>(
    state: &AppState,
    token: Option<&str>,
    kind: Ceremony,
) -> ApiResult<(Option<i64>, T)> {
    let token = token
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::validation("ceremony", "ceremony is the pkc_… token of the challenge this answers"))?;
    let (member_id, kept) = passkeys::take(&state.db, &digest(token), kind, state.now())
        .await?
        .ok_or_else(|| ApiError::unauthorized("the passkey challenge is unknown, used or expired: start again"))?;
    let kept = serde_json::from_str(&kept).map_err(ApiError::internal)?;
    Ok((member_id, kept))
}

/// The browser's answer, as the WebAuthn library reads it.
fn credential<T: DeserializeOwned>(raw: Option<Value>) -> ApiResult<T> {
    let raw = raw.ok_or_else(|| ApiError::validation("credential", "credential is the browser's answer"))?;
    serde_json::from_value(raw).map_err(|e| {
        ApiError::validation("credential", format!("credential is not a WebAuthn public key credential: {e}"))
    })
}

fn stored(p: &StoredPasskey) -> ApiResult<Passkey> {
    serde_json::from_str(&p.passkey).map_err(ApiError::internal)
}

/// Begin adding a passkey.
///
/// For the signed-in member: the options to pass to `navigator.credentials.create()`, and the ceremony token
/// to send back with its answer within 5 minutes. The passkey must verify its user (a PIN or biometric). A
/// host reached by an IP address offers no passkeys (409: browsers refuse them there).
#[utoipa::path(
    post,
    path = "/members/me/passkeys/challenges",
    operation_id = "member_passkey_registration_challenge",
    tag = "members",
    security(("memberSession" = [])),
    responses(
        (status = 201, description = "The challenge", body = PasskeyChallenge),
        (status = 401, response = E401),
        (status = 403, response = E403),
        (status = 409, response = E409),
    )
)]
async fn registration_challenge(
    State(state): State<AppState>,
    MemberAuth(session): MemberAuth,
) -> ApiResult<(StatusCode, Json<PasskeyChallenge>)> {
    let webauthn = relying_party(&state)?;
    let member = &session.member;
    let existing = passkeys::of_member(&state.db, member.id).await?;
    let exclude = existing.iter().map(stored).map(|p| p.map(|p| p.cred_id().clone())).collect::<ApiResult<_>>()?;
    let handle = crate::passkeys::user_handle(&state.jwt_secret, member.id);
    let display = member.name.as_deref().unwrap_or(&member.phone);
    let (options, registration) = webauthn
        .start_passkey_registration(handle, &member.phone, display, Some(exclude))
        .map_err(ApiError::internal)?;
    begin(&state, Ceremony::Register, Some(member.id), options, &registration).await
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewPasskey)]
struct NewPasskey {
    /// The token of `POST /members/me/passkeys/challenges`.
    #[schema(value_type = String, required = true, pattern = "^pkc_[A-Za-z0-9]{40}$")]
    ceremony: Option<String>,
    /// What `navigator.credentials.create()` gave, as WebAuthn's JSON form (`PublicKeyCredential.toJSON()`:
    /// `id`, `rawId`, `type`, `response.attestationObject`, `response.clientDataJSON`, base64url).
    #[schema(value_type = Object, required = true)]
    credential: Option<Value>,
    /// A name to tell it by (default "Passkey"): 1 to 100 characters, no control characters.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*[^\\s\\x00-\\x1F\\x7F-\\x9F][^\\x00-\\x1F\\x7F-\\x9F]*$"
    )]
    name: Option<String>,
}

/// Add a passkey.
///
/// With the browser's answer to the challenge. A challenge unknown, used, expired or begun by another member
/// is `401`; an answer that does not check out (another origin, no user verification, a bad signature) is
/// `422` on `credential`; a passkey registered already is `409`.
#[utoipa::path(
    post,
    path = "/members/me/passkeys",
    operation_id = "add_member_passkey",
    tag = "members",
    security(("memberSession" = [])),
    request_body = NewPasskey,
    responses(
        (status = 201, description = "The passkey", body = PasskeyRecord),
        (status = 401, response = E401),
        (status = 403, response = E403),
        (status = 409, response = E409),
        (status = 422, response = E422),
    )
)]
async fn register(
    State(state): State<AppState>,
    MemberAuth(session): MemberAuth,
    ApiJson(req): ApiJson<NewPasskey>,
) -> ApiResult<(StatusCode, Json<PasskeyRecord>)> {
    let webauthn = relying_party(&state)?;
    let name = match req.name.as_deref() {
        Some(raw) => super::api_keys::key_name(Some(raw))?,
        None => "Passkey",
    };
    let answer = credential(req.credential)?;
    let (began_by, registration): (Option<i64>, PasskeyRegistration) =
        take(&state, req.ceremony.as_deref(), Ceremony::Register).await?;
    let member_id = session.member.id;
    if began_by != Some(member_id) {
        return Err(ApiError::unauthorized("the passkey challenge is unknown, used or expired: start again"));
    }
    let passkey = webauthn
        .finish_passkey_registration(&answer, &registration)
        .map_err(|e| ApiError::validation("credential", format!("the passkey could not be registered: {e}")))?;
    let credential_id = URL_SAFE_NO_PAD.encode(passkey.cred_id().as_slice());
    let kept = serde_json::to_string(&passkey).map_err(ApiError::internal)?;
    let added = passkeys::add(&state.db, member_id, name, &credential_id, &kept, state.now())
        .await?
        .ok_or_else(|| ApiError::conflict("this passkey is registered already"))?;
    Ok((StatusCode::CREATED, Json(PasskeyRecord::from(&added))))
}

/// My passkeys.
///
/// The signed-in member's passkeys, oldest first.
#[utoipa::path(
    get,
    path = "/members/me/passkeys",
    operation_id = "list_member_passkeys",
    tag = "members",
    security(("memberSession" = [])),
    responses(
        (status = 200, description = "The passkeys", body = List<PasskeyRecord>),
        (status = 401, response = E401),
        (status = 403, response = E403),
    )
)]
async fn list_passkeys(
    State(state): State<AppState>,
    MemberAuth(session): MemberAuth,
) -> ApiResult<Json<List<PasskeyRecord>>> {
    let all = passkeys::of_member(&state.db, session.member.id).await?;
    Ok(Json(List { data: all.iter().map(PasskeyRecord::from).collect(), next_cursor: None }))
}

/// Remove a passkey.
///
/// One of the signed-in member's own; it no longer signs in.
#[utoipa::path(
    delete,
    path = "/members/me/passkeys/{id}",
    operation_id = "remove_member_passkey",
    tag = "members",
    security(("memberSession" = [])),
    params(("id" = i64, Path, description = "The passkey's id")),
    responses(
        (status = 204, description = "Removed"),
        (status = 401, response = E401),
        (status = 403, response = E403),
        (status = 404, response = E404),
    )
)]
async fn remove_passkey(
    State(state): State<AppState>,
    MemberAuth(session): MemberAuth,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = parse_id(&id, "passkey")?;
    if passkeys::remove(&state.db, session.member.id, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("passkey"))
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = PasskeySignInStart)]
struct SignInStart {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
    /// Only this partner's passkeys (by default, the passkeys of every partner the phone is a member of).
    #[schema(min_length = 1, max_length = 64)]
    partner: Option<String>,
}

/// Begin signing in with a passkey.
///
/// For a member's phone: the options to pass to `navigator.credentials.get()`, listing the passkeys of each
/// of its memberships (or of the one with the partner named in `partner`: the passkey used says which
/// partner the session is for), and the ceremony token to send back with its answer within 5 minutes. `404`
/// when the phone has no passkey (it signs in with a code). The code routes' per-address limits apply.
#[utoipa::path(
    post,
    path = "/members/passkey-challenges",
    operation_id = "member_passkey_sign_in_challenge",
    tag = "members",
    request_body = SignInStart,
    responses(
        (status = 201, description = "The challenge", body = PasskeyChallenge),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 422, response = E422),
        (status = 429, response = E429),
    )
)]
async fn sign_in_challenge(
    CodeRouteLimit(_): CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<SignInStart>,
) -> ApiResult<(StatusCode, Json<PasskeyChallenge>)> {
    let phone = crate::validate::required_phone(req.phone.as_deref())?;
    let webauthn = relying_party(&state)?;
    // The passkeys of each membership of the phone (of the one partner named): the one used says which.
    let wanted = req.partner.as_deref().map(str::trim).filter(|p| !p.is_empty());
    let mut theirs = Vec::new();
    for (member, partner) in members::memberships(&state.db, phone).await? {
        if wanted.is_none_or(|code| code == partner) {
            for p in passkeys::of_member(&state.db, member.id).await? {
                theirs.push(stored(&p)?);
            }
        }
    }
    if theirs.is_empty() {
        return Err(ApiError::not_found("passkey of this phone"));
    }
    let (options, authentication) = webauthn.start_passkey_authentication(&theirs).map_err(ApiError::internal)?;
    begin(&state, Ceremony::SignIn, None, options, &authentication).await
}

#[derive(Deserialize, ToSchema)]
#[schema(as = PasskeySignIn)]
struct SignIn {
    /// The token of `POST /members/passkey-challenges`.
    #[schema(value_type = String, required = true, pattern = "^pkc_[A-Za-z0-9]{40}$")]
    ceremony: Option<String>,
    /// What `navigator.credentials.get()` gave, as WebAuthn's JSON form (`PublicKeyCredential.toJSON()`).
    #[schema(value_type = Object, required = true)]
    credential: Option<Value>,
}

/// Sign in with a passkey.
///
/// With the browser's answer to the challenge: the same session and cookie as `POST /members/sessions`. A
/// challenge unknown, used or expired, or an answer that does not check out, is `401`.
#[utoipa::path(
    post,
    path = "/members/sessions/passkey",
    operation_id = "member_passkey_sign_in",
    tag = "members",
    request_body = SignIn,
    responses(
        (status = 201, description = "Signed in; the cookie is set", body = super::members::MemberSession),
        (status = 401, response = E401),
        (status = 409, response = E409),
        (status = 422, response = E422),
        (status = 429, response = E429),
    )
)]
async fn sign_in(
    CodeRouteLimit(client): CodeRouteLimit,
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<SignIn>,
) -> ApiResult<Response> {
    let webauthn = relying_party(&state)?;
    let answer: webauthn_rs::prelude::PublicKeyCredential = credential(req.credential)?;
    let (_, authentication): (Option<i64>, PasskeyAuthentication) =
        take(&state, req.ceremony.as_deref(), Ceremony::SignIn).await?;
    let refused = |e: &dyn std::fmt::Display| ApiError::unauthorized(format!("the passkey did not sign in: {e}"));
    // Checked against the passkeys the challenge listed (the phone's): the one used names the member.
    let result = webauthn.finish_passkey_authentication(&answer, &authentication).map_err(|e| refused(&e))?;
    let credential_id = URL_SAFE_NO_PAD.encode(result.cred_id().as_slice());
    let row = passkeys::by_credential(&state.db, &credential_id)
        .await?
        .ok_or_else(|| refused(&"the passkey was removed meanwhile"))?;
    // Its counter moves on.
    let mut passkey = stored(&row)?;
    let kept = match passkey.update_credential(&result) {
        Some(true) => Some(serde_json::to_string(&passkey).map_err(ApiError::internal)?),
        _ => None,
    };
    passkeys::used(&state.db, row.id, kept.as_deref(), state.now()).await?;
    let member =
        members::find(&state.db, row.member_id).await?.ok_or_else(|| refused(&"the member was removed meanwhile"))?;
    super::members::session_started(&state, &member, &client.to_string(), &headers).await
}
