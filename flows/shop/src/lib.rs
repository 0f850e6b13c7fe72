//! Sample flow `order`: a button menu (drink), a list menu (size and extras), a delivery form, a payment,
//! and a completion with a summary.
//!
//! The state is [`Order`] (stored as JSON); `stage` says which answer the flow waits for.

use hubbub_guest_sdk::{
    Bot, Context, Entry, Field, FieldValue, FlowInfo, Menu, MenuSection, PaymentRequest, PaymentResult, PaymentStatus,
    Reply, Screen, Submission, UserEvent, Value, export_bot, log,
};
use serde::{Deserialize, Serialize};

const FLOW: &str = "order";
const DELIVERY: &str = "delivery";
const CURRENCY: &str = "EUR";

/// Where the flow is: what it waits for next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The drink menu was shown.
    #[default]
    Item,
    /// The size and extras menu was shown.
    Size,
    /// The delivery form was shown.
    Delivery,
    /// A payment was requested.
    Payment,
    /// The order is paid.
    Done,
}

/// The session state: the order as far as the user has filled it in.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// What the flow waits for.
    pub stage: Stage,
    /// `coffee` or `tea`.
    pub item: Option<String>,
    /// `small` or `large`.
    pub size: Option<String>,
    /// `milk` or `none`.
    pub extra: Option<String>,
    /// The delivery address.
    pub address: Option<String>,
    /// `YYYY-MM-DD`.
    pub when: Option<String>,
    /// Notes for the courier.
    pub notes: Option<String>,
    /// Payment requests made so far; the request id ends with it.
    pub attempts: u32,
}

impl Order {
    fn reply(self) -> Reply<Order> {
        Reply::new(self)
    }

    fn item(&self) -> &str {
        self.item.as_deref().unwrap_or("coffee")
    }

    fn size(&self) -> &str {
        self.size.as_deref().unwrap_or("small")
    }

    fn extra(&self) -> &str {
        self.extra.as_deref().unwrap_or("none")
    }

    /// Coffee 3.00, tea 2.50; large +1.00; milk +0.50.
    fn amount_minor(&self) -> u64 {
        let base = if self.item() == "tea" { 250 } else { 300 };
        let size = if self.size() == "large" { 100 } else { 0 };
        let extra = if self.extra() == "milk" { 50 } else { 0 };
        base + size + extra
    }

    /// e.g. `order-coffee-large-milk-1`: unique per attempt within the session.
    fn payment_id(&self) -> String {
        format!("order-{}-{}-{}-{}", self.item(), self.size(), self.extra(), self.attempts)
    }

    fn description(&self) -> String {
        match self.extra() {
            "milk" => format!("{} {} with milk", self.size(), self.item()),
            _ => format!("{} {}", self.size(), self.item()),
        }
    }

    /// Moves to the payment stage with a new request id.
    fn payment_request(&mut self) -> PaymentRequest {
        self.attempts += 1;
        self.stage = Stage::Payment;
        PaymentRequest::new(self.payment_id(), self.amount_minor(), CURRENCY, self.description())
    }

    fn summary(&self, reference: &str) -> Vec<FieldValue> {
        let text = |key: &str, value: &str| FieldValue::new(key, Value::Text(value.to_string()));
        let choice = |key: &str, value: &str| FieldValue::new(key, Value::Choice(value.to_string()));
        let mut summary = vec![
            choice("item", self.item()),
            choice("size", self.size()),
            choice("extra", self.extra()),
            text("address", self.address.as_deref().unwrap_or_default()),
            FieldValue::new("when", Value::Date(self.when.clone().unwrap_or_default())),
        ];
        if let Some(notes) = &self.notes {
            summary.push(text("notes", notes));
        }
        summary.push(text("reference", reference));
        summary
    }
}

/// The bot.
pub struct Shop;

impl Bot for Shop {
    type State = Order;

    fn flows() -> Vec<FlowInfo> {
        vec![FlowInfo::new(FLOW, "Order a drink")]
    }

    fn start(entry: Entry, ctx: Context) -> Result<Reply<Order>, String> {
        match entry {
            Entry::Flow(code) if code == FLOW => {
                log::info(&format!("order started for {}", ctx.phone));
                Ok(Order::default().reply().menu(item_menu()))
            }
            Entry::Flow(code) => Err(format!("unknown flow {code}")),
            Entry::Chat => Err("shop is a flow, not a chat bot".to_string()),
        }
    }

