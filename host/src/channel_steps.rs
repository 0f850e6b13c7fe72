//! A bot's steps as they go out on WhatsApp or SMS, and a person's reply read back as the bot's event
//! (`docs/providers.md`, "Bots on WhatsApp and SMS").
//!
//! On WhatsApp each step becomes one of the Cloud API's own messages: a `button` menu becomes interactive
//! reply buttons (at most 3, titles of at most 20 characters), a `list` menu an interactive list (at most
//! 10 rows in all, titles of at most 24, descriptions of at most 72, section titles of at most 24), a form
//! screen an interactive `cta_url` button that opens the form in the app, a payment a `cta_url` button to
//! its checkout, a message and a completed flow's summary text. On SMS a menu is numbered ("Reply 1, 2 or
//! 3"), and links are written out. What WhatsApp cannot show is caught when the component is uploaded
//! ([`whatsapp_fit`]); should a later step still not fit, it goes out numbered, as on SMS, never cut short.

use serde_json::{Value, json};

use crate::names::Channel;

/// At most this many reply buttons.
pub const MAX_BUTTONS: usize = 3;
/// A reply button's title, in characters.
pub const MAX_BUTTON_TITLE: usize = 20;
/// Rows of a list, in all its sections.
pub const MAX_LIST_ROWS: usize = 10;
/// A list row's title, and a section's title.
pub const MAX_ROW_TITLE: usize = 24;
/// A list row's description.
pub const MAX_ROW_DESCRIPTION: usize = 72;
/// An interactive message's body text.
pub const MAX_BODY: usize = 1024;
/// A reply id (WhatsApp allows 256 for buttons, 200 for rows).
pub const MAX_ID: usize = 200;
/// A WhatsApp text message's body.
pub const MAX_WHATSAPP_TEXT: usize = 4096;
/// An SMS as Twilio takes it (it splits it into segments itself).
pub const MAX_SMS_TEXT: usize = 1600;

/// One message to send on the channel.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// Text.
    Text(String),
    /// A WhatsApp `interactive` object; `text` says the same in words (SMS, the development sink).
    Interactive { interactive: Value, text: String },
}

impl Outgoing {
    /// What it says, as text.
    pub fn text(&self) -> &str {
        match self {
            Outgoing::Text(text) | Outgoing::Interactive { text, .. } => text,
        }
    }
}

/// Steps rendered for a channel: the messages, in order, and the choices of the menu now waiting (the last
/// one shown, if no other step came after it).
#[derive(Debug, Default, PartialEq)]
pub struct Rendered {
    pub messages: Vec<Outgoing>,
    pub menu: Option<Vec<(String, String)>>,
}

