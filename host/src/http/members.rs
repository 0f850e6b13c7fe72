//! The people of a partner: members with a role (`owner`, `admin`, `agent`; `members::allows` decides what
//! each may call), who join by a single-use invitation and sign in with their phone and a one-time code
//! (the end-user login codes of `/auth/otp/start`, with their limits) into a session cookie; and the audit
//! log of what members changed (`audit`, the layer that writes it).
//!
//! The cookie is HttpOnly and SameSite=Strict, Secure except in dev mode on `http://localhost` (or 127.0.0.1); a request
//! it authenticates that changes something must come from this origin (the CSRF check in `auth`).

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::header::{SET_COOKIE, USER_AGENT};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::abuse::CodeRouteLimit;
use super::{ApiJson, ApiQuery, E401, E403, E404, E409, E422, E429, List, PageParams, loggable_path, parse_id};
use crate::clock::record_time;
use crate::http::auth::{AuditSlot, MemberAuth, PartnerActor, PartnerAuth};
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::members::{self, AuditEntry, AuditWrite, COOKIE, Member, SESSION_ABSOLUTE_MS, SESSION_IDLE_MS, Session};
use crate::names::{AgentStatus, MemberRole};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(sign_in, sign_out_everywhere))
        .routes(routes!(sign_out))
        .routes(routes!(me, update_me))
        .routes(routes!(list_members))
        .routes(routes!(invite))
        .routes(routes!(update_member, remove_member))
        .routes(routes!(audit_log))
}

/// A member of the partner.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberRecord {
    pub id: i64,
    pub phone: String,
    pub name: Option<String>,
    pub role: MemberRole,
    pub created_at: String,
    /// Whether they take conversations now: only members `online` are given them when the partner assigns
    /// by itself (`/settings/assignment`); going `offline` hands theirs not closed back to the queue.
    pub status: AgentStatus,
    /// Their limit of conversations not closed when the partner assigns by itself (null: the partner's
    /// default).
    pub capacity: Option<i64>,
}

impl From<&Member> for MemberRecord {
    fn from(m: &Member) -> Self {
        MemberRecord {
            id: m.id,
            phone: m.phone.clone(),
            name: m.name.clone(),
            role: m.role,
            created_at: record_time(m.created_at),
            status: m.status,
            capacity: m.capacity,
        }
    }
}

/// The partner a member acts for.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberPartner {
    pub code: String,
    pub name: String,
}

/// A member's session as they see it.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberSession {
    pub member: MemberRecord,
    pub partner: MemberPartner,
    pub signed_in_at: String,
    /// The absolute end; the session also ends after `idle_minutes` without a request.
    pub ends_at: String,
    pub idle_minutes: i64,
}

fn session_record(s: &Session) -> MemberSession {
    MemberSession {
        member: MemberRecord::from(&s.member),
        partner: MemberPartner { code: s.partner.code.clone(), name: s.partner.name.clone() },
        signed_in_at: record_time(s.created_at),
        ends_at: record_time(s.ends_at),
        idle_minutes: SESSION_IDLE_MS / 60_000,
    }
}

/// The `Set-Cookie` of a session token (or of its removal, for `None`); Secure unless the host is in dev
/// mode on `http://localhost` or `http://127.0.0.1` (where browsers keep no Secure cookie over plain HTTP).
fn cookie(state: &AppState, token: Option<&str>) -> HeaderValue {
    let public = state.config.public_url.as_str();
    let local_dev = state.config.dev && ["http://localhost", "http://127.0.0.1"].iter().any(|l| public.starts_with(l));
    let secure = if local_dev { "" } else { "; Secure" };
    let value = match token {
        Some(token) => {
            format!(
                "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
                SESSION_ABSOLUTE_MS / 1000
            )
        }
        None => format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
    };
    HeaderValue::from_str(&value).expect("a token of letters and digits is a header value")
}

#[derive(Deserialize, ToSchema)]
#[schema(as = MemberSignIn)]
struct SignIn {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
    /// The code sent by `POST /auth/otp/start`.
    #[schema(value_type = String, required = true, pattern = "\\S")]
    code: Option<String>,
    /// An invitation (`inv_…`) to accept: the phone becomes a member with its role. Without one, the phone
    /// must be a member already.
    #[schema(pattern = "^inv_[A-Za-z0-9]{40}$")]
    invitation: Option<String>,
    /// The partner to sign in to, for a phone that is a member of several.
    #[schema(min_length = 1, max_length = 64)]
    partner: Option<String>,
    /// The member's display name, 1 to 100 characters without control characters (the people they answer
    /// see its first word): the new member's with an invitation; given at a later sign-in, it replaces theirs
    /// (as `PATCH /members/me` does).
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*[^\\s\\x00-\\x1F\\x7F-\\x9F][^\\x00-\\x1F\\x7F-\\x9F]*$"
    )]
    name: Option<String>,
}

