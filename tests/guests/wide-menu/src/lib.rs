//! A bot for the API's tests of bots on WhatsApp: its chat opens with a button menu of four options, one
//! more than WhatsApp's reply buttons can show, so that an upload for a bot with `whatsapp` in its channels
//! is refused with the reason. Any event answers a text.

use hubbub_guest_sdk::{Bot, Context, Entry, FlowInfo, Menu, Reply, UserEvent, export_bot};

/// The bot.
pub struct WideMenu;

impl Bot for WideMenu {
    type State = String;

    fn flows() -> Vec<FlowInfo> {
        Vec::new()
    }

    fn start(_entry: Entry, _ctx: Context) -> Result<Reply<String>, String> {
        let menu = Menu::buttons("Which colour?")
            .item("red", "Red")
            .item("green", "Green")
            .item("blue", "Blue")
            .item("black", "Black");
        Ok(Reply::new(String::new()).menu(menu))
    }

    fn handle(state: String, _event: UserEvent, _ctx: Context) -> Result<Reply<String>, String> {
        Ok(Reply::new(state).message("Noted."))
    }
}

export_bot!(WideMenu);
