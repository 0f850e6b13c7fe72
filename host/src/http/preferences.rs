//! `/me/preferences`: what reaches the person and when, set by them in the app — per partner muted, blocked
//! or no marketing; the channels they refuse; quiet hours in their time zone (docs/preferences.md). Delivery,
//! sends, bots and Web Push honour them (`crate::preferences` has the rules).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E422};
use crate::accounts::{self, Document};
use crate::http::auth::UserAuth;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::preferences::Window;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(my_preferences, set_my_preferences))
}

/// The person's preferences.
#[derive(Serialize, ToSchema)]
#[schema(as = Preferences)]
pub struct PreferencesDoc {
    /// Their IANA time zone (`Europe/Berlin`); quiet hours are in it. `null`: none set (the app proposes the
    /// browser's).
    #[schema(example = "Europe/Berlin")]
    pub time_zone: Option<String>,
    /// Notifications and marketing wait until these end; codes (`otp`) and chat (answers in a conversation
    /// they opened) pass; messages in the app arrive silently (no push). `null`: none (a partner's default
    /// window then applies to its messages).
    pub quiet_hours: Option<QuietHours>,
    pub channels: Channels,
    /// By partner code: every partner that sent them a message or that they set something for.
    pub partners: BTreeMap<String, PartnerPreferences>,
}

/// New preferences: the whole document (what it leaves out goes back to its default).
#[derive(Deserialize, ToSchema)]
#[schema(as = PreferencesUpdate)]
pub struct Update {
    /// An IANA time zone; `null` or absent: none. An unknown zone is 422.
    #[serde(default)]
    #[schema(example = "Europe/Berlin")]
    pub time_zone: Option<String>,
    /// `null` or absent: none.
    #[serde(default)]
    pub quiet_hours: Option<QuietHours>,
    /// Absent: both taken.
    #[serde(default)]
    pub channels: ChannelsUpdate,
    /// By partner code; partners not named go back to the defaults. An unknown code is 422.
    #[serde(default)]
    pub partners: BTreeMap<String, PartnerUpdate>,
}

/// A daily window, `HH:MM` (24-hour) to `HH:MM`, across midnight when the end is earlier.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct QuietHours {
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$", example = "22:00")]
    pub start: String,
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$", example = "07:00")]
    pub end: String,
}

/// The channels the person takes messages by, besides the app: `false` refuses one (its tries are skipped,
/// `channel_refused_by_user`; the message waits in the app).
#[derive(Serialize, ToSchema)]
pub struct Channels {
    pub whatsapp: bool,
    pub sms: bool,
}

/// The channels taken (each absent: taken).
#[derive(Deserialize, ToSchema)]
pub struct ChannelsUpdate {
    #[serde(default = "yes")]
    pub whatsapp: bool,
    #[serde(default = "yes")]
    pub sms: bool,
}

impl Default for ChannelsUpdate {
    fn default() -> Self {
        ChannelsUpdate { whatsapp: true, sms: true }
    }
}

fn yes() -> bool {
    true
}

/// What the person chose for one partner.
#[derive(Serialize, ToSchema)]
pub struct PartnerPreferences {
    /// The partner's name.
    pub name: String,
    /// The hub only: no push, no WhatsApp or SMS (answers in conversations they opened still come).
    pub muted: bool,
    /// Nothing from the partner reaches them: its sends answer `201` with the message `failed`, error
    /// `blocked_by_user`; its bots answer nothing.
    pub blocked: bool,
    /// `false`: no marketing templates or broadcasts from the partner (they fail, error `marketing_refused`).
    pub marketing: bool,
}

/// What the person chooses for one partner (see `PartnerPreferences`; each absent: its default, and `name`
/// is ignored).
#[derive(Deserialize, ToSchema)]
pub struct PartnerUpdate {
    #[serde(default)]
    pub muted: bool,
    #[serde(default)]
    pub blocked: bool,
    #[serde(default = "yes")]
    pub marketing: bool,
}

impl From<Document> for PreferencesDoc {
    fn from(doc: Document) -> Self {
        PreferencesDoc {
            time_zone: doc.time_zone,
            quiet_hours: doc.quiet.map(|w| QuietHours { start: Window::format(w.start), end: Window::format(w.end) }),
            channels: Channels { whatsapp: doc.whatsapp, sms: doc.sms },
            partners: doc
                .partners
                .into_iter()
                .map(|p| {
                    let choice =
                        PartnerPreferences { name: p.name, muted: p.muted, blocked: p.blocked, marketing: p.marketing };
                    (p.code, choice)
                })
                .collect(),
        }
    }
}

/// My preferences.
#[utoipa::path(
    get,
    path = "/me/preferences",
    tag = "users",
    security(("userJwt" = [])),
    responses((status = 200, description = "What reaches me and when", body = PreferencesDoc))
)]
async fn my_preferences(State(state): State<AppState>, user: UserAuth) -> ApiResult<Json<PreferencesDoc>> {
    Ok(Json(accounts::preferences(&state.db, &user.phone).await?.into()))
}

/// Set my preferences (the whole document: what it leaves out goes back to the defaults).
#[utoipa::path(
    put,
    path = "/me/preferences",
    tag = "users",
    security(("userJwt" = [])),
    request_body = Update,
    responses(
        (status = 200, description = "The preferences as stored", body = PreferencesDoc),
        (status = 422, response = E422)
    )
)]
async fn set_my_preferences(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<Update>,
) -> ApiResult<Json<PreferencesDoc>> {
    let update = accounts::PreferencesUpdate {
        time_zone: req.time_zone.as_deref(),
        quiet: req.quiet_hours.as_ref().map(|q| (q.start.as_str(), q.end.as_str())),
        whatsapp: req.channels.whatsapp,
        sms: req.channels.sms,
        partners: req
            .partners
            .iter()
            .map(|(code, c)| {
                let choice =
                    accounts::PartnerChoiceInput { muted: c.muted, blocked: c.blocked, marketing: c.marketing };
                (code.as_str(), choice)
            })
            .collect(),
    };
    Ok(Json(accounts::set_preferences(&state.db, &user.phone, update, state.now()).await?.into()))
}
