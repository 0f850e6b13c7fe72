//! Configuration: one typed struct, read from flags or the environment. `hubbub serve --help` is the
//! reference for every setting.

use std::net::SocketAddr;

use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TemplateReview {
    /// Templates are decided by the automatic review as soon as they are submitted.
    Auto,
    /// Submitted templates wait in `pending` for an operator (`hubbub template review`).
    Manual,
}

#[derive(Clone, Args)]
pub struct Config {
    /// Database URL: `sqlite://FILE?mode=rwc` (embedded, the default) or `postgres://…` (scale-out).
    #[arg(
        long,
        env = "HUBBUB_DATABASE_URL",
        default_value = "sqlite://hubbub.db?mode=rwc"
    )]
    pub database_url: String,

    /// Most database connections this process opens (PostgreSQL; SQLite uses one writer and up to this
    /// many readers).
    #[arg(long, env = "HUBBUB_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,

    /// Address the HTTP API listens on.
    #[arg(long, env = "HUBBUB_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Development mode: `http://localhost` webhook and media URLs are allowed, SMS and WhatsApp go to the
    /// dev sink, and templates are reviewed automatically.
    #[arg(long, env = "HUBBUB_DEV", value_parser = clap::builder::FalseyValueParser::new(), default_value = "false")]
    pub dev: bool,

    /// Secret that signs user JWTs (HS256), as UTF-8 bytes. When unset, one is generated once and kept in
    /// the database.
    #[arg(long, env = "HUBBUB_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,

    /// Seconds without device activity after which a user counts as offline.
    #[arg(long, env = "HUBBUB_OFFLINE_AFTER_S", default_value_t = 300)]
    pub offline_after_s: u64,

    /// How submitted templates are decided (dev mode always reviews automatically).
    #[arg(
        long,
        env = "HUBBUB_TEMPLATE_REVIEW",
        value_enum,
        default_value = "auto"
    )]
    pub template_review: TemplateReview,

    /// Sustained requests per second allowed per credential.
    #[arg(long, env = "HUBBUB_RATE_LIMIT_PER_S", default_value_t = 100)]
    pub rate_limit_per_s: u32,

    /// Burst size of the per-credential rate limit.
    #[arg(long, env = "HUBBUB_RATE_LIMIT_BURST", default_value_t = 200)]
    pub rate_limit_burst: u32,

    /// Lifetime of user JWTs, in seconds (default 30 days).
    #[arg(long, env = "HUBBUB_USER_TOKEN_TTL_S", default_value_t = 30 * 24 * 3600)]
    pub user_token_ttl_s: u64,

    /// Largest accepted request body, in bytes (component uploads have their own limit).
    #[arg(long, env = "HUBBUB_BODY_LIMIT", default_value_t = 10 * 1024 * 1024)]
    pub body_limit: usize,
}

impl Config {
    /// Whether templates are decided at submit time.
    pub fn auto_review(&self) -> bool {
        self.dev || self.template_review == TemplateReview::Auto
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &redact_url(&self.database_url))
            .field("db_max_connections", &self.db_max_connections)
            .field("listen", &self.listen)
            .field("dev", &self.dev)
            .field(
                "jwt_secret",
                &self.jwt_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("offline_after_s", &self.offline_after_s)
            .field("template_review", &self.template_review)
            .field("rate_limit_per_s", &self.rate_limit_per_s)
            .field("rate_limit_burst", &self.rate_limit_burst)
            .field("user_token_ttl_s", &self.user_token_ttl_s)
            .field("body_limit", &self.body_limit)
            .finish()
    }
}

/// Hides a password in a database URL.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:[redacted]{}",
                    &url[..scheme + 3],
                    &userinfo[..colon],
                    &url[at..]
                ),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_passwords() {
        assert_eq!(
            super::redact_url("postgres://u:pw@h/db"),
            "postgres://u:[redacted]@h/db"
        );
        assert_eq!(super::redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(super::redact_url("sqlite://x.db"), "sqlite://x.db");
    }
}
