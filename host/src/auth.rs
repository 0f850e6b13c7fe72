//! Who is calling: every credential kind is recognised here, in one place, and each route states the
//! kind it accepts through an extractor. A credential that is unknown, malformed or revoked is 401; a
//! valid credential of the wrong kind for the route is 403. Rate limits are taken per credential here.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use crate::http::error::ApiError;
use crate::secrets::{constant_time_eq, digest};
use crate::state::AppState;
use crate::store::bots::{self, Bot};
use crate::store::developers::{self, Developer};
use crate::store::partners::{self, Partner};

/// A verified credential.
#[derive(Debug, Clone)]
pub enum Credential {
    Partner(Partner),
    /// An end user, by a JWT from OTP login.
    User(UserClaims),
    /// A developer, by an `sk_dev_` key.
    Developer(Developer),
    /// A bot, by its `bot_<prefix>.<secret>` token: scoped to that bot. (Boxed: a bot row is far larger
    /// than the other credentials.)
    Bot(Box<Bot>),
}

impl Credential {
    /// The rate-limit bucket of this credential.
    fn rate_key(&self) -> String {
        match self {
            Credential::Partner(p) => format!("partner:{}", p.id),
            Credential::User(u) => format!("user:{}", u.sub),
            Credential::Developer(d) => format!("developer:{}", d.id),
            Credential::Bot(b) => format!("bot:{}", b.id),
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
        if let Some((partner, key_id, stored)) = partners::find_by_key_hash(&state.db, &hash).await?
            && constant_time_eq(&stored, &hash)
        {
            // The key's last use, written off the request's path, at most once a minute per key.
            let now = state.now();
            if state.key_uses.due(key_id, now) {
                let db = state.db.clone();
                tokio::spawn(async move {
                    if let Err(error) = partners::KeyUses::write(&db, key_id, now).await {
                        tracing::warn!(%error, key_id, "a partner key's last use could not be written");
                    }
                });
            }
            return Ok(Credential::Partner(partner));
        }
    }
    Err(ApiError::unauthorized("unknown or revoked credential"))
}

async fn credential(parts: &Parts, state: &AppState) -> Result<Credential, ApiError> {
    let credential = authenticate(state, bearer(parts)?).await?;
    let developer = matches!(credential, Credential::Developer(_));
    if let Err(wait) = state.take_rate_token(&credential.rate_key(), developer) {
        metrics::counter!("hubbub_rate_limited_total", "limit" => if developer { "developer" } else { "credential" })
            .increment(1);
        return Err(ApiError::rate_limited(wait.as_secs_f64().ceil() as u64));
    }
    if let Credential::Partner(p) = &credential {
        tracing::Span::current().record("partner", p.code.as_str());
    }
    Ok(credential)
}

/// The calling partner, on routes that take a partner API key.
#[derive(Debug, Clone)]
pub struct PartnerAuth(pub Partner);

impl FromRequestParts<AppState> for PartnerAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match credential(parts, state).await? {
            Credential::Partner(p) => Ok(PartnerAuth(p)),
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
            Credential::Partner(_) | Credential::Developer(_) | Credential::Bot(_) => {
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

/// Claims of a user JWT (HS256): `sub` = phone, `dev` = device uuid, `exp`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct UserClaims {
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
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
            Credential::Partner(_) => Err(ApiError::forbidden("/dev routes take a developer key (sk_dev_…)")),
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
            Credential::Partner(p) => Ok(PartnerOrBot::Partner(p)),
            Credential::Bot(b) => {
                let client = crate::http::abuse::ClientIp::of(parts, state);
                crate::bots::check_allowed_ips(b.allowed_ips.as_deref(), Some(client))?;
                Ok(PartnerOrBot::Bot(b))
            }
            _ => Err(ApiError::forbidden("this route takes a partner key or the bot's token")),
        }
    }
}
