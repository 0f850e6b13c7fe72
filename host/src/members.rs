//! The people of a partner and what each may do: the one place that decides which routes a member's role
//! allows, how long a member's session lives, and how long an invitation stays good.

use crate::clock::Millis;
use crate::names::MemberRole;
use crate::secrets::{digest, new_invitation};
use crate::store::Db;

/// A session ends after this long without a request (8 hours: a working day).
pub const SESSION_IDLE_MS: i64 = 8 * 60 * 60 * 1000;
/// A session ends this long after sign-in whatever its activity (7 days).
pub const SESSION_ABSOLUTE_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// An invitation is good for this long (7 days), once.
pub const INVITATION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// The session cookie: HttpOnly, SameSite=Strict, Secure outside dev mode on `http://localhost`.
pub const COOKIE: &str = "hubbub_member";

/// Routes an agent may use with any method: conversations (theirs to answer) and the agent's own routes.
const AGENT_ROUTES: &[&str] = &["/api/v1/conversations", "/api/v1/agent/"];
/// Routes an agent may read: the contact panel (accounts and their fields, messages with their attempts,
/// flow sessions, payments), the media of those messages, and the partner's canned replies, labels and
/// macros.
const AGENT_READS: &[&str] = &[
    "/api/v1/accounts",
    "/api/v1/messages",
    "/api/v1/flow-sessions",
    "/api/v1/payments",
    "/api/v1/media/",
    "/api/v1/canned-replies",
    "/api/v1/labels",
    "/api/v1/macros",
];
/// Routes only an owner may use: the members and the audit log (every member may read who the members
/// are, to assign a conversation).
const OWNER_ROUTES: &[&str] = &["/api/v1/members", "/api/v1/audit-log"];
/// Routes every member may read.
const MEMBER_READS: &[&str] = &["/api/v1/members"];
/// Routes every member may use for their own session (who am I, sign out, sign out everywhere).
const OWN_SESSION_ROUTES: &[&str] = &["/api/v1/members/me", "/api/v1/members/sessions"];

fn under(route: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|p| {
        route.starts_with(p) && (p.ends_with('/') || route.len() == p.len() || route[p.len()..].starts_with(['/', '?']))
    })
}

/// What the person at the other end sees of a member who answers them: the first word of their display
/// name ("Ana" of "Ana Lima"), never their phone; `None` without a name (the app shows the partner's name).
pub fn first_name(name: Option<&str>) -> Option<String> {
    name.and_then(|n| n.split_whitespace().next()).map(str::to_string)
}

/// Whether a member with `role` may call the route `route` (the matched route template, such as
/// `/api/v1/bots/{code}`), on their own partner; `reads` when the method only reads (GET, HEAD).
pub fn allows(role: MemberRole, reads: bool, route: &str) -> bool {
    if under(route, OWN_SESSION_ROUTES) || (reads && MEMBER_READS.contains(&route)) {
        return true;
    }
    match role {
        MemberRole::Owner => true,
        MemberRole::Admin => !under(route, OWNER_ROUTES),
        MemberRole::Agent => under(route, AGENT_ROUTES) || (reads && under(route, AGENT_READS)),
    }
}

/// What a role may not do, for the `403` that says so.
pub fn refusal(role: MemberRole) -> &'static str {
    match role {
        MemberRole::Owner => "owners may do everything",
        MemberRole::Admin => "an admin may do everything but manage members and read the audit log: ask an owner",
        MemberRole::Agent => "an agent may answer conversations and read contacts only: ask an admin or owner",
    }
}

/// What a key of `role` may not do, for the `403` that says so: a key acts with the role of the member who
/// made it.
pub fn key_refusal(role: MemberRole) -> &'static str {
    match role {
        MemberRole::Owner => "owners may do everything",
        MemberRole::Admin => {
            "this key was made by an admin and acts as one: it may not manage members or read the audit log"
        }
        MemberRole::Agent => "this key acts as an agent: it may answer conversations and read contacts only",
    }
}

/// Routes whose changes made with an API key the audit log leaves out: sending a message
/// (`POST /api/v1/messages`), the one call of the data plane that runs thousands of times a second, and
/// leaves its own durable record (the message, its attempts and events). Everything else a key changes, and
/// everything a member changes, is written.
const UNAUDITED_KEY_ROUTES: &[&str] = &["/api/v1/messages"];

