//! Who is calling: every credential kind is recognised here, in one place, and each route states the
//! kind it accepts through an extractor. A credential that is unknown, malformed or revoked is 401; a
//! valid credential of the wrong kind for the route is 403. Rate limits are taken per credential here.

use std::sync::{Arc, OnceLock};

use axum::extract::{FromRequestParts, MatchedPath};
use axum::http::Method;
use axum::http::header::{AUTHORIZATION, COOKIE, ORIGIN};
use axum::http::request::Parts;

use crate::bots::{self, Bot};
use crate::developers::{self, Developer};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::members::{self, Session};
use crate::partners::{self, KeyAuth, KeyMaker, Partner};
use crate::secrets::{constant_time_eq, digest};

/// A verified credential.
#[derive(Debug, Clone)]
pub enum Credential {
    /// A partner, by one of its API keys: acts as far as the key's role allows (`members::allows`).
    Partner(Partner, KeyAuth),
    /// An end user, by a JWT from OTP login.
    User(UserClaims),
    /// A developer, by an `sk_dev_` key.
    Developer(Developer),
    /// A bot, by its `bot_<prefix>.<secret>` token: scoped to that bot. (Boxed: a bot row is far larger
    /// than the other credentials.)
    Bot(Box<Bot>),
    /// A member of a partner, by the session cookie of a sign-in: acts for their partner, as far as their
    /// role allows (`members::allows`).
    Member(Box<Session>),
}

impl Credential {
    /// The rate-limit bucket of this credential.
    fn rate_key(&self) -> String {
        match self {
            Credential::Partner(p, _) => format!("partner:{}", p.id),
            Credential::User(u) => format!("user:{}", u.sub),
            Credential::Developer(d) => format!("developer:{}", d.id),
            Credential::Bot(b) => format!("bot:{}", b.id),
            Credential::Member(s) => format!("member:{}", s.member.id),
        }
    }
}

/// The bearer token of a request, if it has one.
fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let value = parts
        .headers
        .get(AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer credential"))?;
    let value = value.to_str().map_err(|_| ApiError::unauthorized("malformed Authorization header"))?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .ok_or_else(|| ApiError::unauthorized("Authorization must be 'Bearer <credential>'"))?
        .trim();
    if token.is_empty() {
        return Err(ApiError::unauthorized("empty bearer credential"));
    }
    Ok(token)
}

/// Recognises and verifies any credential.
pub async fn authenticate(state: &AppState, token: &str) -> Result<Credential, ApiError> {
    if token.matches('.').count() == 2 {
        let claims =
            verify_user_token(state, token).ok_or_else(|| ApiError::unauthorized("invalid or expired user token"))?;
        if state.revocations.is_revoked(&state.db, &claims.sub, claims.iat, state.now()).await? {
            return Err(ApiError::unauthorized("this token was signed out everywhere: sign in again"));
        }
        return Ok(Credential::User(claims));
    }
    if token.starts_with("bot_") {
        let hash = digest(token);
        if let Some((bot, stored)) = bots::find_by_token_hash(&state.db, &hash).await?
            && constant_time_eq(&stored, &hash)
        {
            return Ok(Credential::Bot(Box::new(bot)));
        }
    } else if token.starts_with("sk_dev_") {
        let hash = digest(token);
        if let Some((developer, stored)) = developers::find_by_key_hash(&state.db, &hash, state.now()).await?
            && constant_time_eq(&stored, &hash)
        {
            return Ok(Credential::Developer(developer));
        }
    } else if token.starts_with("sk_") {
        let hash = digest(token);
        if let Some((partner, key, stored)) = partners::find_by_key_hash(&state.db, &hash).await?
            && constant_time_eq(&stored, &hash)
        {
            // The key's last use, written off the request's path, at most once a minute per key.
            let now = state.now();
            let key_id = key.id;
            if state.key_uses.due(key_id, now) {
                let db = state.db.clone();
                tokio::spawn(async move {
                    if let Err(error) = partners::KeyUses::write(&db, key_id, now).await {
                        tracing::warn!(%error, key_id, "a partner key's last use could not be written");
                    }
                });
            }
            return Ok(Credential::Partner(partner, key));
        }
    }
    Err(ApiError::unauthorized("unknown or revoked credential"))
}

/// The member session cookie's token, if the request carries one.
pub fn member_cookie(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(crate::members::COOKIE)?.strip_prefix('='))
        .filter(|t| !t.is_empty())
}

