//! The one error type of the API, at the HTTP edge. Every non-2xx response is built here, in the error
//! shape of `docs/api.md`: `{"error": {"code", "message", "field"?, "fields"?}}`. Internal errors are logged
//! and never shown. The domain modules' own errors ([`Invalid`], [`crate::otp::OtpError`], …) become
//! `ApiError`s here, and only here: no module below `http` knows this type.

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::validate::Invalid;

/// An error answered to an API caller.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    field: Option<String>,
    fields: Option<BTreeMap<String, String>>,
    retry_after_s: Option<u64>,
    /// The size a `416` names in `Content-Range: bytes */{size}`.
    range_of: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
            fields: None,
            retry_after_s: None,
            range_of: None,
        }
    }

    /// 422 `validation` on one field (dotted for nested fields).
    pub fn validation(field: impl Into<String>, message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::UNPROCESSABLE_ENTITY, "validation", message);
        e.field = Some(field.into());
        e
    }

    /// 422 `validation` for a form or field set, with a message per field.
    pub fn invalid_fields(fields: BTreeMap<String, String>) -> Self {
        let message = match fields.len() {
            1 => "1 field is invalid".to_string(),
            n => format!("{n} fields are invalid"),
        };
        let mut e = Self::new(StatusCode::UNPROCESSABLE_ENTITY, "validation", message);
        if fields.len() == 1 {
            e.field = fields.keys().next().cloned();
        }
        e.fields = Some(fields);
        e
    }

    /// 422 with a code other than `validation` (e.g. `e2e_no_devices`, `template_not_approved`).
    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    /// The message shown to the caller.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The request field at fault, if one is.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", format!("{what} not found"))
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn idempotency_conflict() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "idempotency_conflict",
            "idempotency_key was already used with a different payload",
        )
    }

    pub fn payload_too_large() -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", "request body is over the size limit")
    }

    /// 416 `range_not_satisfiable`: a `Range` that starts past the end of the bytes.
    pub fn range_not_satisfiable(len: u64) -> Self {
        let mut e = Self::new(
            StatusCode::RANGE_NOT_SATISFIABLE,
            "range_not_satisfiable",
            format!("the range asked for is outside the {len} bytes"),
        );
        e.range_of = Some(len);
        e
    }

    pub fn rate_limited(retry_after_s: u64) -> Self {
        Self::too_many(retry_after_s, "too many requests, slow down")
    }

    /// 429 `rate_limited`, saying which limit was reached.
    pub fn too_many(retry_after_s: u64, message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message);
        e.retry_after_s = Some(retry_after_s.max(1));
        e
    }

    /// 503 `timeout`: the request took longer than the host's request timeout.
    pub fn timed_out(limit: std::time::Duration) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!(
                "the request took longer than {} ms; it may still complete, so retry idempotently",
                limit.as_millis()
            ),
        )
    }

    /// 503 `unavailable`: the host cannot take this work now; try again after `retry_after_s`.
    pub fn unavailable(retry_after_s: u64, message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message);
        e.retry_after_s = Some(retry_after_s.max(1));
        e
    }

    pub fn bad_gateway(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, code, message)
    }

    /// A bug or an infrastructure failure: logged in full, answered as a bare `internal`.
    pub fn internal(err: impl std::fmt::Display) -> Self {
        tracing::error!(error = %err, "internal error");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn code(&self) -> &'static str {
        self.code
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.status.as_u16(), self.message)
    }
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError::validation(e.field, e.message)
    }
}

impl From<crate::validate::KeepError> for ApiError {
    fn from(e: crate::validate::KeepError) -> Self {
        use crate::validate::KeepError;
        match e {
            KeepError::Invalid(invalid) => invalid.into(),
            KeepError::NotFound(what) => ApiError::not_found(what),
            KeepError::Taken(why) => ApiError::conflict(why),
            KeepError::Database(e) => e.into(),
        }
    }
}

