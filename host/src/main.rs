//! The `hubbub` command: `serve` runs the service; the other commands are for operators.

use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use hubbub_host::clock::{Clock, SystemClock};
use hubbub_host::config::Config;
use hubbub_host::http::api_keys;
use hubbub_host::http::auth;
use hubbub_host::http::senders::SenderRecord;
use hubbub_host::names::{Channel, MemberRole, TemplateStatus};
use hubbub_host::store::{Db, partners, senders as store_senders, templates};
use hubbub_host::{events, secrets, validate};
use serde_json::json;

mod cli;

/// jemalloc for every allocation of the process (host/Cargo.toml says why).
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "hubbub", version, about = "Hubbub: partner messaging with a WebAssembly bot runtime")]
struct Cli {
    /// Settings file (TOML): any setting of `hubbub serve --help` by its long name with `_` for `-`
    /// (`listen = "0.0.0.0:8080"`, `dev = true`, `webhook_backoff_s = [5, 30]`). The environment and flags win
    /// over it. Every secret setting may also come from a file: `HUBBUB_<NAME>_FILE` (e.g.
    /// `HUBBUB_JWT_SECRET_FILE`), read when `HUBBUB_<NAME>` is unset.
    #[arg(long, env = "HUBBUB_CONFIG", global = true)]
    config: Option<std::path::PathBuf>,

    /// Log filter, in tracing's `EnvFilter` syntax (`info`, `warn,hubbub_host=debug`).
    #[arg(long, env = "HUBBUB_LOG", global = true, default_value = "info,sqlx=warn")]
    log: String,

    /// Log format: `text` for people, `json` for log pipelines (one object per line).
    #[arg(long, env = "HUBBUB_LOG_FORMAT", global = true, value_enum, default_value = "text")]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Parses the command line over the layers beneath it: the `--config` file, then `HUBBUB_<SECRET>_FILE`s
/// (see [`hubbub_host::config::layer_defaults`]), then the environment and flags, which win.
fn parse_cli() -> anyhow::Result<Cli> {
    let env = |name: &str| std::env::var(name).ok();
    let args: Vec<String> = std::env::args().collect();
    // `--config` has to be known before the rest is parsed.
    let flag = args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix("--config") {
        Some("") => args.get(i + 1).cloned(),
        Some(rest) => rest.strip_prefix('=').map(str::to_string),
        None => None,
    });
    let config_file = flag.or_else(|| env("HUBBUB_CONFIG")).filter(|f| !f.is_empty());
    let command =
        hubbub_host::config::layer_defaults(Cli::command(), config_file.as_deref().map(std::path::Path::new), &env)?;
    Ok(Cli::from_arg_matches(&command.get_matches())?)
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP API (and its background workers) until SIGTERM or Ctrl-C.
    Serve {
        #[command(flatten)]
        config: Config,
    },
    /// Manage partner organisations.
    Partner {
        #[command(subcommand)]
        command: PartnerCommand,
    },
    /// End-user helpers for tests and support.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Review submitted templates (when HUBBUB_TEMPLATE_REVIEW=manual).
    Template {
        #[command(subcommand)]
        command: TemplateCommand,
    },
    /// Secrets: make one of full entropy; rotate the key that seals them at rest.
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
    },
    /// End-to-end encryption reference client (docs/e2e.md): keygen, seal, open.
    E2e {
        #[command(subcommand)]
        command: cli::e2e::E2eCommand,
    },
    /// Bot authors' tools against a running host: upload a component, invite to a flow, try a flow here.
    Bot {
        #[command(subcommand)]
        command: cli::bot::BotCommand,
    },
    /// Take a consistent backup of the database into a new FILE while hosts serve (SQLite's `VACUUM INTO`;
    /// PostgreSQL's pg_dump, custom format). The key that seals secrets at rest (HUBBUB_SECRET_KEY) is not in
    /// it: keep that apart (docs/deploy.md, "Backups").
    Backup {
        /// The new file to write.
        #[arg(long)]
        to: std::path::PathBuf,
        #[command(flatten)]
        config: Config,
    },
    /// Restore a backup into HUBBUB_DATABASE_URL, which must be a new or empty database (anything else is
    /// refused; PostgreSQL through pg_restore), and bring it up to this host's schema. Start the hosts afterwards, with the same
    /// HUBBUB_SECRET_KEY as when it was taken.
    Restore {
        /// The backup file (`hubbub backup --to`).
        #[arg(long)]
        from: std::path::PathBuf,
        #[command(flatten)]
        config: Config,
    },
    /// Print the OpenAPI document of the API (the one served at /api/v1/openapi.json and committed as
    /// docs/openapi.json).
    Openapi,
    /// Compile a bot component into its precompiled artifact: what `serve` runs in a child process whose
    /// memory and time it bounds (HUBBUB_BOT_COMPILE_MEMORY_MB, HUBBUB_BOT_COMPILE_TIMEOUT_MS).
    #[command(hide = true)]
    CompileComponent {
        #[arg(long)]
        input: std::path::PathBuf,
        #[arg(long)]
        output: std::path::PathBuf,
    },
}

