//! `/dev-sink/messages`: in dev mode, what the SMS and WhatsApp providers would have sent (OTP codes,
//! invitations, fallback texts). Only the platform partner may read it.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiQuery, E404, E422, List, PageParams, query_text};
use crate::clock::record_time;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::string_enum;
use crate::providers::{SinkRecord, dev_sink_list};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_dev_sink))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SinkFilter {
    /// Only texts to this phone (E.164).
    phone: Option<String>,
    #[param(schema_with = channel_schema)]
    #[serde(default, deserialize_with = "super::filter")]
    channel: Option<SinkChannel>,
}

string_enum! {
    /// The channels whose providers the dev sink stands in for.
    enum SinkChannel {
        Sms = "sms",
        Whatsapp = "whatsapp",
    }
}

/// Only texts of this channel.
fn channel_schema() -> utoipa::openapi::Object {
    super::openapi::filter_of(&SinkChannel::names(), "Only texts of this channel")
}

/// A text the SMS or WhatsApp provider would have sent.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DevSinkText)]
struct SinkEntry {
    /// `sms` or `whatsapp`.
    channel: String,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: String,
    text: String,
    at: String,
}

impl From<&SinkRecord> for SinkEntry {
    fn from(r: &SinkRecord) -> Self {
        SinkEntry { channel: r.channel.clone(), phone: r.phone.clone(), text: r.text.clone(), at: record_time(r.at) }
    }
}

/// Dev mode only, platform partner only: what SMS and WhatsApp would have sent.
///
/// 404 when the host is not in dev mode; 403 for any other partner.
#[utoipa::path(
    get,
    path = "/dev-sink/messages",
    tag = "delivery",
    security(("partnerKey" = [])),
    params(SinkFilter, PageParams),
    responses(
        (status = 200, description = "A page of texts, newest first", body = List<SinkEntry>),
        (status = 404, response = E404),
        (status = 422, response = E422),
    )
)]
async fn list_dev_sink(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(filter): ApiQuery<SinkFilter>,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<SinkEntry>>> {
    if !state.config.dev {
        return Err(ApiError::not_found("route"));
    }
    if !partner.is_platform {
        return Err(ApiError::forbidden("the dev sink is for the platform partner only"));
    }
    let page = page.page()?;
    let channel = filter.channel.map(SinkChannel::as_str);
    let phone = query_text(filter.phone);
    let rows = dev_sink_list(&state.db, phone.as_deref(), channel, page.before, page.fetch()).await?;
    Ok(Json(page.list(rows, |r| r.id, |r| SinkEntry::from(r))))
}
