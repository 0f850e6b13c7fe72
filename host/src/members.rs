//! The people of a partner and what each may do: the one place that decides which routes a member's role
//! allows, how long a member's session lives, and how long an invitation stays good.

use crate::clock::Millis;
use crate::names::{AgentStatus, MemberRole};
use crate::secrets::{digest, new_invitation, new_member_session};
use crate::store::Db;
use crate::store::members::{self as store, Accepted};
pub use crate::store::members::{
    AuditEntry, AuditWrite, Changed, Member, Session, audit_log, find, find_session, list, seen,
};
use crate::validate::Invalid;

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

/// Why a member's sign-in or a change of members was refused.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error(transparent)]
    Otp(#[from] crate::otp::OtpError),
    /// An invitation that is unknown, used or expired (401).
    #[error("the invitation is unknown, used or expired: ask for a new one")]
    UnusableInvitation,
    /// The phone is no member of that partner (403).
    #[error("this phone is not a member of that partner: sign in with an invitation from its owner")]
    NotMember,
    /// The member changed or removed is none of the partner's (404).
    #[error("member not found")]
    NotFound,
    /// The partner's last owner stays an owner (409).
    #[error("the partner's last owner stays an owner: make another owner first")]
    LastOwner,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// A member's sign-in: the phone and the code sent to it, the `inv_…` token of an invitation (a new
/// member), a name, and the partner (when the phone is a member of several).
pub struct SignIn<'a> {
    pub phone: Option<&'a str>,
    pub code: Option<&'a str>,
    pub invitation: Option<&'a str>,
    pub name: Option<&'a str>,
    pub partner: Option<&'a str>,
}

/// Signs a member in with the code sent to their phone: a new member with an invitation (its role), or one
/// already a member of the partner named (or of their only partner). A name given is taken (as
/// `PATCH /members/me` would).
pub async fn sign_in(codes: &crate::otp::Codes<'_>, req: SignIn<'_>) -> Result<Member, MemberError> {
    let phone = crate::validate::required_phone(req.phone)?.to_string();
    let code = crate::validate::required_code(req.code)?;
    let invitation = req.invitation.map(str::trim).filter(|i| !i.is_empty());
    if invitation.is_some_and(|i| !i.starts_with("inv_") || i.len() != 44) {
        return Err(Invalid::new("invitation", "invitation is the inv_… token of an invitation link").into());
    }
    let name = req.name.map(|raw| crate::partners::key_name(Some(raw))).transpose()?;
    crate::otp::verify(codes, &phone, "login", code).await?;
    let (db, now) = (codes.db, codes.clock.now_ms());
    Ok(match invitation {
        Some(invitation) => match store::accept(db, &digest(invitation), &phone, name, now).await? {
            Accepted::Member(member) => member,
            Accepted::Unusable => return Err(MemberError::UnusableInvitation),
        },
        None => {
            let member = membership(db, &phone, req.partner).await?.ok_or(MemberError::NotMember)?;
            match name {
                Some(name) => match store::update(db, member.partner_id, member.id, None, Some(name)).await? {
                    Changed::Done(Some(named)) => named,
                    _ => member,
                },
                None => member,
            }
        }
    })
}

/// The membership of `phone` to sign in to: with the partner named in `partner`, or its only one (`None`
/// when it has none there; refused naming them when it has several and names none).
async fn membership(db: &Db, phone: &str, partner: Option<&str>) -> Result<Option<Member>, MemberError> {
    let mut all = store::memberships(db, phone).await?;
    if let Some(code) = partner.map(str::trim).filter(|p| !p.is_empty()) {
        all.retain(|(_, partner)| partner == code);
    }
    if all.len() > 1 {
        let codes: Vec<&str> = all.iter().map(|(_, p)| p.as_str()).collect();
        let why = format!("this phone is a member of several partners: name one of {}", codes.join(", "));
        return Err(Invalid::new("partner", why).into());
    }
    Ok(all.pop().map(|(member, _)| member))
}

