//! `hubbub bot …`: bot authors' tools against a running host (`HUBBUB_API_URL`, `HUBBUB_API_KEY`):
//! `upload` a component (creating the bot the first time), `invite` a user to a flow, and `try` a flow in
//! the terminal as a user would in the app — screens field by field (the host's validation answers each
//! submission), menus by number, payments through their checkout page.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::{Map, Value, json};

use super::{Api, call};

#[derive(Subcommand)]
pub enum BotCommand {
    /// Scaffold a new bot in the folder NAME: its sources with one flow (`hello`) and a README with the
    /// commands to build, upload and try it; a Rust bot also gets a test of that flow run natively with the
    /// SDK's harness, a Python or JavaScript bot the WIT it builds against (`wit/`).
    New {
        /// The bot's code, also its folder and package name, ^[a-z0-9][a-z0-9_-]{0,63}$.
        name: String,
        /// The language to write it in.
        #[arg(long, value_enum, default_value_t = Lang::Rust)]
        lang: Lang,
        /// The guest SDK's folder (`guest-sdk` of a Hubbub checkout); by default the one this binary was built
        /// from.
        #[arg(long, env = "HUBBUB_GUEST_SDK", default_value = DEFAULT_SDK)]
        sdk: PathBuf,
        /// Where to create the folder.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Upload a component (`cargo build --target wasm32-wasip2 --release` output, or any hubbub:bot
    /// component) to the bot CODE, creating the bot (local mode) if the partner has none of that code.
    Upload {
        /// The bot's code, ^[a-z0-9][a-z0-9_-]{0,63}$.
        code: String,
        /// The component file.
        file: PathBuf,
        #[command(flatten)]
        api: Api,
    },
    /// Invite PHONE to the bot's flow FLOW: a flow card in the user's inbox (and a text when they are not in
    /// the app). Prints the flow session.
    Invite {
        code: String,
        flow: String,
        phone: String,
        #[command(flatten)]
        api: Api,
    },
    /// Walk the bot's flow FLOW in this terminal, as the user PHONE would in the app.
    ///
    /// The user's token is --user-token (`hubbub user token PHONE` prints one on the host's machine); without
    /// it, a host in dev mode logs the user in with the one-time code from its dev sink (the platform
    /// partner's key can read it).
    Try {
        code: String,
        flow: String,
        /// The user walking the flow, E.164.
        #[arg(long, default_value = "+15550000100")]
        phone: String,
        /// A user JWT for PHONE.
        #[arg(long, env = "HUBBUB_USER_TOKEN", hide_env_values = true)]
        user_token: Option<String>,
        #[command(flatten)]
        api: Api,
    },
}

/// The languages `bot new` writes bots in.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Lang {
    /// Rust with the guest SDK (`cargo build --target wasm32-wasip2`).
    Rust,
    /// Python, built by componentize-py against the WIT.
    Python,
    /// JavaScript, built by ComponentizeJS against the WIT.
    Js,
}

/// The WIT a bot in another language builds against: this host's version, copied into the bot's `wit/`.
const WIT: &[(&str, &str)] = &[
    ("wit/bot.wit", include_str!("../../../wit/v0.1.0/bot.wit")),
    ("wit/forms.wit", include_str!("../../../wit/v0.1.0/forms.wit")),
    ("wit/log.wit", include_str!("../../../wit/v0.1.0/log.wit")),
    ("wit/menus.wit", include_str!("../../../wit/v0.1.0/menus.wit")),
    ("wit/payments.wit", include_str!("../../../wit/v0.1.0/payments.wit")),
    ("wit/replies.wit", include_str!("../../../wit/v0.1.0/replies.wit")),
    ("wit/types.wit", include_str!("../../../wit/v0.1.0/types.wit")),
];

/// The guest SDK of the checkout this binary was built from.
const DEFAULT_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk");