/// Reads written to the audit log all the same: exports (a partner's data leaving it).
pub fn audited_read(route: &str) -> bool {
    route.starts_with("/api/v1/exports/")
}

/// Whether a change made on `route` is written to the audit log (`by_key`: made with an API key).
pub fn audited(by_key: bool, route: &str) -> bool {
    !(by_key && UNAUDITED_KEY_ROUTES.contains(&route))
}

/// Makes an invitation to `partner_id` as `role`: the token (shown once, stored as a digest) and when it
/// expires. `POST /members/invitations`, and `hubbub partner create` for the first owner.
pub async fn invite(
    db: &Db,
    partner_id: i64,
    role: MemberRole,
    invited_by: Option<i64>,
    now: Millis,
) -> Result<(String, Millis), sqlx::Error> {
    let token = new_invitation();
    let made =
        crate::store::members::invite(db, partner_id, role, &digest(&token), invited_by, now, now + INVITATION_MS)
            .await?;
    Ok((token, made.expires_at))
}

/// The console's sign-in page carrying `invitation` in its fragment (never sent to a server, never logged).
pub fn invitation_link(public_url: &str, invitation: &str) -> String {
    format!("{}/console/#{invitation}", public_url.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_person_sees_a_members_first_name_only() {
        assert_eq!(first_name(Some("  Ana María Lima ")), Some("Ana".into()));
        assert_eq!(first_name(Some("Bo")), Some("Bo".into()));
        assert_eq!(first_name(Some("   ")), None);
        assert_eq!(first_name(None), None);
    }

    #[test]
    fn each_role_reaches_what_it_should_and_no_more() {
        let (get, post) = (true, false);
        for role in MemberRole::ALL {
            assert!(allows(*role, get, "/api/v1/members/me"));
            assert!(allows(*role, false, "/api/v1/members/sessions/current"));
            assert!(allows(*role, post, "/api/v1/conversations/{id}/messages"));
        }
        assert!(allows(MemberRole::Owner, post, "/api/v1/members/invitations"));
        assert!(!allows(MemberRole::Admin, post, "/api/v1/members/invitations"));
        assert!(!allows(MemberRole::Admin, get, "/api/v1/audit-log"));
        assert!(allows(MemberRole::Admin, false, "/api/v1/settings/webhook"));
        assert!(!allows(MemberRole::Agent, false, "/api/v1/settings/webhook"));
        assert!(!allows(MemberRole::Agent, get, "/api/v1/settings/webhook"));
        assert!(!allows(MemberRole::Agent, post, "/api/v1/messages"));
        assert!(allows(MemberRole::Agent, get, "/api/v1/messages/{id}"));
        assert!(allows(MemberRole::Agent, get, "/api/v1/accounts/{phone}"));
        assert!(!allows(MemberRole::Agent, false, "/api/v1/accounts/{phone}"));
        assert!(!allows(MemberRole::Agent, get, "/api/v1/bots"));
        assert!(!allows(MemberRole::Agent, get, "/api/v1/api-keys"));
        // A prefix is a whole segment: `/api/v1/messagesX` is not under `/api/v1/messages`.
        assert!(!allows(MemberRole::Agent, get, "/api/v1/messagesX"));
        assert!(allows(MemberRole::Agent, get, "/api/v1/members"), "who to assign to");
        assert!(!allows(MemberRole::Agent, get, "/api/v1/members/{id}"));
        assert!(!allows(MemberRole::Admin, post, "/api/v1/members/{id}"));
        // Canned replies: agents pick them, admins keep them.
        assert!(allows(MemberRole::Agent, get, "/api/v1/canned-replies"));
        assert!(!allows(MemberRole::Agent, post, "/api/v1/canned-replies"));
        assert!(!allows(MemberRole::Agent, false, "/api/v1/canned-replies/{id}"));
        assert!(allows(MemberRole::Admin, post, "/api/v1/canned-replies"));
        // The console's stream is a conversation route.
        assert!(allows(MemberRole::Agent, get, "/api/v1/conversations/events"));
    }
}