    fn handle(order: Order, event: UserEvent, _ctx: Context) -> Result<Reply<Order>, String> {
        match (order.stage, event) {
            (Stage::Item, UserEvent::Select(item)) => pick_item(order, item),
            (Stage::Size, UserEvent::Select(id)) => pick_size_or_extra(order, id),
            (Stage::Delivery, UserEvent::Submit(submission)) => submit_delivery(order, submission),
            (Stage::Payment, UserEvent::Payment(result)) => payment_done(order, result),
            (stage, event) => {
                log::warn(&format!("unexpected {event:?} at stage {stage:?}"));
                Err(format!("unexpected {event:?} at stage {stage:?}"))
            }
        }
    }
}

fn pick_item(mut order: Order, item: String) -> Result<Reply<Order>, String> {
    if item != "coffee" && item != "tea" {
        return Err(format!("unknown item {item}"));
    }
    order.item = Some(item);
    order.stage = Stage::Size;
    Ok(order.reply().menu(size_menu(true)))
}

/// A size moves on to the delivery form; an extra is noted and the sizes are asked again.
fn pick_size_or_extra(mut order: Order, id: String) -> Result<Reply<Order>, String> {
    match id.as_str() {
        "small" | "large" => {
            order.size = Some(id);
            order.stage = Stage::Delivery;
            Ok(order.reply().screen(delivery_screen()))
        }
        "milk" | "none" => {
            order.extra = Some(id);
            let text = if order.extra() == "milk" { "Milk it is." } else { "No extras." };
            Ok(order.reply().message(text).menu(size_menu(false)))
        }
        _ => Err(format!("unknown size or extra {id}")),
    }
}

fn submit_delivery(mut order: Order, submission: Submission) -> Result<Reply<Order>, String> {
    if submission.screen != DELIVERY {
        return Err(format!("unknown screen {}", submission.screen));
    }
    let address = submission.text("address").ok_or("address missing")?;
    let when = submission.date("when").ok_or("when missing")?;
    order.address = Some(address.to_string());
    order.when = Some(when.to_string());
    order.notes = submission.text("notes").map(str::to_string);
    let request = order.payment_request();
    log::info(&format!("payment {} requested: {} {CURRENCY} minor units", request.id, request.amount_minor));
    Ok(order.reply().payment(request))
}

fn payment_done(mut order: Order, result: PaymentResult) -> Result<Reply<Order>, String> {
    if result.id != order.payment_id() {
        return Err(format!("payment {} is not the pending one", result.id));
    }
    match result.status {
        PaymentStatus::Confirmed => {
            let reference = result.reference.unwrap_or_default();
            order.stage = Stage::Done;
            log::info(&format!("payment {} confirmed", result.id));
            let message = format!(
                "Paid, thank you! Your {} arrives on {}.",
                order.description(),
                order.when.as_deref().unwrap_or_default()
            );
            let summary = order.summary(&reference);
            Ok(order.reply().message(message).completed(summary))
        }
        PaymentStatus::Declined | PaymentStatus::Cancelled => {
            let message = if result.status == PaymentStatus::Declined {
                "The payment was declined. Please try again."
            } else {
                "The payment was cancelled. You can try again."
            };
            let request = order.payment_request();
            Ok(order.reply().message(message).payment(request))
        }
    }
}

fn item_menu() -> Menu {
    Menu::buttons("What would you like?").item("coffee", "Coffee").item("tea", "Tea")
}

fn size_menu(with_extras: bool) -> Menu {
    let sizes = MenuSection::titled("Size").item("small", "Small").item("large", "Large");
    if with_extras {
        Menu::list("Which size? You can pick an extra first.")
            .section(sizes)
            .section(MenuSection::titled("Extras").item("milk", "Milk").item("none", "No extras"))
    } else {
        Menu::list("Which size?").section(sizes)
    }
}

fn delivery_screen() -> Screen {
    Screen::form(DELIVERY, "Delivery")
        .field(Field::text("address", "Address").required())
        .field(Field::date("when", "Delivery date").required())
        .field(Field::text("notes", "Notes for the courier"))
}

export_bot!(Shop);