#[derive(Subcommand)]
enum SecretsCommand {
    /// Print a new secret of full entropy (32 random bytes, base64url): for HUBBUB_JWT_SECRET,
    /// HUBBUB_METRICS_TOKEN or a bot's shared secrets.
    Generate,
    /// Re-seals every stored secret (the generated JWT secret, webhook secrets) with a new key. With a key
    /// file (`HUBBUB_SECRET_KEY_FILE` or the one beside the SQLite database) the file is replaced; with
    /// `HUBBUB_SECRET_KEY`, give --new-key-file and set HUBBUB_SECRET_KEY to its content afterwards. Stop
    /// every host first: a host still on the old key cannot open secrets sealed with the new one.
    RotateKey {
        /// Where to write the new key (required when the key comes from HUBBUB_SECRET_KEY).
        #[arg(long)]
        new_key_file: Option<std::path::PathBuf>,
        #[command(flatten)]
        config: Config,
    },
}

#[derive(Subcommand)]
enum PartnerCommand {
    /// Create a partner and print its first API key and its first owner's invitation once:
    /// {"partner","api_key","owner_invitation","owner_invitation_link","invitation_expires_at"}.
    Create {
        /// Partner code, ^[a-z0-9][a-z0-9_-]{0,63}$.
        #[arg(long)]
        code: String,
        /// Display name.
        #[arg(long)]
        name: String,
        /// The platform partner (system broadcasts, developer catalog, dev sink).
        #[arg(long)]
        platform: bool,
        #[command(flatten)]
        config: Config,
    },
    /// Replace all of a partner's API keys with one (every other key stops working) and print it once.
    /// To replace a key without downtime, use create-key, move the clients, then revoke-key.
    RotateKey {
        #[arg(long)]
        code: String,
        #[command(flatten)]
        config: Config,
    },
    /// Invite a member (owner, admin or agent) and print the invitation once: {"partner","role","invitation",
    /// "link","expires_at"}. It works once, within 7 days: the link opens the console's sign-in.
    Invite {
        #[arg(long)]
        code: String,
        /// owner, admin or agent.
        #[arg(long)]
        role: String,
        #[command(flatten)]
        config: Config,
    },
    /// Add an API key beside the others and print it once: {"partner","key","api_key"}.
    CreateKey {
        #[arg(long)]
        code: String,
        /// What the key is for (shown in lists), e.g. "billing service".
        #[arg(long)]
        name: String,
        #[command(flatten)]
        config: Config,
    },
    /// List a partner's API keys (prefixes only), one JSON line each.
    Keys {
        #[arg(long)]
        code: String,
        #[command(flatten)]
        config: Config,
    },
    /// Set a partner's own WhatsApp number or Twilio sender (replacing the one it had) and print it, its
    /// credentials as prefixes: {"channel","address","account","token_prefix","app_secret_prefix",
    /// "updated_at"}. Secrets may come from the environment instead of the command line.
    SetSender {
        #[arg(long)]
        code: String,
        /// whatsapp or sms.
        #[arg(long)]
        channel: String,
        /// WhatsApp: the business phone number's id.
        #[arg(long)]
        phone_number_id: Option<String>,
        /// WhatsApp: the WhatsApp Business Account id.
        #[arg(long)]
        business_account_id: Option<String>,
        /// WhatsApp: the access token.
        #[arg(long, env = "HUBBUB_SENDER_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// WhatsApp: the Meta app's secret.
        #[arg(long, env = "HUBBUB_SENDER_APP_SECRET", hide_env_values = true)]
        app_secret: Option<String>,
        /// SMS: the Twilio account SID.
        #[arg(long)]
        account_sid: Option<String>,
        /// SMS: the account's auth token.
        #[arg(long, env = "HUBBUB_SENDER_AUTH_TOKEN", hide_env_values = true)]
        auth_token: Option<String>,
        /// SMS: the Twilio number (E.164) or messaging service SID.
        #[arg(long)]
        from: Option<String>,
        #[command(flatten)]
        config: Config,
    },
    /// List a partner's own senders (credentials as prefixes), one JSON line each.
    Senders {
        #[arg(long)]
        code: String,
        #[command(flatten)]
        config: Config,
    },
    /// Remove a partner's own sender on a channel: its users go back to the host's.
    RemoveSender {
        #[arg(long)]
        code: String,
        /// whatsapp or sms.
        #[arg(long)]
        channel: String,
        #[command(flatten)]
        config: Config,
    },
    /// Revoke one API key by its id (not the last one that works).
    RevokeKey {
        #[arg(long)]
        code: String,
        #[arg(long)]
        id: i64,
        #[command(flatten)]
        config: Config,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Print a user JWT for PHONE on one line. It claims nothing and creates no device.
    Token {
        /// E.164 phone number.
        phone: String,
        #[command(flatten)]
        config: Config,
    },
}

#[derive(Subcommand)]
enum TemplateCommand {
    /// List templates waiting for a decision, one JSON line each.
    Pending {
        #[command(flatten)]
        config: Config,
    },
    /// Approve or reject a pending template; the partner receives `template.status`.
    Review {
        /// The template id.
        #[arg(long)]
        id: i64,
        /// Approve it (otherwise give --reject).
        #[arg(long, conflicts_with = "reject", required_unless_present = "reject")]
        approve: bool,
        /// Reject it, with --reason.
        #[arg(long, requires = "reason")]
        reject: bool,
        /// Why it was rejected.
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        config: Config,
    },
}

fn init_tracing(filter: &str, format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|e| {
        eprintln!("HUBBUB_LOG {filter:?} is not a valid filter ({e}); using info");
        EnvFilter::new("info,sqlx=warn")
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if format == LogFormat::Json {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown requested; finishing in-flight requests");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = parse_cli()?;
    init_tracing(&cli.log, cli.log_format);
    let clock = Arc::new(SystemClock::default());
    match cli.command {
        Command::E2e { command } => cli::e2e::run(command).await?,
        Command::Bot { command } => cli::bot::run(command).await?,
        Command::Backup { to, config } => {
            let db = Db::open(&config, 2).await?;
            let copied = hubbub_host::store::backup::backup(&db, &config.database_url, &to).await?;
            println!("{}", json!(copied));
        }
        Command::Restore { from, config } => {
            let copied = hubbub_host::store::backup::restore(&config.database_url, &from).await?;
            // Brought up to this host's schema, and opened with its key as a host would.
            Db::open(&config, 2).await?;
            println!("{}", json!(copied));
        }
        Command::Openapi => print!("{}", hubbub_host::http::openapi::document_text()),
        Command::CompileComponent { input, output } => hubbub_host::runtime::compile_file(&input, &output)?,
        Command::Secrets { command: SecretsCommand::Generate } => println!("{}", secrets::generate()),
        Command::Secrets { command: SecretsCommand::RotateKey { new_key_file, config } } => {
            let db = Db::open(&config, 2).await?;
            let source = hubbub_host::store::sealing::key_source(&config)?;
            let (key_id, path, resealed) =
                hubbub_host::store::sealing::rotate(&db, &source, new_key_file.as_deref()).await?;
            println!("{}", json!({ "key_id": key_id, "key_file": path.display().to_string(), "resealed": resealed }));
        }
        Command::Serve { config } => {
            tracing::info!(?config, "starting");
            let listener = tokio::net::TcpListener::bind(config.listen).await?;
            // A development host's clock may run ahead (`HUBBUB_DEV_CLOCK_OFFSET_S`; refused elsewhere).
            let clock = Arc::new(SystemClock::shifted(if config.dev { config.dev_clock_offset_s } else { 0 }));
            let state = hubbub_host::prepare(config, clock).await?;
            hubbub_host::serve(state, listener, shutdown_signal()).await?;
        }
        Command::Partner { command: PartnerCommand::Create { code, name, platform, config } } => {
            if !validate::is_code(&code) {
                anyhow::bail!("--code must match ^[a-z0-9][a-z0-9_-]{{0,63}}$");
            }
            let db = Db::open(&config, 2).await?;
            let key = secrets::new_partner_key();
            let partner = partners::insert_partner(
                &db,
                &code,
                &name,
                platform,
                &secrets::digest(&key),
                &secrets::display_prefix(&key, "sk_"),
                clock.now_ms(),
            )
            .await?;
            let (invitation, expires) =
                hubbub_host::members::invite(&db, partner.id, MemberRole::Owner, None, clock.now_ms()).await?;
            println!(
                "{}",
                json!({ "partner": code, "api_key": key, "owner_invitation": invitation,
                        "owner_invitation_link": hubbub_host::members::invitation_link(&config.public_url, &invitation),
                        "invitation_expires_at": hubbub_host::clock::record_time(expires) })
            );
        }
        Command::Partner { command: PartnerCommand::RotateKey { code, config } } => {
            let db = Db::open(&config, 2).await?;
            let key = secrets::new_partner_key();
            let (hash, prefix) = (secrets::digest(&key), secrets::display_prefix(&key, "sk_"));
            if !partners::replace_key(&db, &code, &hash, &prefix, clock.now_ms()).await? {
                anyhow::bail!("no partner with code {code:?}");
            }
            println!("{}", json!({ "partner": code, "api_key": key }));
        }
        Command::Partner { command: PartnerCommand::Invite { code, role, config } } => {
            let role =
                MemberRole::parse(&role).ok_or_else(|| anyhow::anyhow!("--role is one of owner, admin, agent"))?;
            let (db, partner) = open_partner(&config, &code).await?;
            let (invitation, expires) =
                hubbub_host::members::invite(&db, partner.id, role, None, clock.now_ms()).await?;
            println!(
                "{}",
                json!({ "partner": code, "role": role, "invitation": invitation,
                        "link": hubbub_host::members::invitation_link(&config.public_url, &invitation),
                        "expires_at": hubbub_host::clock::record_time(expires) })
            );
        }
        Command::Partner { command: PartnerCommand::CreateKey { code, name, config } } => {
            let name =
                hubbub_host::partners::key_name(Some(&name)).map_err(|e| anyhow::anyhow!("--name: {}", e.message))?;
            let (db, partner) = open_partner(&config, &code).await?;
            let key = secrets::new_partner_key();
            let (hash, prefix) = (secrets::digest(&key), secrets::display_prefix(&key, "sk_"));
            let operator = partners::KeyMaker::OPERATOR;
            let created = partners::create_key(&db, partner.id, name, &hash, &prefix, operator, clock.now_ms()).await?;
            println!("{}", json!({ "partner": code, "key": api_keys::ApiKeyRecord::from(&created), "api_key": key }));
        }
        Command::Partner { command: PartnerCommand::Keys { code, config } } => {
            let (db, partner) = open_partner(&config, &code).await?;
            for key in partners::list_keys(&db, partner.id).await? {
                println!("{}", json!(api_keys::ApiKeyRecord::from(&key)));
            }
        }
        Command::Partner { command: PartnerCommand::RevokeKey { code, id, config } } => {
            let (db, partner) = open_partner(&config, &code).await?;
            let operator = partners::KeyMaker::OPERATOR.role;
            match partners::revoke_key(&db, partner.id, id, operator, clock.now_ms()).await? {
                partners::Revoked::Done(key) => println!("{}", json!(api_keys::ApiKeyRecord::from(&key))),
                partners::Revoked::NotFound => anyhow::bail!("partner {code:?} has no key {id}"),
                partners::Revoked::LastKey => anyhow::bail!("key {id} is the last that works: create another first"),
                partners::Revoked::Outranked => anyhow::bail!("key {id} acts above the command line"),
            }
        }
        Command::Partner {
            command:
                PartnerCommand::SetSender {
                    code,
                    channel,
                    phone_number_id,
                    business_account_id,
                    token,
                    app_secret,
                    account_sid,
                    auth_token,
                    from,
                    config,
                },
        } => {
            let (db, partner) = open_partner(&config, &code).await?;
            let channel = sender_channel(&channel)?;
            let fields = hubbub_host::senders::Fields {
                phone_number_id,
                business_account_id,
                token,
                app_secret,
                account_sid,
                auth_token,
                from,
                mps: None,
            };
            let http = hubbub_host::providers::http_client(&config);
            let now = clock.now_ms();
            use hubbub_host::senders::SenderError;
            let sender =
                match hubbub_host::senders::register(&db, &config, &http, partner.id, channel, &fields, now).await {
                    Ok(sender) => sender,
                    Err(SenderError::Invalid(e)) => anyhow::bail!("--{}: {}", e.field.replace('_', "-"), e.message),
                    Err(SenderError::Taken(address)) => {
                        anyhow::bail!("another partner has {address} as its {} sender", channel.as_str())
                    }
                    Err(SenderError::Unreachable(why)) => anyhow::bail!("the provider could not be asked: {why}"),
                    Err(SenderError::Database(e)) => return Err(e.into()),
                };
            println!("{}", json!(SenderRecord::from(&sender)));
        }
        Command::Partner { command: PartnerCommand::Senders { code, config } } => {
            let (db, partner) = open_partner(&config, &code).await?;
            for sender in store_senders::list(&db, partner.id).await? {
                println!("{}", json!(SenderRecord::from(&sender)));
            }
        }
        Command::Partner { command: PartnerCommand::RemoveSender { code, channel, config } } => {
            let (db, partner) = open_partner(&config, &code).await?;
            let channel = sender_channel(&channel)?;
            if !store_senders::remove(&db, partner.id, channel).await? {
                anyhow::bail!("partner {code:?} has no own {} sender", channel.as_str());
            }
        }
        Command::User { command: UserCommand::Token { phone, config } } => {
            if !validate::is_e164(&phone) {
                anyhow::bail!("PHONE must be E.164, e.g. +15551230000");
            }
            let state = hubbub_host::prepare(config, clock).await?;
            println!("{}", auth::issue_user_token(&state, &phone, None)?.0);
        }
        Command::Template { command: TemplateCommand::Pending { config } } => {
            let db = Db::open(&config, 2).await?;
            for t in templates::list_pending(&db, false).await? {
                println!(
                    "{}",
                    json!({"template_id": t.id, "partner_id": t.partner_id, "code": t.code, "channel": t.channel, "lang": t.lang, "body": t.body})
                );
            }
        }
        Command::Template { command: TemplateCommand::Review { id, approve, reason, config, .. } } => {
            let db = Db::open(&config, 2).await?;
            let template = templates::find_any(&db, id).await?.ok_or_else(|| anyhow::anyhow!("no template {id}"))?;
            if template.status != TemplateStatus::Pending {
                anyhow::bail!("template {id} is {}, not pending", template.status);
            }
            if template.provider_template_id.is_some() {
                anyhow::bail!("template {id} waits for Meta's review: Meta decides it, not an operator");
            }
            let partner = partners::find_by_id(&db, template.partner_id)
                .await?
                .ok_or_else(|| anyhow::anyhow!("partner missing"))?;
            let (status, reason) =
                if approve { (TemplateStatus::Approved, None) } else { (TemplateStatus::Rejected, reason) };
            let now = clock.now_ms();
            let decided = templates::set_status(&db, partner.id, id, status, reason.as_deref(), now, |t| {
                events::template_status(&partner.code, t, now)
            })
            .await?;
            if let Some(t) = decided {
                println!(
                    "{}",
                    json!({"template_id": t.id, "status": t.status, "rejection_reason": t.rejection_reason})
                );
            }
        }
    }
    Ok(())
}

/// The channel of `--channel` for a partner's own sender.
fn sender_channel(text: &str) -> anyhow::Result<Channel> {
    match Channel::parse(text.trim()) {
        Some(channel @ (Channel::Whatsapp | Channel::Sms)) => Ok(channel),
        _ => anyhow::bail!("--channel is whatsapp or sms"),
    }
}

/// The database and the partner `code` names, for the partner commands.
async fn open_partner(config: &Config, code: &str) -> anyhow::Result<(Db, partners::Partner)> {
    let db = Db::open(config, 2).await?;
    let partner =
        partners::find_by_code(&db, code).await?.ok_or_else(|| anyhow::anyhow!("no partner with code {code:?}"))?;
    Ok((db, partner))
}