/// The files of a new bot, by language: (path in the bot's folder, template).
fn templates(lang: Lang) -> Vec<(&'static str, &'static str)> {
    match lang {
        Lang::Rust => vec![
            ("Cargo.toml", include_str!("templates/rust/Cargo.toml.tmpl")),
            ("src/lib.rs", include_str!("templates/rust/lib.rs.tmpl")),
            ("tests/hello.rs", include_str!("templates/rust/test.rs.tmpl")),
            ("README.md", include_str!("templates/rust/README.md.tmpl")),
            (".gitignore", "/target\n"),
        ],
        Lang::Python => [
            ("app.py", include_str!("templates/python/app.py.tmpl")),
            ("requirements.txt", include_str!("templates/python/requirements.txt.tmpl")),
            ("README.md", include_str!("templates/python/README.md.tmpl")),
            (".gitignore", "/.venv\n*.wasm\n__pycache__/\n"),
        ]
        .into_iter()
        .chain(WIT.iter().copied())
        .collect(),
        Lang::Js => [
            ("bot.js", include_str!("templates/js/bot.js.tmpl")),
            ("package.json", include_str!("templates/js/package.json.tmpl")),
            ("README.md", include_str!("templates/js/README.md.tmpl")),
            (".gitignore", "/node_modules\n*.wasm\n"),
        ]
        .into_iter()
        .chain(WIT.iter().copied())
        .collect(),
    }
}

/// Writes a new bot's folder from its language's templates.
fn scaffold(name: &str, lang: Lang, sdk: &std::path::Path, dir: &std::path::Path) -> anyhow::Result<PathBuf> {
    if !crate_name_ok(name) {
        bail!(
            "{name:?} cannot name a bot and its package: a lowercase letter, then up to 63 lowercase letters, digits, - or _"
        );
    }
    // Only a Rust bot builds against the SDK's sources.
    let sdk = match lang {
        Lang::Rust => sdk.canonicalize().ok().filter(|p| p.join("Cargo.toml").is_file()).with_context(|| {
            format!(
                "the guest SDK is not at {}: pass --sdk with the guest-sdk folder of a Hubbub checkout",
                sdk.display()
            )
        })?,
        Lang::Python | Lang::Js => PathBuf::new(),
    };
    let root = dir.join(name);
    if root.exists() {
        bail!("{} already exists", root.display());
    }
    let sdk = sdk.to_string_lossy().replace('\\', "/");
    for (path, template) in templates(lang) {
        let text =
            template.replace("{{name}}", name).replace("{{crate}}", &name.replace('-', "_")).replace("{{sdk}}", &sdk);
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().expect("a file in the folder"))?;
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(root)
}

/// A bot code that also names a Rust package (it starts with a letter).
fn crate_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

pub async fn run(command: BotCommand) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    match command {
        BotCommand::New { name, lang, sdk, dir } => {
            let root = scaffold(&name, lang, &sdk, &dir)?;
            println!("{}: see its README.md to build, test, upload and try it", root.display());
        }
        BotCommand::Upload { code, file, api } => {
            let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            // The bot is created first when the partner has none of this code (so the upload's body is never
            // sent to a 404).
            let existing = http.get(api.url(&format!("/bots/{code}"))).bearer_auth(&api.api_key).send().await?;
            if existing.status() == reqwest::StatusCode::NOT_FOUND {
                let bot = json!({"code": code, "name": code, "runtime_mode": "local"});
                let created = call(http.post(api.url("/bots")).bearer_auth(&api.api_key).json(&bot)).await?;
                eprintln!(
                    "created bot {code}; its credentials are shown this once:\n  bot_token: {}\n  webhook_secret: {}",
                    created["bot_token"].as_str().unwrap_or(""),
                    created["webhook_secret"].as_str().unwrap_or("")
                );
            } else {
                answer(existing).await?;
            }
            // An upload is idempotent (the same bytes are the same component): a 503 (every compiler busy, or
            // a compile longer than the host's request timeout, which may still complete) is tried again
            // after the host's Retry-After, as the answer asks.
            let mut tries = 0;
            let uploaded = loop {
                tries += 1;
                let put = http
                    .put(api.url(&format!("/bots/{code}/component")))
                    .bearer_auth(&api.api_key)
                    .header(reqwest::header::CONTENT_TYPE, "application/wasm")
                    .body(bytes.clone());
                let response = put.send().await?;
                if response.status() != reqwest::StatusCode::SERVICE_UNAVAILABLE || tries == UPLOAD_TRIES {
                    break answer(response).await?;
                }
                let wait = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                    .unwrap_or(5)
                    .clamp(1, 60);
                eprintln!("the host is busy compiling ({}); trying again in {wait} s", response.status());
                tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
            };
            println!("{}", uploaded["component"]);
        }
        BotCommand::Invite { code, flow, phone, api } => {
            let url = api.url(&format!("/bots/{code}/flows/{flow}/invite"));
            let invited = call(http.post(url).bearer_auth(&api.api_key).json(&json!({"phone": phone}))).await?;
            println!("{}", invited["flow_session"]);
        }
        BotCommand::Try { code, flow, phone, user_token, api } => {
            let url = api.url(&format!("/bots/{code}/flows/{flow}/invite"));
            let invited = call(http.post(url).bearer_auth(&api.api_key).json(&json!({"phone": phone}))).await?;
            let reference = invited["flow_session"]["ref"].as_str().context("the invitation has no ref")?.to_string();
            let token = match user_token {
                Some(token) => token,
                None => dev_login(&http, &api, &phone).await?,
            };
            let stdin = std::io::stdin();
            let mut walk = Walk { http, api, token, reference, input: stdin.lock() };
            walk.run().await?;
        }
    }
    Ok(())
}