impl From<crate::developers::DeveloperError> for ApiError {
    fn from(e: crate::developers::DeveloperError) -> Self {
        use crate::developers::DeveloperError;
        match e {
            DeveloperError::Invalid(invalid) => invalid.into(),
            DeveloperError::Unauthorized(why) => ApiError::unauthorized(why),
            DeveloperError::AlreadyVerified => ApiError::conflict(e.to_string()),
            DeveloperError::NotApproved(why) => {
                ApiError::unprocessable("template_not_approved", why).with_field("template_code")
            }
            DeveloperError::OverQuota { retry_after_s } => ApiError::rate_limited(retry_after_s),
            DeveloperError::Otp(e) => e.into(),
            DeveloperError::Send(e) => e.into(),
            DeveloperError::Database(e) => e.into(),
        }
    }
}

impl From<crate::broadcasts::BroadcastError> for ApiError {
    fn from(e: crate::broadcasts::BroadcastError) -> Self {
        use crate::broadcasts::BroadcastError;
        match e {
            BroadcastError::Compose(e) => e.into(),
            BroadcastError::NotFound => ApiError::not_found("broadcast"),
            BroadcastError::NotScheduled(_) => ApiError::conflict(e.to_string()),
            BroadcastError::Database(e) => e.into(),
        }
    }
}

impl From<crate::bots::manage::BotError> for ApiError {
    fn from(e: crate::bots::manage::BotError) -> Self {
        use crate::bots::manage::BotError;
        match e {
            BotError::Invalid(invalid) => invalid.into(),
            BotError::Taken(_) => ApiError::conflict(e.to_string()),
            BotError::Conflict(why) => ApiError::conflict(why),
            BotError::WhatsappMenu(_) => ApiError::unprocessable("whatsapp_menu", e.to_string()),
            BotError::Flow(e) => e.into(),
            BotError::Database(e) => e.into(),
        }
    }
}

impl From<crate::invitations::InviteError> for ApiError {
    fn from(e: crate::invitations::InviteError) -> Self {
        use crate::invitations::InviteError;
        match e {
            InviteError::Invalid(invalid) => invalid.into(),
            InviteError::NoFlow => ApiError::not_found("flow"),
            InviteError::Unreachable(why) => ApiError::conflict(why),
            InviteError::Flow(e) => e.into(),
            InviteError::Send(e) => e.into(),
            InviteError::Database(e) => e.into(),
        }
    }
}

impl From<crate::messages::MarkError> for ApiError {
    fn from(e: crate::messages::MarkError) -> Self {
        use crate::messages::MarkError;
        match e {
            MarkError::NotFound => ApiError::not_found("message"),
            MarkError::Failed => ApiError::conflict(e.to_string()),
            MarkError::Database(e) => e.into(),
        }
    }
}

impl From<crate::desk::DeskError> for ApiError {
    fn from(e: crate::desk::DeskError) -> Self {
        use crate::desk::DeskError;
        match e {
            DeskError::Invalid(invalid) => invalid.into(),
            DeskError::Conflict(why) => ApiError::conflict(why),
            DeskError::NotFound => ApiError::not_found("conversation"),
            DeskError::Send(e) => e.into(),
            DeskError::Database(e) => e.into(),
        }
    }
}

impl From<crate::conversations::OpenError> for ApiError {
    fn from(e: crate::conversations::OpenError) -> Self {
        use crate::conversations::OpenError;
        match e {
            OpenError::Compose(e) => e.into(),
            OpenError::NoPartner => ApiError::not_found("partner"),
            OpenError::Database(e) => e.into(),
        }
    }
}

impl From<crate::accounts::SignInError> for ApiError {
    fn from(e: crate::accounts::SignInError) -> Self {
        use crate::accounts::SignInError;
        match e {
            SignInError::Invalid(invalid) => invalid.into(),
            SignInError::Otp(e) => e.into(),
            SignInError::DeviceTaken => ApiError::conflict(e.to_string()),
            SignInError::Database(e) => e.into(),
        }
    }
}

impl From<crate::accounts::LinkError> for ApiError {
    fn from(e: crate::accounts::LinkError) -> Self {
        use crate::accounts::LinkError;
        match e {
            LinkError::Invalid(invalid) => invalid.into(),
            LinkError::Fields(fields) => ApiError::invalid_fields(fields),
            LinkError::Database(e) => e.into(),
        }
    }
}