/// The items of a menu step, in order, across its sections.
pub fn menu_items(menu: &Value) -> Vec<&Value> {
    menu["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["items"].as_array().into_iter().flatten())
        .collect()
}

/// The choices of a menu step, in order: `(id, label)`.
pub fn choices(menu: &Value) -> Vec<(String, String)> {
    menu_items(menu).iter().map(|i| (str_of(&i["id"]).to_string(), str_of(&i["label"]).to_string())).collect()
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Why WhatsApp cannot show a menu step as its style asks (`button`: reply buttons; `list`: a list), or
/// `Ok`.
pub fn whatsapp_fit(menu: &Value) -> Result<(), String> {
    let items = menu_items(menu);
    if chars(str_of(&menu["text"])) > MAX_BODY {
        return Err(format!("its text is longer than WhatsApp's {MAX_BODY} characters"));
    }
    if let Some(long) = items.iter().map(|i| str_of(&i["id"])).find(|id| chars(id) > MAX_ID) {
        return Err(format!("the item id {long:?} is longer than WhatsApp's {MAX_ID} characters"));
    }
    if menu["style"] == "button" {
        if items.len() > MAX_BUTTONS {
            return Err(format!(
                "a button menu has {} options and WhatsApp shows at most {MAX_BUTTONS} reply buttons (use a list menu)",
                items.len()
            ));
        }
        if let Some(long) = items.iter().map(|i| str_of(&i["label"])).find(|l| chars(l) > MAX_BUTTON_TITLE) {
            return Err(format!("the button {long:?} is longer than WhatsApp's {MAX_BUTTON_TITLE} characters"));
        }
        return Ok(());
    }
    if items.len() > MAX_LIST_ROWS {
        return Err(format!("a list menu has {} rows and WhatsApp shows at most {MAX_LIST_ROWS}", items.len()));
    }
    if let Some(long) = items.iter().map(|i| str_of(&i["label"])).find(|l| chars(l) > MAX_ROW_TITLE) {
        return Err(format!("the row {long:?} is longer than WhatsApp's {MAX_ROW_TITLE} characters"));
    }
    if let Some(long) = items.iter().map(|i| str_of(&i["description"])).find(|d| chars(d) > MAX_ROW_DESCRIPTION) {
        return Err(format!("the description {long:?} is longer than WhatsApp's {MAX_ROW_DESCRIPTION} characters"));
    }
    let sections = menu["sections"].as_array().map(Vec::len).unwrap_or(0);
    for section in menu["sections"].as_array().into_iter().flatten() {
        let title = str_of(&section["title"]);
        if chars(title) > MAX_ROW_TITLE {
            return Err(format!("the section title {title:?} is longer than WhatsApp's {MAX_ROW_TITLE} characters"));
        }
        if sections > 1 && title.trim().is_empty() {
            return Err("a list with several sections needs a title for each".into());
        }
    }
    Ok(())
}

/// The menus among `steps` that WhatsApp cannot show, each with why (`step N: …`).
pub fn whatsapp_misfits(steps: &[Value]) -> Vec<String> {
    steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s["type"] == "menu")
        .filter_map(|(i, s)| whatsapp_fit(s).err().map(|why| format!("step {i}: {why}")))
        .collect()
}

/// Renders `steps` for `channel`. `form_url` opens the last form screen among them in the app (made by the
/// caller: it is signed for the session).
pub fn render(channel: Channel, steps: &[Value], form_url: Option<&str>) -> Rendered {
    let whatsapp = channel == Channel::Whatsapp;
    let longest = if whatsapp { MAX_WHATSAPP_TEXT } else { MAX_SMS_TEXT };
    let mut out = Rendered::default();
    for step in steps {
        let message = match step["type"].as_str().unwrap_or("") {
            "message" => {
                let text = str_of(&step["text"]).trim();
                if text.is_empty() {
                    continue;
                }
                // A text longer than the channel takes goes as several, split between words.
                out.menu = None;
                out.messages.extend(split(text, longest).into_iter().map(Outgoing::Text));
                continue;
            }
            "menu" => {
                let choices = choices(step);
                let message = match whatsapp && whatsapp_fit(step).is_ok() {
                    true => whatsapp_menu(step),
                    false => Outgoing::Text(numbered(step, &choices)),
                };
                out.menu = Some(choices);
                out.messages.push(message);
                continue;
            }
            "flow_screen" => {
                let title = str_of(&step["screen"]["title"]);
                let title = if title.trim().is_empty() { "a form" } else { title };
                let text = format!("Please fill in {title}.");
                match form_url {
                    Some(url) => link(whatsapp, &text, "Open the form", url),
                    None => Outgoing::Text(format!("{text} Open the app to go on.")),
                }
            }
            "payment" => {
                let p = &step["payment"];
                let amount = money(p["amount_minor"].as_i64().unwrap_or(0), str_of(&p["currency"]));
                let text = format!("{}: {amount}.", str_of(&p["description"]));
                match p["checkout_url"].as_str() {
                    Some(url) => link(whatsapp, &text, "Pay", url),
                    None => Outgoing::Text(text),
                }
            }
            "flow_completed" => Outgoing::Text(summary_text(&step["summary"])),
            _ => continue,
        };
        out.menu = None;
        out.messages.push(message);
    }
    out
}

/// `text` in pieces of at most `longest` characters, cut at the last space or line break of each where
/// there is one.
fn split(text: &str, longest: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut rest: Vec<char> = text.chars().collect();
    while rest.len() > longest {
        let cut = rest[..longest].iter().rposition(|c| c.is_whitespace()).filter(|&i| i > 0).unwrap_or(longest);
        pieces.push(rest[..cut].iter().collect::<String>().trim_end().to_string());
        rest = rest[cut..].iter().skip_while(|c| c.is_whitespace()).copied().collect();
    }
    if !rest.is_empty() {
        pieces.push(rest.into_iter().collect());
    }
    pieces
}

/// A reply-button or list message of a menu that fits.
fn whatsapp_menu(menu: &Value) -> Outgoing {
    let body = str_of(&menu["text"]);
    let body = if body.trim().is_empty() { "Please choose:" } else { body };
    let sections = menu["sections"].as_array().cloned().unwrap_or_default();
    let interactive = if menu["style"] == "button" {
        let buttons: Vec<Value> = choices(menu)
            .into_iter()
            .map(|(id, label)| json!({"type": "reply", "reply": {"id": id, "title": label}}))
            .collect();
        json!({"type": "button", "body": {"text": body}, "action": {"buttons": buttons}})
    } else {
        let sections: Vec<Value> = sections
            .iter()
            .map(|s| {
                let rows: Vec<Value> = s["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|i| {
                        let mut row = json!({"id": str_of(&i["id"]), "title": str_of(&i["label"])});
                        if let Some(d) = i["description"].as_str().filter(|d| !d.is_empty()) {
                            row["description"] = json!(d);
                        }
                        row
                    })
                    .collect();
                let mut section = json!({"rows": rows});
                if let Some(t) = s["title"].as_str().filter(|t| !t.is_empty()) {
                    section["title"] = json!(t);
                }
                section
            })
            .collect();
        json!({"type": "list", "body": {"text": body}, "action": {"button": "Choose", "sections": sections}})
    };
    Outgoing::Interactive { interactive, text: numbered(menu, &choices(menu)) }
}