/// Starts a session for `member`, signed in from `address` with `user_agent` (its first 256 characters
/// kept): the session's token (shown once, kept as a digest) and the session.
pub async fn start_session(
    db: &Db,
    member: &Member,
    address: &str,
    user_agent: Option<&str>,
    now: Millis,
) -> Result<(String, Session), sqlx::Error> {
    let token = new_member_session();
    let user_agent = user_agent.map(|ua| ua.chars().take(256).collect::<String>());
    store::start_session(
        db,
        member.id,
        &digest(&token),
        now,
        now + SESSION_ABSOLUTE_MS,
        address,
        user_agent.as_deref(),
    )
    .await?;
    let session =
        store::find_session(db, &digest(&token), now, SESSION_IDLE_MS).await?.ok_or(sqlx::Error::RowNotFound)?;
    Ok((token, session))
}

/// What a member changes of themself (at least one): their name, their status.
pub async fn update_me(
    db: &Db,
    session: &Session,
    name: Option<&str>,
    status: Option<AgentStatus>,
    now: Millis,
) -> Result<Member, MemberError> {
    if name.is_none() && status.is_none() {
        return Err(Invalid::new("name", "set name or status").into());
    }
    let (partner, member) = (session.partner.id, session.member.id);
    if let Some(raw) = name {
        let name = crate::partners::key_name(Some(raw))?;
        let Changed::Done(Some(_)) = store::update(db, partner, member, None, Some(name)).await? else {
            return Err(MemberError::NotFound);
        };
    }
    if let Some(status) = status
        && !crate::assignment::set_status(db, partner, member, status, now).await?
    {
        return Err(MemberError::NotFound);
    }
    store::find(db, member).await?.ok_or(MemberError::NotFound)
}

/// What an owner changes of a member: role, name, status, and capacity (`Some(None)`: the partner's
/// default).
pub struct MemberChanges<'a> {
    pub role: Option<MemberRole>,
    pub name: Option<&'a str>,
    pub status: Option<AgentStatus>,
    pub capacity: Option<Option<i64>>,
}

/// Changes partner `partner_id`'s member `id`; the keys the member made take a new role. A capacity or a
/// status changed gives out the queue again.
pub async fn update(
    db: &Db,
    partner_id: i64,
    id: i64,
    req: MemberChanges<'_>,
    now: Millis,
) -> Result<Member, MemberError> {
    let name = req.name.map(|raw| crate::partners::key_name(Some(raw))).transpose()?;
    if let Some(Some(capacity)) = req.capacity
        && !crate::assignment::CAPACITY.contains(&capacity)
    {
        return Err(Invalid::new("capacity", "capacity is 1 to 1000 conversations, or null for the default").into());
    }
    changed(store::update(db, partner_id, id, req.role, name).await?)?;
    if let Some(capacity) = req.capacity {
        crate::store::assignment::set_capacity(db, partner_id, id, capacity).await?;
        crate::assignment::give_out(db, partner_id, now).await?;
    }
    if let Some(status) = req.status {
        crate::assignment::set_status(db, partner_id, id, status, now).await?;
    }
    store::find(db, id).await?.ok_or(MemberError::NotFound)
}

/// Removes partner `partner_id`'s member `id`: their sessions end, the keys they made are revoked, and their
/// conversations go back to the queue (someone free may take them); their audit entries stay.
pub async fn remove(db: &Db, partner_id: i64, id: i64, now: Millis) -> Result<Member, MemberError> {
    let done = store::remove(db, partner_id, id, now).await?;
    crate::assignment::give_out(db, partner_id, now).await?;
    changed(done)
}

/// Ends `session` (or every session of its member, `everywhere`); signed out, they take no conversations:
/// theirs go back to the queue.
pub async fn sign_out(db: &Db, session: &Session, everywhere: bool, now: Millis) -> Result<(), sqlx::Error> {
    if everywhere {
        store::end_sessions(db, session.member.id, now).await?;
    } else {
        store::end_session(db, session.id, now).await?;
    }
    crate::assignment::set_status(db, session.partner.id, session.member.id, AgentStatus::Offline, now).await?;
    Ok(())
}

fn changed(c: Changed) -> Result<Member, MemberError> {
    match c {
        Changed::Done(Some(member)) => Ok(member),
        Changed::Done(None) | Changed::NotFound => Err(MemberError::NotFound),
        Changed::LastOwner => Err(MemberError::LastOwner),
    }
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