/// Sign in as a member.
///
/// With the phone and the one-time code of `POST /auth/otp/start` (same limits; the code is used up), and an
/// invitation for the first sign-in. Sets the session cookie (`hubbub_member`: HttpOnly, SameSite=Strict,
/// Secure), which ends after 8 hours without a request and 7 days after sign-in at the latest. A phone that
/// is a member of several partners names one in `partner` (422 otherwise, listing them).
#[utoipa::path(
    post,
    path = "/members/sessions",
    tag = "members",
    request_body = SignIn,
    operation_id = "member_sign_in",
    responses(
        (status = 201, description = "Signed in; the cookie is set", body = MemberSession),
        (status = 401, response = E401),
        (status = 403, response = E403),
        (status = 429, response = E429),
    )
)]
async fn sign_in(
    CodeRouteLimit(client): CodeRouteLimit,
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<SignIn>,
) -> ApiResult<Response> {
    let sign_in = members::SignIn {
        phone: req.phone.as_deref(),
        code: req.code.as_deref(),
        invitation: req.invitation.as_deref(),
        name: req.name.as_deref(),
        partner: req.partner.as_deref(),
    };
    let member = members::sign_in(&state.codes(), sign_in).await?;
    session_started(&state, &member, &client.to_string(), &headers).await
}

/// Starts a session for `member`, signed in from `address`: `201` with the session and its cookie.
pub(super) async fn session_started(
    state: &AppState,
    member: &Member,
    address: &str,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let user_agent = headers.get(USER_AGENT).and_then(|v| v.to_str().ok());
    let (token, session) = members::start_session(&state.db, member, address, user_agent, state.now()).await?;
    Ok((StatusCode::CREATED, [(SET_COOKIE, cookie(state, Some(&token)))], Json(session_record(&session)))
        .into_response())
}

/// My member session.
#[utoipa::path(
    get,
    path = "/members/me",
    operation_id = "my_member_session",
    tag = "members",
    security(("memberSession" = [])),
    responses((status = 200, description = "Who is signed in, for which partner, until when", body = MemberSession), (status = 401, response = E401))
)]
async fn me(MemberAuth(session): MemberAuth) -> Json<MemberSession> {
    Json(session_record(&session))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = UpdateMyMember)]
struct UpdateMe {
    /// My display name: 1 to 100 characters, no control characters. The people I answer see its first word
    /// on my replies; the partner's members see it all.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*[^\\s\\x00-\\x1F\\x7F-\\x9F][^\\x00-\\x1F\\x7F-\\x9F]*$"
    )]
    name: Option<String>,
    /// My status: going `offline` hands my conversations not closed back to the queue; `online`, I am given
    /// conversations when the partner assigns by itself.
    status: Option<AgentStatus>,
}

/// Change my display name or my status.
///
/// For any member, on their own session; at least one of the two. Replies already sent keep the name they
/// were sent with.
#[utoipa::path(
    patch,
    path = "/members/me",
    operation_id = "update_my_member",
    tag = "members",
    security(("memberSession" = [])),
    request_body = UpdateMe,
    responses(
        (status = 200, description = "My session, with the new name", body = MemberSession),
        (status = 401, response = E401),
        (status = 403, response = E403),
        (status = 422, response = E422),
    )
)]
async fn update_me(
    State(state): State<AppState>,
    MemberAuth(mut session): MemberAuth,
    ApiJson(req): ApiJson<UpdateMe>,
) -> ApiResult<Json<MemberSession>> {
    session.member = members::update_me(&state.db, &session, req.name.as_deref(), req.status, state.now())
        .await
        .map_err(|e| match e {
            members::MemberError::NotFound => ApiError::unauthorized("the member of this session is gone"),
            other => other.into(),
        })?;
    Ok(Json(session_record(&session)))
}

/// Sign out.
///
/// Ends this session and clears the cookie.
#[utoipa::path(
    delete,
    path = "/members/sessions/current",
    operation_id = "member_sign_out",
    tag = "members",
    security(("memberSession" = [])),
    responses((status = 204, description = "Signed out"), (status = 401, response = E401))
)]
async fn sign_out(State(state): State<AppState>, MemberAuth(session): MemberAuth) -> ApiResult<Response> {
    members::sign_out(&state.db, &session, false, state.now()).await?;
    Ok((StatusCode::NO_CONTENT, [(SET_COOKIE, cookie(&state, None))]).into_response())
}

