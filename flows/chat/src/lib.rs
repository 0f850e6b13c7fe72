//! Sample in-app chat bot: a greeting and a button menu, echoes of text, an answer per menu item, and
//! one single-field screen of each kind (`topic`: select, `question`: input).
//!
//! It offers no flows. Its state, [`ChatState`], counts the user's events (stored as `{"events":N}`).

use hubbub_guest_sdk::{
    Bot, Context, Entry, Field, FlowInfo, Menu, Reply, Screen, Submission, UserEvent, export_bot, log,
};
use serde::{Deserialize, Serialize};

const TOPIC: &str = "topic";
const QUESTION: &str = "question";

/// The session state kept by the host between calls.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatState {
    /// Events (texts, picks, submissions) the chat has answered.
    pub events: u32,
}

/// The bot.
pub struct Chat;

impl Bot for Chat {
    type State = ChatState;

    fn flows() -> Vec<FlowInfo> {
        Vec::new()
    }

    fn start(entry: Entry, ctx: Context) -> Result<Reply<ChatState>, String> {
        match entry {
            Entry::Chat => {
                log::info(&format!("chat started with {}", ctx.phone));
                Ok(Reply::new(ChatState::default()).message("Hi! I'm the Hubbub assistant.").menu(main_menu()))
            }
            Entry::Flow(code) => Err(format!("chat offers no flows (asked for {code})")),
        }
    }

    fn handle(mut state: ChatState, event: UserEvent, _ctx: Context) -> Result<Reply<ChatState>, String> {
        state.events += 1;
        let reply = Reply::new(state);
        match event {
            UserEvent::Text(text) => Ok(reply.message(format!("You said: {text}")).menu(main_menu())),
            UserEvent::Select(id) => answer(reply, &id),
            UserEvent::Submit(submission) => submitted(reply, &submission),
            UserEvent::Payment(result) => Err(format!("chat requests no payments ({})", result.id)),
        }
    }
}

/// The answer to a pick from the main menu.
fn answer(reply: Reply<ChatState>, id: &str) -> Result<Reply<ChatState>, String> {
    log::debug(&format!("menu pick {id}"));
    match id {
        "help" => Ok(reply.message("Sure, what do you need help with?").screen(Screen::select(
            TOPIC,
            "Help topic",
            Field::select(TOPIC, "Topic").required().option("orders", "Orders").option("payments", "Payments"),
        ))),
        "hours" => Ok(reply.message("We're open Monday to Friday, 9:00 to 17:00.").menu(main_menu())),
        "agent" => Ok(reply.message("An agent will get back to you.").screen(Screen::input(
            QUESTION,
            "Your question",
            Field::text(QUESTION, "What is it about?").required(),
        ))),
        _ => Err(format!("unknown menu item {id}")),
    }
}

/// The answer to one of the single-field screens.
fn submitted(reply: Reply<ChatState>, submission: &Submission) -> Result<Reply<ChatState>, String> {
    let message = match submission.screen.as_str() {
        TOPIC => match submission.choice(TOPIC) {
            Some("orders") => "Orders: open the shop flow to order, or ask an agent about an existing one.",
            Some("payments") => "Payments: we accept cards; a declined payment can be retried right away.",
            _ => return Err("topic missing".to_string()),
        }
        .to_string(),
        QUESTION => {
            let question = submission.text(QUESTION).ok_or("question missing")?;
            format!("Thanks, an agent will get back to you about: {question}")
        }
        other => return Err(format!("unknown screen {other}")),
    };
    Ok(reply.message(message).menu(main_menu()))
}

fn main_menu() -> Menu {
    Menu::buttons("What can I do for you?")
        .item("help", "Help")
        .item("hours", "Opening hours")
        .item("agent", "Talk to an agent")
}

export_bot!(Chat);
