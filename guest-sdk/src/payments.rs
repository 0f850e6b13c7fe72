//! Payments: a payment step and the result the host reports back.

/// A payment step; its outcome comes back as [`UserEvent::Payment`](crate::UserEvent::Payment).
///
/// ```no_run
/// # use hubbub_guest_sdk::PaymentRequest;
/// let request = PaymentRequest::new("order-1", 350, "EUR", "Large coffee");
/// ```
pub use crate::wit::hubbub::bot::payments::PaymentRequest;
/// The result of a payment step: the request id, the status and, when confirmed, a reference.
///
/// ```no_run
/// # use hubbub_guest_sdk::PaymentResult;
/// fn receipt(result: &PaymentResult) -> Option<String> {
///     result.is_confirmed().then(|| format!("Paid, reference {}", result.reference.as_deref().unwrap_or("-")))
/// }
/// ```
pub use crate::wit::hubbub::bot::payments::PaymentResult;
/// Outcome of a payment.
///
/// ```no_run
/// # use hubbub_guest_sdk::{PaymentResult, PaymentStatus};
/// fn retry(result: &PaymentResult) -> bool {
///     matches!(result.status, PaymentStatus::Declined | PaymentStatus::Cancelled)
/// }
/// ```
pub use crate::wit::hubbub::bot::payments::PaymentStatus;

impl PaymentRequest {
    /// A request for `amount_minor` in the currency's minor unit (cents for `EUR`).
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::PaymentRequest;
    /// let request = PaymentRequest::new("order-7", 1250, "EUR", "Two large teas");
    /// ```
    pub fn new(
        id: impl Into<String>,
        amount_minor: u64,
        currency: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        PaymentRequest { id: id.into(), amount_minor, currency: currency.into(), description: description.into() }
    }
}

impl PaymentResult {
    /// Whether the payment went through.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::PaymentResult;
    /// fn paid(result: &PaymentResult) -> bool {
    ///     result.is_confirmed()
    /// }
    /// ```
    pub fn is_confirmed(&self) -> bool {
        self.status == PaymentStatus::Confirmed
    }
}