/// How many times `bot upload` sends a component the host answered 503 to.
const UPLOAD_TRIES: u32 = 3;

/// The JSON of an answer; a non-2xx answer is an error with its body.
async fn answer(response: reqwest::Response) -> anyhow::Result<Value> {
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!("HTTP {status}: {body}");
    }
    Ok(body)
}

/// Logs PHONE in on a host in dev mode: a one-time code, read back from the dev sink.
async fn dev_login(http: &reqwest::Client, api: &Api, phone: &str) -> anyhow::Result<String> {
    call(http.post(api.url("/auth/otp/start")).json(&json!({"phone": phone}))).await?;
    let mut url = reqwest::Url::parse(&api.url("/dev-sink/messages")).context("--api-url")?;
    url.query_pairs_mut().append_pair("phone", phone).append_pair("channel", "sms").append_pair("limit", "1");
    let sink = http.get(url).bearer_auth(&api.api_key);
    let texts = call(sink).await.context(
        "reading the one-time code from the dev sink (dev mode and the platform partner's key); \
         pass --user-token instead (`hubbub user token PHONE` on the host's machine)",
    )?;
    let text = texts["data"][0]["text"].as_str().unwrap_or("");
    let code = text.split(|c: char| !c.is_ascii_digit()).find(|w| w.len() == 6).context("no code in the dev sink")?;
    let verified = call(http.post(api.url("/auth/otp/verify")).json(&json!({"phone": phone, "code": code}))).await?;
    Ok(verified["token"].as_str().context("verify answered no token")?.to_string())
}

/// One flow walked in the terminal.
struct Walk<R> {
    http: reqwest::Client,
    api: Api,
    token: String,
    reference: String,
    input: R,
}

impl<R: BufRead> Walk<R> {
    async fn run(&mut self) -> anyhow::Result<()> {
        let mut progress = self.flow_call("start", None).await?;
        loop {
            let steps = progress["steps"].as_array().cloned().unwrap_or_default();
            for step in &steps {
                show(step);
            }
            if progress["state"] == "completed" {
                return Ok(());
            }
            let Some(last) = steps.last() else {
                // Nothing to answer yet (a payment being confirmed, a webhook bot thinking): ask again.
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                progress = self.steps().await?;
                continue;
            };
            progress = match last["type"].as_str() {
                Some("flow_screen") => self.fill(&last["screen"]).await?,
                Some("menu") => {
                    let id = self.pick(last)?;
                    self.flow_call("events", Some(json!({"type": "select", "id": id}))).await?
                }
                Some("payment") => {
                    let checkout = last["payment"]["checkout_url"].as_str().unwrap_or("");
                    self.line(&format!("Pay at {checkout} and press Enter when done: "))?;
                    self.steps().await?
                }
                _ => {
                    let text = self.line("> ")?;
                    self.flow_call("events", Some(json!({"type": "text", "text": text}))).await?
                }
            };
        }
    }