/// Sign out everywhere.
///
/// Ends every session of this member, in every browser, and clears this one's cookie.
#[utoipa::path(
    delete,
    path = "/members/sessions",
    operation_id = "member_sign_out_everywhere",
    tag = "members",
    security(("memberSession" = [])),
    responses((status = 204, description = "Every session ended"), (status = 401, response = E401))
)]
async fn sign_out_everywhere(State(state): State<AppState>, MemberAuth(session): MemberAuth) -> ApiResult<Response> {
    members::sign_out(&state.db, &session, true, state.now()).await?;
    Ok((StatusCode::NO_CONTENT, [(SET_COOKIE, cookie(&state, None))]).into_response())
}

/// The partner's members.
///
/// For owners and owners' keys. Oldest first.
#[utoipa::path(
    get,
    path = "/members",
    tag = "members",
    security(("partnerKey" = []), ("memberSession" = [])),
    responses((status = 200, description = "The members", body = List<MemberRecord>), (status = 403, response = E403))
)]
async fn list_members(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<List<MemberRecord>>> {
    let all = members::list(&state.db, partner.id).await?;
    Ok(Json(List { data: all.iter().map(MemberRecord::from).collect(), next_cursor: None }))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewInvitation)]
struct NewInvitation {
    #[schema(value_type = MemberRole, required = true)]
    role: Option<MemberRole>,
}

/// An invitation, shown this once.
#[derive(Serialize, ToSchema)]
struct InvitationCreated {
    /// The token: give it to the person invited, who signs in with it (`POST /members/sessions`). It is
    /// never shown again, works once, and expires at `expires_at`.
    invitation: String,
    /// The console's sign-in page with the invitation (in the fragment, which no server or log sees).
    link: String,
    role: MemberRole,
    expires_at: String,
}

/// Invite a member.
///
/// For owners and owners' keys. The invitation works once, within 7 days, for whichever phone signs in
/// with it first; that phone becomes a member with `role`.
#[utoipa::path(
    post,
    path = "/members/invitations",
    tag = "members",
    security(("partnerKey" = []), ("memberSession" = [])),
    request_body = NewInvitation,
    responses((status = 201, description = "The invitation, shown once", body = InvitationCreated), (status = 403, response = E403))
)]
async fn invite(
    State(state): State<AppState>,
    actor: PartnerActor,
    ApiJson(req): ApiJson<NewInvitation>,
) -> ApiResult<(StatusCode, Json<InvitationCreated>)> {
    let role = req.role.ok_or_else(|| ApiError::validation("role", "role is one of owner, admin, agent"))?;
    let invited_by = actor.member.as_ref().map(|m| m.id);
    let (invitation, expires_at) =
        crate::members::invite(&state.db, actor.partner.id, role, invited_by, state.now()).await?;
    let link = crate::members::invitation_link(&state.config.public_url, &invitation);
    Ok((StatusCode::CREATED, Json(InvitationCreated { invitation, link, role, expires_at: record_time(expires_at) })))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = UpdateMember)]
struct UpdateMember {
    role: Option<MemberRole>,
    /// A display name: 1 to 100 characters, no control characters.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*[^\\s\\x00-\\x1F\\x7F-\\x9F][^\\x00-\\x1F\\x7F-\\x9F]*$"
    )]
    name: Option<String>,
    /// Their status (as they set it themselves with `PATCH /members/me`): `offline` hands their
    /// conversations not closed back to the queue.
    status: Option<AgentStatus>,
    /// Their limit of conversations not closed, 1 to 1000, when the partner assigns by itself; null: the
    /// partner's default.
    #[serde(default, deserialize_with = "crate::messages::compose::present")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    capacity: Option<Option<i64>>,
}

/// Change a member's role, name, status or capacity.
///
/// For owners and owners' keys; the keys the member made take the new role. The last owner keeps the role (409).
#[utoipa::path(
    patch,
    path = "/members/{id}",
    tag = "members",
    security(("partnerKey" = []), ("memberSession" = [])),
    params(("id" = i64, Path, description = "The member's id")),
    request_body = UpdateMember,
    responses(
        (status = 200, description = "The member", body = MemberRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
    )
)]
async fn update_member(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateMember>,
) -> ApiResult<Json<MemberRecord>> {
    let id = parse_id(&id, "member")?;
    let changes = members::MemberChanges {
        role: req.role,
        name: req.name.as_deref(),
        status: req.status,
        capacity: req.capacity,
    };
    Ok(Json(MemberRecord::from(&members::update(&state.db, partner.id, id, changes, state.now()).await?)))
}

