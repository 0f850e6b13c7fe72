//! HTTP tests of the whole API, run against a real listening server on `127.0.0.1:0` and a real database:
//! SQLite by default, PostgreSQL when `HUBBUB_TEST_DATABASE_URL` is a `postgres://` URL (each test gets its
//! own schema there, its own file on SQLite).

mod common;

mod accounts;
mod analytics;
mod api_keys;
mod auth_matrix;
mod backup;
mod bots;
mod broadcasts;
mod cli;
mod conventions;
mod conversations;
mod delivery;
mod desk;
mod developers;
mod encryption;
mod erasure;
mod exports;
mod hardening;
mod hardening_three;
mod hardening_two;
mod hub_fallback;
mod inbound;
mod members;
mod messages;
mod pacing;
mod passkeys;
mod payments;
mod preferences;
mod push;
mod retention;
mod scale_out;
mod scheduled;
mod search;
mod stream;
mod templates;
mod users;
mod web_app;
mod webhooks;
mod whatsapp;