    /// Asks for every field of a screen and submits it until the host takes it.
    async fn fill(&mut self, screen: &Value) -> anyhow::Result<Value> {
        let fields = screen["fields"].as_array().cloned().unwrap_or_default();
        let mut errors: Map<String, Value> = Map::new();
        let mut values = Map::new();
        let mut first = true;
        loop {
            for field in &fields {
                let key = field["key"].as_str().unwrap_or("");
                if !first && !errors.contains_key(key) {
                    continue; // kept from the last try
                }
                if let Some(why) = errors.get(key).and_then(Value::as_str) {
                    println!("  ! {why}");
                }
                let typed = self.line(&prompt(field))?;
                match value_of(field, &typed) {
                    Some(value) => values.insert(key.to_string(), value),
                    None => values.remove(key),
                };
            }
            first = false;
            let body = json!({"screen": screen["id"], "values": values});
            let response = self.request("submit", Some(body)).send().await?;
            if response.status() == reqwest::StatusCode::UNPROCESSABLE_ENTITY {
                let refused: Value = response.json().await.unwrap_or(Value::Null);
                errors = refused["error"]["fields"].as_object().cloned().unwrap_or_default();
                if errors.is_empty() {
                    bail!("the host refused the submission: {}", refused["error"]);
                }
                println!("The host refused some answers:");
                continue;
            }
            return answer(response).await;
        }
    }

    /// Asks for a menu item by number (or id).
    fn pick(&mut self, menu: &Value) -> anyhow::Result<String> {
        let items = hubbub_host::channel_steps::menu_items(menu);
        loop {
            let typed = self.line("Choose (number): ")?;
            let chosen = typed
                .parse::<usize>()
                .ok()
                .and_then(|n| items.get(n.wrapping_sub(1)))
                .or_else(|| items.iter().find(|i| i["id"] == typed.as_str()));
            match chosen.and_then(|i| i["id"].as_str()) {
                Some(id) => return Ok(id.to_string()),
                None => println!("  ! one of 1..{}", items.len()),
            }
        }
    }

    fn request(&self, action: &str, body: Option<Value>) -> reqwest::RequestBuilder {
        let url = self.api.url(&format!("/me/flows/{}/{action}", self.reference));
        let request = self.http.post(url).bearer_auth(&self.token);
        match body {
            Some(body) => request.json(&body),
            None => request,
        }
    }

    async fn flow_call(&self, action: &str, body: Option<Value>) -> anyhow::Result<Value> {
        call(self.request(action, body)).await
    }

    async fn steps(&self) -> anyhow::Result<Value> {
        let url = self.api.url(&format!("/me/flows/{}/steps", self.reference));
        call(self.http.get(url).bearer_auth(&self.token)).await
    }

    /// One line of input after `prompt`; the end of input ends the walk.
    fn line(&mut self, prompt: &str) -> anyhow::Result<String> {
        print!("{prompt}");
        std::io::stdout().flush()?;
        let mut line = String::new();
        if self.input.read_line(&mut line)? == 0 {
            bail!("input ended before the flow was completed");
        }
        Ok(line.trim().to_string())
    }
}

/// Prints one step as the app would show it.
fn show(step: &Value) {
    let text = |k: &str| step[k].as_str().unwrap_or("").to_string();
    match step["type"].as_str().unwrap_or("") {
        "message" => println!("{}", text("text")),
        "menu" => {
            println!("{}", text("text"));
            let mut n = 0;
            for section in step["sections"].as_array().into_iter().flatten() {
                if let Some(title) = section["title"].as_str().filter(|t| !t.is_empty()) {
                    println!("  {title}");
                }
                for item in section["items"].as_array().into_iter().flatten() {
                    n += 1;
                    println!("  {n}. {}", item["label"].as_str().unwrap_or(""));
                }
            }
            if let Some(note) = whatsapp_note(step) {
                println!("{note}");
            }
        }
        "flow_screen" => println!("== {} ==", step["screen"]["title"].as_str().unwrap_or("")),
        "payment" => {
            let p = &step["payment"];
            let amount = p["amount_minor"].as_i64().unwrap_or(0);
            println!(
                "Payment: {} ({} {} in minor units)",
                p["description"].as_str().unwrap_or(""),
                amount,
                p["currency"].as_str().unwrap_or("")
            );
        }
        "flow_completed" => {
            println!("Completed.");
            for (key, value) in step["summary"].as_object().into_iter().flatten() {
                println!("  {key}: {}", value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string()));
            }
        }
        other => println!("({other} step) {step}"),
    }
}

