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
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::abuse::CodeRouteLimit;
use super::{ApiJson, E401, E403, E404, E409, E422, E429, List, parse_id};
use crate::clock::record_time;
use crate::http::auth::MemberAuth;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::passkeys::{self, Ceremonies, Challenge, StoredPasskey};

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

impl From<Challenge> for PasskeyChallenge {
    fn from(c: Challenge) -> Self {
        PasskeyChallenge { ceremony: c.token, options: c.options, expires_at: record_time(c.expires_at) }
    }
}

/// The ceremonies over this host's database, relying party and key.
fn ceremonies(state: &AppState) -> Ceremonies<'_> {
    Ceremonies { db: &state.db, party: &state.passkeys, key: &state.jwt_secret, now: state.now() }
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
    let challenge = passkeys::registration_challenge(&ceremonies(&state), &session.member).await?;
    Ok((StatusCode::CREATED, Json(challenge.into())))
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
    let (name, ceremony) = (req.name.as_deref(), req.ceremony.as_deref());
    let added = passkeys::register(&ceremonies(&state), session.member.id, name, ceremony, req.credential).await?;
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
    passkeys::remove(&state.db, session.member.id, id).await?;
    Ok(StatusCode::NO_CONTENT)
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
    let (phone, partner) = (req.phone.as_deref(), req.partner.as_deref());
    let challenge = passkeys::sign_in_challenge(&ceremonies(&state), phone, partner).await?;
    Ok((StatusCode::CREATED, Json(challenge.into())))
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
    let member = passkeys::sign_in(&ceremonies(&state), req.ceremony.as_deref(), req.credential).await?;
    super::members::session_started(&state, &member, &client.to_string(), &headers).await
}