/// A menu as numbered lines: "1. Coffee" …, then "Reply 1 or 2."
fn numbered(menu: &Value, choices: &[(String, String)]) -> String {
    let mut text = str_of(&menu["text"]).to_string();
    let descriptions: Vec<&str> = menu_items(menu).iter().map(|i| str_of(&i["description"])).collect();
    for (n, (_, label)) in choices.iter().enumerate() {
        text.push_str(&format!("\n{}. {label}", n + 1));
        if let Some(d) = descriptions.get(n).filter(|d| !d.is_empty()) {
            text.push_str(&format!(" ({d})"));
        }
    }
    let numbers: Vec<String> = (1..=choices.len()).map(|n| n.to_string()).collect();
    let listed = match numbers.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    text.push_str(&format!("\nReply {listed}."));
    text.trim_start().to_string()
}

/// A link: a `cta_url` button on WhatsApp, written out on SMS.
fn link(whatsapp: bool, text: &str, label: &str, url: &str) -> Outgoing {
    let plain = format!("{text} {label}: {url}");
    if !whatsapp {
        return Outgoing::Text(plain);
    }
    let interactive = json!({
        "type": "cta_url",
        "body": {"text": text},
        "action": {"name": "cta_url", "parameters": {"display_text": label, "url": url}},
    });
    Outgoing::Interactive { interactive, text: plain }
}

/// A completed flow's summary: "Done." and a line per answer.
fn summary_text(summary: &Value) -> String {
    let mut text = String::from("Done.");
    for (key, value) in summary.as_object().into_iter().flatten() {
        let value = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        text.push_str(&format!("\n{key}: {value}"));
    }
    text
}

/// `3.50 EUR` from minor units (two decimals; currencies without them are rare among checkouts here).
fn money(minor: i64, currency: &str) -> String {
    format!("{}.{:02} {currency}", minor / 100, (minor % 100).abs())
}