/// The CSRF check of a cookie-authenticated request: one that changes something must come from a page of
/// this origin — `Sec-Fetch-Site: same-origin`, or, from a browser that does not send it, an `Origin`
/// equal to the host's public origin. Reads pass (they change nothing, and a cross-site page cannot read
/// the answer).
fn same_origin(parts: &Parts, state: &AppState) -> bool {
    if matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return true;
    }
    if let Some(site) = parts.headers.get("sec-fetch-site") {
        return site.as_bytes() == b"same-origin";
    }
    let public = state.config.public_url.trim_end_matches('/');
    let public_origin = match public.find("://").and_then(|i| public[i + 3..].find('/').map(|j| i + 3 + j)) {
        Some(path) => &public[..path],
        None => public,
    };
    parts.headers.get(ORIGIN).is_some_and(|o| o.as_bytes().eq_ignore_ascii_case(public_origin.as_bytes()))
}

/// A member's session from its cookie: live, of a member still on the partner, before its idle and
/// absolute ends; its activity noted (at most once a minute).
async fn member_session(state: &AppState, token: &str) -> Result<Credential, ApiError> {
    let hash = digest(token);
    let now = state.now();
    let session = members::find_session(&state.db, &hash, now, crate::members::SESSION_IDLE_MS)
        .await?
        .filter(|s| constant_time_eq(&s.token_hash, &hash))
        .ok_or_else(|| ApiError::unauthorized("the session has ended: sign in again"))?;
    if now - session.last_seen_at >= 60_000 {
        members::seen(&state.db, session.id, now).await?;
    }
    Ok(Credential::Member(Box::new(session)))
}

async fn credential(parts: &Parts, state: &AppState) -> Result<Credential, ApiError> {
    let (credential, cross_site) = match (parts.headers.contains_key(AUTHORIZATION), member_cookie(&parts.headers)) {
        (false, Some(token)) => (member_session(state, token).await?, !same_origin(parts, state)),
        _ => (authenticate(state, bearer(parts)?).await?, false),
    };
    // Each request of a credential takes its rate token first: a refused one is audited, and so must be bounded.
    let developer = matches!(credential, Credential::Developer(_));
    if let Err(wait) = state.take_rate_token(&credential.rate_key(), developer) {
        metrics::counter!("hubbub_rate_limited_total", "limit" => if developer { "developer" } else { "credential" })
            .increment(1);
        return Err(ApiError::rate_limited(wait.as_secs_f64().ceil() as u64));
    }
    if cross_site {
        audit(parts, state, &credential);
        return Err(ApiError::forbidden(
            "a cookie-authenticated request that changes something must come from this origin (CSRF)",
        ));
    }
    let role = match &credential {
        Credential::Member(session) => Some((session.member.role, crate::members::refusal(session.member.role))),
        Credential::Partner(_, key) => Some((key.role, crate::members::key_refusal(key.role))),
        _ => None,
    };
    if let Some((role, refusal)) = role {
        let route = route_of(parts);
        let reads = matches!(parts.method, Method::GET | Method::HEAD);
        if !crate::members::allows(role, reads, route) {
            audit(parts, state, &credential);
            return Err(ApiError::forbidden(refusal));
        }
        // What a member or a key changes is written to the audit log by the layer that put the slot here.
        let recorded = !reads || crate::members::audited_read(route);
        if recorded && crate::members::audited(matches!(credential, Credential::Partner(..)), route) {
            audit(parts, state, &credential);
        }
    }
    match &credential {
        Credential::Partner(p, _) => {
            tracing::Span::current().record("partner", p.code.as_str());
        }
        Credential::Member(s) => {
            tracing::Span::current().record("partner", s.partner.code.as_str());
        }
        _ => {}
    }
    Ok(credential)
}

/// The matched route template of a request (`/api/v1/bots/{code}`), else its path.
fn route_of(parts: &Parts) -> &str {
    parts.extensions.get::<MatchedPath>().map(MatchedPath::as_str).unwrap_or(parts.uri.path())
}

/// Fills the request's audit slot (when the audit layer put one there) with who acts: a member's session,
/// or a partner key (and the member who made it); the layer writes the entry with the answer's status.
fn audit(parts: &Parts, state: &AppState, credential: &Credential) {
    let Some(slot) = parts.extensions.get::<AuditSlot>() else { return };
    let (partner_id, member_id, key_id) = match credential {
        Credential::Member(s) => (s.partner.id, Some(s.member.id), None),
        Credential::Partner(p, key) => (p.id, key.created_by, Some(key.id)),
        _ => return,
    };
    let _ = slot.0.set(Acting {
        partner_id,
        member_id,
        key_id,
        action: format!("{} {}", parts.method, route_of(parts)),
        address: crate::http::abuse::ClientIp::of(parts, state).to_string(),
    });
}

/// Put on each request by the audit layer (`http::members::audit`); filled when a member's session or a
/// partner key made it and it changes something, or was refused for its role or as cross-site (CSRF), so
/// that it is written to the audit log.
#[derive(Clone, Default)]
pub struct AuditSlot(pub Arc<OnceLock<Acting>>);