impl From<crate::inbound::form_links::LinkError> for ApiError {
    fn from(e: crate::inbound::form_links::LinkError) -> Self {
        use crate::inbound::form_links::LinkError;
        match e {
            LinkError::NotFound => ApiError::not_found("form link"),
            LinkError::Unusable(why) => ApiError::conflict(why),
            LinkError::Flow(e) => e.into(),
            LinkError::Database(e) => e.into(),
        }
    }
}

impl From<crate::members::MemberError> for ApiError {
    fn from(e: crate::members::MemberError) -> Self {
        use crate::members::MemberError;
        match e {
            MemberError::Invalid(invalid) => invalid.into(),
            MemberError::Otp(e) => e.into(),
            MemberError::UnusableInvitation => ApiError::unauthorized(e.to_string()),
            MemberError::NotMember => ApiError::forbidden(e.to_string()),
            MemberError::NotFound => ApiError::not_found("member"),
            MemberError::LastOwner => ApiError::conflict(e.to_string()),
            MemberError::Database(e) => e.into(),
        }
    }
}

impl From<crate::delivery::signed::SignatureError> for ApiError {
    fn from(e: crate::delivery::signed::SignatureError) -> Self {
        use crate::delivery::signed::SignatureError;
        match e {
            SignatureError::NotFound(what) => ApiError::not_found(what),
            SignatureError::Unauthorized(why) => ApiError::unauthorized(why),
            SignatureError::BadRequest(why) => ApiError::bad_request(why),
            SignatureError::Database(e) => e.into(),
        }
    }
}

impl From<crate::passkeys::PasskeyError> for ApiError {
    fn from(e: crate::passkeys::PasskeyError) -> Self {
        use crate::passkeys::PasskeyError;
        match e {
            PasskeyError::Invalid(invalid) => invalid.into(),
            PasskeyError::Conflict(why) => ApiError::conflict(why),
            PasskeyError::Unauthorized(why) => ApiError::unauthorized(why),
            PasskeyError::NotFound(what) => ApiError::not_found(what),
            PasskeyError::Internal(why) => ApiError::internal(why),
            PasskeyError::Database(e) => e.into(),
        }
    }
}

impl From<crate::retention::RetentionError> for ApiError {
    fn from(e: crate::retention::RetentionError) -> Self {
        match e {
            crate::retention::RetentionError::Invalid(invalid) => invalid.into(),
            crate::retention::RetentionError::Database(e) => e.into(),
        }
    }
}

impl From<crate::messages::compose::ComposeError> for ApiError {
    fn from(e: crate::messages::compose::ComposeError) -> Self {
        use crate::messages::compose::ComposeError;
        match e {
            ComposeError::Invalid(invalid) => invalid.into(),
            ComposeError::NoDevices => ApiError::unprocessable("e2e_no_devices", e.to_string()),
            ComposeError::TemplateNotApproved(why) => {
                ApiError::unprocessable("template_not_approved", why).with_field("template_code")
            }
            ComposeError::Database(e) => e.into(),
        }
    }
}

impl From<crate::messages::send::SendError> for ApiError {
    fn from(e: crate::messages::send::SendError) -> Self {
        use crate::messages::send::SendError;
        match e {
            SendError::Compose(e) => e.into(),
            SendError::IdempotencyConflict => ApiError::idempotency_conflict(),
            SendError::RefTaken => ApiError::conflict(e.to_string()),
            SendError::Database(e) => e.into(),
        }
    }
}

