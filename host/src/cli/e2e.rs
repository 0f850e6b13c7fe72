//! `hubbub e2e …`: the reference client of docs/e2e.md for partners and tests. `keygen` makes a device key
//! pair, `seal` fetches a user's key directory and seals a message for every device (printing the request
//! body, or sending it with `--send`), `open` opens a message record as one device.

use std::io::Read;

use anyhow::{Context, bail};
use clap::Subcommand;
use hubbub_encryption::{Envelope, KeyPair, Recipient};
use serde_json::{Value, json};

use super::{Api, call};

#[derive(Subcommand)]
pub enum E2eCommand {
    /// Print a new device key pair: {"private_key","public_key"} (base64url X25519).
    Keygen,
    /// Seal a message (text from --text or stdin) for every published device of PHONE.
    Seal {
        /// The recipient, E.164.
        #[arg(long)]
        phone: String,
        /// Your partner code (it is bound into the aad).
        #[arg(long)]
        partner: String,
        /// The message ref to bind (msg_ + 20-64 URL-safe characters); a new one by default.
        #[arg(long = "ref")]
        reference: Option<String>,
        /// The plaintext; read from stdin when absent.
        #[arg(long)]
        text: Option<String>,
        /// POST the sealed message to /api/v1/messages and print the record.
        #[arg(long)]
        send: bool,
        #[command(flatten)]
        api: Api,
    },
    /// Open a message record (JSON on stdin, as /me/messages lists it) with a device's private key.
    Open {
        /// The device's base64url private key (it may start with `-`).
        #[arg(long, env = "HUBBUB_E2E_PRIVATE_KEY", hide_env_values = true, allow_hyphen_values = true)]
        private_key: String,
        /// The device's uuid (which key wrap to use).
        #[arg(long)]
        device_uuid: String,
    },
}

pub async fn run(command: E2eCommand) -> anyhow::Result<()> {
    match command {
        E2eCommand::Keygen => {
            let pair = KeyPair::generate()?;
            println!("{}", json!({"private_key": pair.secret_b64(), "public_key": pair.public_b64()}));
        }
        E2eCommand::Seal { phone, partner, reference, text, send, api } => {
            let plaintext = match text {
                Some(t) => t,
                None => read_stdin()?,
            };
            let reference = reference.unwrap_or_else(hubbub_host::secrets::new_message_ref);
            let http = reqwest::Client::new();
            let mut url = reqwest::Url::parse(&api.api_url).context("--api-url")?;
            url.path_segments_mut()
                .map_err(|_| anyhow::anyhow!("--api-url cannot be a base"))?
                .extend(["api", "v1", "keys", &phone]);
            let directory = call(http.get(url).bearer_auth(&api.api_key)).await?;
            let recipients: Vec<Recipient> = directory["devices"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["has_keys"] == true)
                .map(|d| serde_json::from_value(d.clone()))
                .collect::<Result<_, _>>()?;
            if recipients.is_empty() {
                bail!("{phone} has not published a device key");
            }
            let aad = hubbub_encryption::hub_aad(&partner, &reference);
            let envelope = hubbub_encryption::seal(plaintext.as_bytes(), &aad, &recipients, None)?;
            let body = json!({"phone": phone, "ref": reference, "encryption": "e2e", "e2e_envelope": envelope});
            if send {
                let url = format!("{}/api/v1/messages", api.api_url.trim_end_matches('/'));
                println!("{}", call(http.post(url).bearer_auth(&api.api_key).json(&body)).await?);
            } else {
                println!("{body}");
            }
        }
        E2eCommand::Open { private_key, device_uuid } => {
            let record: Value = serde_json::from_str(&read_stdin()?).context("stdin is not a message record")?;
            let plaintext = open_record(&record, &device_uuid, &KeyPair::from_secret_b64(private_key.trim())?)?;
            println!("{}", String::from_utf8_lossy(&plaintext));
        }
    }
    Ok(())
}

/// Opens a sealed hub message record, checking its `aad` names the record's partner and ref.
pub fn open_record(record: &Value, device_uuid: &str, device: &KeyPair) -> anyhow::Result<Vec<u8>> {
    let envelope: Envelope =
        serde_json::from_value(record["e2e_envelope"].clone()).context("the record has no e2e_envelope")?;
    let (partner, reference) = (record["partner"].as_str(), record["ref"].as_str());
    let (Some(partner), Some(reference)) = (partner, reference) else {
        bail!("the record has no partner and ref");
    };
    Ok(hubbub_encryption::open(&envelope, device_uuid, device, &hubbub_encryption::hub_aad(partner, reference))?)
}

fn read_stdin() -> anyhow::Result<String> {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s)?;
    Ok(s)
}