/// A member or a partner key acting: who, on which route (`POST /api/v1/bots/{code}/token`), from which
/// address.
#[derive(Debug)]
pub struct Acting {
    pub partner_id: i64,
    /// The member (of the session, or who made the key; none for a key of the command line's).
    pub member_id: Option<i64>,
    /// The key, when one made the call.
    pub key_id: Option<i64>,
    pub action: String,
    pub address: String,
}

/// The calling partner, and the member acting for it when a member's session made the call (none for an
/// API key, which is `key`): for the routes that record who did something (invitations, new keys).
#[derive(Debug, Clone)]
pub struct PartnerActor {
    pub partner: Partner,
    pub member: Option<members::Member>,
    pub key: Option<KeyAuth>,
}

impl PartnerActor {
    /// Who a key made by this caller is made by: the member (their role), or the calling key's role and
    /// member — a key never makes one that may do more than itself.
    pub fn key_maker(&self) -> KeyMaker {
        match (&self.member, &self.key) {
            (Some(member), _) => KeyMaker { role: member.role, member_id: Some(member.id) },
            (None, Some(key)) => KeyMaker { role: key.role, member_id: key.created_by },
            (None, None) => KeyMaker::OPERATOR,
        }
    }
}

impl FromRequestParts<AppState> for PartnerActor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match credential(parts, state).await? {
            Credential::Partner(partner, key) => Ok(PartnerActor { partner, member: None, key: Some(key) }),
            Credential::Member(s) => {
                let s = *s;
                Ok(PartnerActor { partner: s.partner, member: Some(s.member), key: None })
            }
            _ => Err(ApiError::forbidden("this route takes a partner key or a member's session")),
        }
    }
}

/// The partner on a long-lived request (an event stream), and what proves the caller may go on: checked
/// again at each heartbeat, so a revoked key or an ended member session ends the stream.
#[derive(Debug, Clone)]
pub struct PartnerWatch {
    pub partner: Partner,
    /// Who holds the stream, for the per-holder bound: `member:{id}`, or the partner for a key.
    pub holder: String,
    proof: Proof,
}

#[derive(Debug, Clone)]
enum Proof {
    /// A partner key's digest.
    Key(String),
    /// A member session's token digest.
    Session(String),
}

impl PartnerWatch {
    /// Whether the key or session that opened the request still works.
    pub async fn still_valid(&self, state: &AppState) -> Result<bool, sqlx::Error> {
        Ok(match &self.proof {
            Proof::Key(hash) => partners::find_by_key_hash(&state.db, hash).await?.is_some(),
            Proof::Session(hash) => {
                members::find_session(&state.db, hash, state.now(), crate::members::SESSION_IDLE_MS).await?.is_some()
            }
        })
    }
}

impl FromRequestParts<AppState> for PartnerWatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match credential(parts, state).await? {
            Credential::Partner(partner, _) => Ok(PartnerWatch {
                holder: crate::store::user_events::partner_key(partner.id),
                partner,
                proof: Proof::Key(digest(bearer(parts)?)),
            }),
            Credential::Member(s) => Ok(PartnerWatch {
                holder: format!("member:{}", s.member.id),
                proof: Proof::Session(s.token_hash.clone()),
                partner: s.partner,
            }),
            _ => Err(ApiError::forbidden("this route takes a partner key or a member's session")),
        }
    }
}

/// The signed-in member, on the routes of their own session (`/members/me`, sign out).
#[derive(Debug, Clone)]
pub struct MemberAuth(pub Box<Session>);

impl FromRequestParts<AppState> for MemberAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match credential(parts, state).await? {
            Credential::Member(s) => Ok(MemberAuth(s)),
            _ => Err(ApiError::forbidden("this route takes a member's session (sign in at /console/)")),
        }
    }
}

/// The calling partner, on routes that take a partner API key.
#[derive(Debug, Clone)]
pub struct PartnerAuth(pub Partner);

impl FromRequestParts<AppState> for PartnerAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match credential(parts, state).await? {
            Credential::Partner(p, _) => Ok(PartnerAuth(p)),
            Credential::Member(s) => Ok(PartnerAuth(s.partner)),
            Credential::User(_) => Err(ApiError::forbidden("a user token cannot call partner routes")),
            Credential::Developer(_) => {
                Err(ApiError::forbidden("developer keys may only call /dev routes: partner routes need a partner key"))
            }
            Credential::Bot(_) => Err(ApiError::forbidden("this route needs the partner key, not a bot token")),
        }
    }
}