/// What a person's reply means to a session waiting on `menu`: the id of the choice named by its number,
/// by its label (any case), or tapped (`tapped`: a WhatsApp reply button's or list row's id), else `None`
/// (the reply is text).
pub fn chosen(menu: &[(String, String)], text: &str, tapped: Option<&str>) -> Option<String> {
    if let Some(id) = tapped.filter(|id| menu.iter().any(|(i, _)| i == id)) {
        return Some(id.to_string());
    }
    let text = text.trim().trim_end_matches(['.', ')']);
    if let Ok(n) = text.parse::<usize>() {
        return n.checked_sub(1).and_then(|i| menu.get(i)).map(|(id, _)| id.clone());
    }
    menu.iter().find(|(_, label)| label.trim().eq_ignore_ascii_case(text)).map(|(id, _)| id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buttons(n: usize) -> Value {
        let items: Vec<Value> = (1..=n)
            .map(|i| json!({"id": format!("o{i}"), "label": format!("Option {i}"), "description": null}))
            .collect();
        json!({"type": "menu", "style": "button", "text": "Pick", "sections": [{"title": "", "items": items}]})
    }

    #[test]
    fn a_button_menu_fits_up_to_three_short_titles() {
        assert_eq!(whatsapp_fit(&buttons(3)), Ok(()));
        let four = whatsapp_fit(&buttons(4)).unwrap_err();
        assert!(four.contains("4 options") && four.contains("at most 3"), "{four}");
        let mut long = buttons(1);
        long["sections"][0]["items"][0]["label"] = json!("A title of twenty-one");
        assert!(whatsapp_fit(&long).unwrap_err().contains("20 characters"));
    }

    #[test]
    fn a_list_fits_ten_rows_with_short_titles_and_descriptions() {
        let mut list = buttons(10);
        list["style"] = json!("list");
        assert_eq!(whatsapp_fit(&list), Ok(()));
        let mut eleven = buttons(11);
        eleven["style"] = json!("list");
        assert!(whatsapp_fit(&eleven).unwrap_err().contains("11 rows"));
        list["sections"][0]["items"][0]["description"] = json!("x".repeat(73));
        assert!(whatsapp_fit(&list).unwrap_err().contains("72"));
        assert_eq!(whatsapp_misfits(&[json!({"type": "message", "text": "hi"}), eleven]).len(), 1);
    }

    #[test]
    fn menus_become_buttons_lists_or_numbered_lines() {
        let r = render(Channel::Whatsapp, &[buttons(2)], None);
        let Outgoing::Interactive { interactive, .. } = &r.messages[0] else { panic!("{r:?}") };
        assert_eq!(interactive["type"], "button");
        assert_eq!(
            interactive["action"]["buttons"][1],
            json!({"type": "reply", "reply": {"id": "o2", "title": "Option 2"}})
        );
        assert_eq!(r.menu.as_ref().unwrap().len(), 2);

        let mut list = buttons(4);
        list["style"] = json!("list");
        list["sections"][0]["title"] = json!("Sizes");
        let r = render(Channel::Whatsapp, &[list.clone()], None);
        let Outgoing::Interactive { interactive, .. } = &r.messages[0] else { panic!("{r:?}") };
        assert_eq!(interactive["action"]["sections"][0]["title"], "Sizes");
        assert_eq!(interactive["action"]["sections"][0]["rows"][3], json!({"id": "o4", "title": "Option 4"}));

        // A button menu WhatsApp cannot show goes out numbered, whole.
        let r = render(Channel::Whatsapp, &[buttons(4)], None);
        assert_eq!(
            r.messages[0],
            Outgoing::Text("Pick\n1. Option 1\n2. Option 2\n3. Option 3\n4. Option 4\nReply 1, 2, 3 or 4.".into())
        );
        let r = render(Channel::Sms, &[buttons(2)], None);
        assert_eq!(r.messages[0], Outgoing::Text("Pick\n1. Option 1\n2. Option 2\nReply 1 or 2.".into()));
    }

    #[test]
    fn forms_and_payments_are_links_and_a_later_step_ends_the_menu() {
        let screen = json!({"type": "flow_screen", "screen": {"id": "d", "title": "Delivery", "fields": []}});
        let r = render(Channel::Whatsapp, &[buttons(2), screen.clone()], Some("https://h/f/t"));
        assert_eq!(r.menu, None);
        let Outgoing::Interactive { interactive, .. } = &r.messages[1] else { panic!("{r:?}") };
        assert_eq!(interactive["type"], "cta_url");
        assert_eq!(interactive["action"]["parameters"]["url"], "https://h/f/t");
        let r = render(Channel::Sms, &[screen], Some("https://h/f/t"));
        assert_eq!(r.messages[0].text(), "Please fill in Delivery. Open the form: https://h/f/t");
        let pay = json!({"type": "payment", "payment": {"amount_minor": 350, "currency": "EUR",
            "description": "large tea", "checkout_url": "https://pay/x"}});
        assert_eq!(render(Channel::Sms, &[pay], None).messages[0].text(), "large tea: 3.50 EUR. Pay: https://pay/x");
        let done = json!({"type": "flow_completed", "summary": {"item": "tea", "n": 2}});
        assert_eq!(render(Channel::Sms, &[done], None).messages[0].text(), "Done.\nitem: tea\nn: 2");
    }

    #[test]
    fn long_texts_go_in_pieces_and_empty_ones_not_at_all() {
        let long = "word ".repeat(500);
        let r = render(
            Channel::Sms,
            &[json!({"type": "message", "text": long}), json!({"type": "message", "text": " "})],
            None,
        );
        assert_eq!(r.messages.len(), 2);
        assert!(r.messages.iter().all(|m| m.text().chars().count() <= MAX_SMS_TEXT && !m.text().ends_with(' ')));
        let joined: Vec<&str> = r.messages.iter().map(Outgoing::text).collect();
        assert_eq!(joined.join(" "), long.trim());
        assert_eq!(split(&"x".repeat(10), 4), ["xxxx", "xxxx", "xx"]);
        assert_eq!(render(Channel::Whatsapp, &[json!({"type": "message", "text": "hi"})], None).messages.len(), 1);
    }

    #[test]
    fn replies_choose_by_number_label_or_tap() {
        let menu = vec![("coffee".to_string(), "Coffee".to_string()), ("tea".to_string(), "Tea".to_string())];
        assert_eq!(chosen(&menu, "2", None).as_deref(), Some("tea"));
        assert_eq!(chosen(&menu, " 1. ", None).as_deref(), Some("coffee"));
        assert_eq!(chosen(&menu, "TEA", None).as_deref(), Some("tea"));
        assert_eq!(chosen(&menu, "Tea", Some("coffee")).as_deref(), Some("coffee"));
        assert_eq!(chosen(&menu, "3", None), None);
        assert_eq!(chosen(&menu, "0", None), None);
        assert_eq!(chosen(&menu, "something else", None), None);
    }
}