/// Remove a member.
///
/// For owners and owners' keys. Their sessions end at once and the API keys they made are revoked; their
/// audit entries stay. Not the last owner (409).
#[utoipa::path(
    delete,
    path = "/members/{id}",
    tag = "members",
    security(("partnerKey" = []), ("memberSession" = [])),
    params(("id" = i64, Path, description = "The member's id")),
    responses(
        (status = 200, description = "The member removed", body = MemberRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
    )
)]
async fn remove_member(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<MemberRecord>> {
    let id = parse_id(&id, "member")?;
    Ok(Json(MemberRecord::from(&members::remove(&state.db, partner.id, id, state.now()).await?)))
}

/// One thing a member changed or tried to, with their session or an API key.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditRecord {
    pub id: i64,
    /// The member (of the session, or who made the key; null once removed, or for a key of the command
    /// line's), their phone and their display name.
    pub member_id: Option<i64>,
    pub phone: Option<String>,
    pub name: Option<String>,
    /// The API key the call was made with (null: a member's session), and its prefix.
    pub key_id: Option<i64>,
    pub key_prefix: Option<String>,
    /// The method and route, such as `POST /api/v1/bots/{code}/token`.
    pub action: String,
    /// The path called (message and payment refs cut to their prefix).
    pub target: String,
    /// The HTTP status it was answered with.
    pub status: i64,
    /// The client's address.
    pub address: Option<String>,
    pub at: String,
}

impl From<&AuditEntry> for AuditRecord {
    fn from(e: &AuditEntry) -> Self {
        AuditRecord {
            id: e.id,
            member_id: e.member_id,
            phone: e.phone.clone(),
            name: e.name.clone(),
            key_id: e.key_id,
            key_prefix: e.key_prefix.clone(),
            action: e.action.clone(),
            target: e.target.clone(),
            status: e.status,
            address: e.address.clone(),
            at: record_time(e.at),
        }
    }
}

/// The audit log.
///
/// For owners and owners' keys: every request by which a member changed something (any method but GET and
/// HEAD), with their session or an API key (the key named, and the member who made it), and every request
/// refused for its role or as cross-site, and every export of data (`GET /exports/…`): who, when, from which
/// address, and how it was answered. Changes
/// made with a key leave out sending messages (`POST /messages`: the message is its own record). Newest first.
#[utoipa::path(
    get,
    path = "/audit-log",
    tag = "members",
    security(("partnerKey" = []), ("memberSession" = [])),
    params(PageParams),
    responses((status = 200, description = "A page of the log", body = List<AuditRecord>), (status = 403, response = E403))
)]
async fn audit_log(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<AuditRecord>>> {
    let page = page.page()?;
    let rows = members::audit_log(&state.db, partner.id, page.before, page.fetch()).await?;
    Ok(Json(page.list(rows, |e| e.id, |e| AuditRecord::from(e))))
}

/// The layer that writes the audit log: it gives each request made with a member's session or a partner
/// key a slot that `auth` fills when the request could change something, or was refused for its role or as
/// cross-site (CSRF), and writes an entry, before answering, for each slot filled. An entry that cannot be
/// written fails the answer (500) rather than go unrecorded.
pub async fn audit(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    // Only a member's cookie or a partner key can need an entry: every other request (bots, users,
    // developers, provider webhooks) passes untouched, at no cost.
    let partner_key = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.get(7..))
        .is_some_and(|token| token.trim_start().starts_with("sk_") && !token.trim_start().starts_with("sk_dev_"));
    if !partner_key && crate::http::auth::member_cookie(request.headers()).is_none() {
        return next.run(request).await;
    }
    let slot = AuditSlot::default();
    request.extensions_mut().insert(slot.clone());
    let uri = request.uri().clone();
    let response = next.run(request).await;
    let Some(acting) = slot.0.get() else { return response };
    let entry = AuditWrite {
        partner_id: acting.partner_id,
        member_id: acting.member_id,
        key_id: acting.key_id,
        action: acting.action.clone(),
        target: loggable_path(uri.path()).into_owned(),
        status: response.status().as_u16(),
        address: acting.address.clone(),
        at: state.now(),
    };
    match state.audit.write(entry).await {
        Ok(()) => response,
        Err(e) => ApiError::internal(format_args!("the audit log could not be written: {e}")).into_response(),
    }
}