impl From<crate::flows::FlowError> for ApiError {
    fn from(e: crate::flows::FlowError) -> Self {
        use crate::flows::FlowError;
        match e {
            FlowError::Invalid(invalid) => invalid.into(),
            FlowError::InvalidFields(fields) => ApiError::invalid_fields(fields),
            FlowError::NotFound(what) => ApiError::not_found(what),
            FlowError::Conflict(why) => ApiError::conflict(why),
            FlowError::Bot(_) => ApiError::bad_gateway("bot_error", e.to_string()),
            FlowError::PaymentProvider(_) => ApiError::bad_gateway("payment_provider_error", e.to_string()),
            FlowError::QueueFull => ApiError::too_many(1, e.to_string()),
            FlowError::Busy => ApiError::unavailable(1, e.to_string()),
            FlowError::Database(e) => e.into(),
            FlowError::Internal(why) => ApiError::internal(why),
        }
    }
}

impl From<crate::payments::PaymentError> for ApiError {
    fn from(e: crate::payments::PaymentError) -> Self {
        use crate::payments::PaymentError;
        match e {
            PaymentError::Invalid(why) => ApiError::bad_gateway("bot_error", why),
            PaymentError::NotConfigured => ApiError::conflict(e.to_string()),
            PaymentError::NotFound(what) => ApiError::not_found(what),
            PaymentError::Conflict(why) => ApiError::conflict(why),
            PaymentError::Provider(why) => ApiError::bad_gateway("payment_provider_error", why),
            PaymentError::Database(e) => e.into(),
        }
    }
}

impl From<crate::bots::InboundError> for ApiError {
    fn from(e: crate::bots::InboundError) -> Self {
        use crate::bots::InboundError;
        match e {
            InboundError::Unauthorized(why) => ApiError::unauthorized(why),
            InboundError::Forbidden(why) => ApiError::forbidden(why),
            InboundError::Malformed(why) => ApiError::bad_request(why),
            InboundError::Database(e) => e.into(),
        }
    }
}

impl From<crate::otp::OtpError> for ApiError {
    fn from(e: crate::otp::OtpError) -> Self {
        use crate::otp::OtpError;
        match e {
            OtpError::TooManySends { retry_after_s } => ApiError::rate_limited(retry_after_s),
            OtpError::NotSent(reason) => {
                ApiError::bad_gateway("delivery_failed", format!("the code could not be sent: {reason}"))
            }
            OtpError::Rejected => ApiError::unauthorized("the code is wrong, expired or used up"),
            OtpError::OtherPending { until } => ApiError::conflict(format!(
                "a sign-up for this phone with another e-mail waits for its code until {}: use that code, or \
                 sign up again once it has lapsed",
                crate::clock::record_time(until)
            )),
            OtpError::Database(e) => e.into(),
        }
    }
}

impl From<crate::delivery::meta_review::SubmitError> for ApiError {
    fn from(e: crate::delivery::meta_review::SubmitError) -> Self {
        use crate::delivery::meta_review::SubmitError;
        match e {
            SubmitError::Unavailable(why) => {
                ApiError::unavailable(30, format!("Meta's review could not be reached; try again: {why}"))
            }
            SubmitError::NotFound => ApiError::not_found("template"),
            SubmitError::Submitted(_) => ApiError::conflict(e.to_string()),
            SubmitError::Store(e) => e.into(),
        }
    }
}

impl From<crate::senders::SenderError> for ApiError {
    fn from(e: crate::senders::SenderError) -> Self {
        use crate::senders::SenderError;
        match e {
            SenderError::Invalid(invalid) => invalid.into(),
            SenderError::Taken(address) => ApiError::conflict(format!("another partner has {address} as its sender")),
            SenderError::Unreachable(why) => ApiError::bad_gateway(
                "provider_unavailable",
                format!("the provider could not be asked whether these credentials hold this sender; try again: {why}"),
            ),
            SenderError::Database(e) => e.into(),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        ApiError::internal(format_args!("database: {err}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(field) = self.field {
            error["field"] = json!(field);
        }
        if let Some(fields) = self.fields {
            error["fields"] = json!(fields);
        }
        let mut response = (self.status, axum::Json(json!({ "error": error }))).into_response();
        if let Some(secs) = self.retry_after_s {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Some(len) = self.range_of {
            let value = HeaderValue::from_str(&format!("bytes */{len}")).expect("digits are a header value");
            response.headers_mut().insert(header::CONTENT_RANGE, value);
        }
        response
    }
}