/// What a bot author hears of a menu WhatsApp cannot show (a bot on WhatsApp is refused at upload for it
/// in its first steps; a later one goes out as numbered lines).
fn whatsapp_note(menu: &Value) -> Option<String> {
    let why = hubbub_host::channel_steps::whatsapp_fit(menu).err()?;
    Some(format!("  ! WhatsApp cannot show this menu: {why}"))
}

/// The question for one field: its label, type, whether it is required, and a select field's options.
fn prompt(field: &Value) -> String {
    let label = field["label"].as_str().or(field["key"].as_str()).unwrap_or("");
    let kind = field["type"].as_str().unwrap_or("text");
    let required = if field["required"] == true { ", required" } else { "" };
    let options: Vec<String> = field["options"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, o)| format!("{}={}", i + 1, o["label"].as_str().unwrap_or("")))
        .collect();
    let hint = match kind {
        "boolean" => " y/n".to_string(),
        "date" => " YYYY-MM-DD".to_string(),
        "select" => format!(" {}", options.join(" ")),
        _ => String::new(),
    };
    format!("{label} ({kind}{required}){hint}: ")
}

/// The value typed for a field as the host takes it (`None` when left empty); what the host refuses, it
/// says so next to the field.
fn value_of(field: &Value, typed: &str) -> Option<Value> {
    if typed.is_empty() {
        return None;
    }
    Some(match field["type"].as_str().unwrap_or("text") {
        "number" => {
            typed.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map_or(json!(typed), Value::Number)
        }
        "boolean" => match typed.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" | "1" => json!(true),
            "n" | "no" | "false" | "0" => json!(false),
            _ => json!(typed),
        },
        "select" => {
            let options = field["options"].as_array().cloned().unwrap_or_default();
            typed
                .parse::<usize>()
                .ok()
                .and_then(|n| options.get(n.wrapping_sub(1)))
                .and_then(|o| o["id"].as_str())
                .map_or(json!(typed), |id| json!(id))
        }
        _ => json!(typed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_menu_whatsapp_cannot_show_is_pointed_out() {
        let items: Vec<Value> = (1..=4).map(|i| json!({"id": format!("o{i}"), "label": format!("O{i}")})).collect();
        let four =
            json!({"type": "menu", "style": "button", "text": "Pick", "sections": [{"title": "", "items": items}]});
        let note = whatsapp_note(&four).unwrap();
        assert!(note.contains("4 options") && note.contains("at most 3 reply buttons"), "{note}");
        let mut list = four.clone();
        list["style"] = json!("list");
        assert_eq!(whatsapp_note(&list), None);
    }

    #[test]
    fn typed_answers_become_the_values_the_host_takes() {
        let select = json!({"key": "plan", "type": "select", "options": [{"id": "basic", "label": "Basic"}, {"id": "pro", "label": "Pro"}]});
        assert_eq!(value_of(&select, "2"), Some(json!("pro")));
        assert_eq!(value_of(&select, "basic"), Some(json!("basic")));
        assert_eq!(value_of(&json!({"type": "boolean"}), "Y"), Some(json!(true)));
        assert_eq!(value_of(&json!({"type": "number"}), "4.5"), Some(json!(4.5)));
        assert_eq!(value_of(&json!({"type": "number"}), "many"), Some(json!("many")));
        assert_eq!(value_of(&json!({"type": "text"}), ""), None);
        assert_eq!(prompt(&select), "plan (select) 1=Basic 2=Pro: ");
    }
}
