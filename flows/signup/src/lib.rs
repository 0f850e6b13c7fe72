//! Sample flow `signup`: one form screen (`details`), completed with a summary echoing every value.
//!
//! State: [`SignupState`] (stored as `{"submits":N}`), the number of accepted submissions, so a test can
//! tell whether the guest was called (the host must not call it for invalid values).

use hubbub_guest_sdk::{Bot, Context, Entry, Field, FlowInfo, Reply, Screen, Submission, UserEvent, export_bot, log};
use serde::{Deserialize, Serialize};

const FLOW: &str = "signup";
const DETAILS: &str = "details";

/// The session state kept by the host between calls.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SignupState {
    /// Submissions of `details` this guest has accepted.
    pub submits: u32,
}

/// The bot.
pub struct Signup;

impl Bot for Signup {
    type State = SignupState;

    fn flows() -> Vec<FlowInfo> {
        vec![FlowInfo::new(FLOW, "Sign up")]
    }

    fn start(entry: Entry, ctx: Context) -> Result<Reply<SignupState>, String> {
        match entry {
            Entry::Flow(code) if code == FLOW => {
                log::info(&format!("signup started for {}", ctx.phone));
                Ok(Reply::new(SignupState::default()).screen(details_screen()))
            }
            Entry::Flow(code) => Err(format!("unknown flow {code}")),
            Entry::Chat => Err("signup is a flow, not a chat bot".to_string()),
        }
    }

    fn handle(mut state: SignupState, event: UserEvent, _ctx: Context) -> Result<Reply<SignupState>, String> {
        match event {
            UserEvent::Submit(Submission { screen, values }) if screen == DETAILS => {
                state.submits += 1;
                log::info(&format!("signup details submitted ({} so far)", state.submits));
                Ok(Reply::new(state).completed(values))
            }
            UserEvent::Submit(submission) => Err(format!("unknown screen {}", submission.screen)),
            other => Err(format!("signup expects a submission, got {other:?}")),
        }
    }
}

fn details_screen() -> Screen {
    Screen::form(DETAILS, "Your details")
        .field(Field::text("name", "Name").required())
        .field(Field::email("email", "E-mail").required())
        .field(Field::phone("phone", "Phone").required().placeholder("+31612345678"))
        .field(Field::date("birthday", "Birthday"))
        .field(Field::select("plan", "Plan").required().option("basic", "Basic").option("pro", "Pro"))
        .field(Field::boolean("newsletter", "Send me the newsletter"))
}

export_bot!(Signup);