/// The calling end user, on `/me` routes. Every such call counts as device activity (presence).
#[derive(Debug, Clone)]
pub struct UserAuth {
    pub phone: String,
    pub device: Option<String>,
    /// When the token was issued and when it expires (seconds since the epoch).
    pub issued_at_s: i64,
    pub expires_at_s: i64,
}

impl FromRequestParts<AppState> for UserAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match credential(parts, state).await? {
            Credential::User(claims) => {
                state.presence.touch(&claims.sub, state.now()).await?;
                Ok(UserAuth {
                    phone: claims.sub,
                    device: claims.dev,
                    issued_at_s: claims.iat,
                    expires_at_s: claims.exp,
                })
            }
            Credential::Partner(..) | Credential::Developer(_) | Credential::Bot(_) | Credential::Member(_) => {
                Err(ApiError::forbidden("/me routes take a user token"))
            }
        }
    }
}

/// Any verified credential, for routes open to several kinds (e.g. media: sender or recipient).
#[derive(Debug, Clone)]
pub struct AnyAuth(pub Credential);

impl FromRequestParts<AppState> for AnyAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        credential(parts, state).await.map(AnyAuth)
    }
}

/// Claims of a user JWT (HS256): `sub` = phone, `dev` = device uuid, `exp` — the contract's — and `iat`,
/// which every token this host issues carries. A token without `iat` (made elsewhere with the secret) counts
/// as issued at the epoch: any "sign out everywhere" of its phone ends it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct UserClaims {
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    #[serde(default)]
    pub iat: i64,
    pub exp: i64,
}

/// Signs a user JWT for `phone` (and a device); returns it with its expiry (epoch ms).
pub fn issue_user_token(state: &AppState, phone: &str, device: Option<&str>) -> anyhow::Result<(String, i64)> {
    let now_s = state.now() / 1000;
    let exp = now_s + state.config.user_token_ttl_s as i64;
    let claims = UserClaims { sub: phone.to_string(), dev: device.map(str::to_string), iat: now_s, exp };
    let key = jsonwebtoken::EncodingKey::from_secret(&state.jwt_secret);
    let token = jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256), &claims, &key)?;
    Ok((token, exp * 1000))
}

/// Signs out everywhere: every token of `phone` issued so far (this second included) is refused from now
/// on, on every host.
pub async fn revoke_user_tokens(state: &AppState, phone: &str) -> Result<(), sqlx::Error> {
    let now = state.now();
    state.revocations.revoke(&state.db, phone, now.div_euclid(1000) + 1, now).await
}

/// Verifies a user JWT against the service secret and the injected clock (not whether it was signed out:
/// [`authenticate`] checks that).
pub fn verify_user_token(state: &AppState, token: &str) -> Option<UserClaims> {
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
    // Expiry is checked below against the injected clock, not the system's.
    validation.validate_exp = false;
    validation.required_spec_claims = ["sub", "exp"].into_iter().map(String::from).collect();
    let key = jsonwebtoken::DecodingKey::from_secret(&state.jwt_secret);
    let data = jsonwebtoken::decode::<UserClaims>(token, &key, &validation).ok()?;
    (data.claims.exp * 1000 > state.now()).then_some(data.claims)
}

/// The calling developer, on `/dev` routes.
#[derive(Debug, Clone)]
pub struct DeveloperAuth(pub Developer);

impl FromRequestParts<AppState> for DeveloperAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match credential(parts, state).await? {
            Credential::Developer(d) => Ok(DeveloperAuth(d)),
            Credential::Partner(..) | Credential::Member(_) => {
                Err(ApiError::forbidden("/dev routes take a developer key (sk_dev_…)"))
            }
            Credential::User(_) | Credential::Bot(_) => {
                Err(ApiError::forbidden("/dev routes take a developer key (sk_dev_…)"))
            }
        }
    }
}

/// A partner key or a bot token, on the bot routes open to both (`GET /bots/{code}`, credentials). The
/// handler checks that a bot token names its own bot.
#[derive(Debug, Clone)]
pub enum PartnerOrBot {
    Partner(Partner),
    Bot(Box<Bot>),
}

impl FromRequestParts<AppState> for PartnerOrBot {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match credential(parts, state).await? {
            Credential::Partner(p, _) => Ok(PartnerOrBot::Partner(p)),
            Credential::Member(s) => Ok(PartnerOrBot::Partner(s.partner)),
            Credential::Bot(b) => {
                let client = crate::http::abuse::ClientIp::of(parts, state);
                crate::bots::check_allowed_ips(b.allowed_ips.as_deref(), Some(client))?;
                Ok(PartnerOrBot::Bot(b))
            }
            _ => Err(ApiError::forbidden("this route takes a partner key or the bot's token")),
        }
    }
}
