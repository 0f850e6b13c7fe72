//! The people of a partner (`members`, each with a role), the single-use invitations they join by, their
//! cookie sessions, and the audit log of what they changed. Invitation and session tokens are kept as
//! SHA-256 digests only.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::Db;
use super::partners::Partner;
use crate::clock::Millis;
use crate::names::{AgentStatus, MemberRole};

#[derive(Debug, Clone)]
pub struct Member {
    pub id: i64,
    pub partner_id: i64,
    pub phone: String,
    pub name: Option<String>,
    pub role: MemberRole,
    pub created_at: Millis,
    /// Whether they take conversations now (see `store::assignment`).
    pub status: AgentStatus,
    /// Their limit of conversations not closed, when the partner assigns them (`None`: the partner's
    /// default).
    pub capacity: Option<i64>,
}

const MEMBER_COLUMNS: &str = "m.id, m.partner_id, m.phone, m.name, m.role, m.created_at, m.status, m.capacity";

fn member_from_row(row: &AnyRow) -> Result<Member, sqlx::Error> {
    Ok(Member {
        id: row.try_get("id")?,
        partner_id: row.try_get("partner_id")?,
        phone: row.try_get("phone")?,
        name: row.try_get("name")?,
        role: super::decode_name(row, "role")?,
        created_at: row.try_get("created_at")?,
        status: super::decode_name(row, "status")?,
        capacity: row.try_get("capacity")?,
    })
}

/// A member's signed-in session, with the member and their partner.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: i64,
    pub member: Member,
    pub partner: Partner,
    pub token_hash: String,
    pub created_at: Millis,
    pub last_seen_at: Millis,
    /// The absolute end: no activity extends it.
    pub ends_at: Millis,
}

/// An invitation as it was made (the token itself is shown once, by the caller, never stored).
#[derive(Debug, Clone)]
pub struct Invitation {
    pub id: i64,
    pub role: MemberRole,
    pub created_at: Millis,
    pub expires_at: Millis,
}

/// Makes an invitation to join `partner_id` with `role`, good until `expires_at`.
pub async fn invite(
    db: &Db,
    partner_id: i64,
    role: MemberRole,
    token_hash: &str,
    invited_by: Option<i64>,
    now: Millis,
    expires_at: Millis,
) -> Result<Invitation, sqlx::Error> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO member_invitations (partner_id, role, token_hash, invited_by, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(partner_id)
    .bind(role.as_str())
    .bind(token_hash)
    .bind(invited_by)
    .bind(now)
    .bind(expires_at)
    .fetch_one(db.writer())
    .await?;
    Ok(Invitation { id, role, created_at: now, expires_at })
}

/// What accepting an invitation came to.
pub enum Accepted {
    /// `phone` is now a member (or already was one: the invitation's role is not applied over theirs).
    Member(Member),
    /// No such invitation, or it was used, or it has expired.
    Unusable,
}

/// Uses the invitation with this digest for `phone`: once, before it expires. With `name`, the member's
/// display name (over the one they had, when the phone already was a member).
pub async fn accept(
    db: &Db,
    token_hash: &str,
    phone: &str,
    name: Option<&str>,
    now: Millis,
) -> Result<Accepted, sqlx::Error> {
    let mut tx = db.begin().await?;
    let row = sqlx::query(
        "SELECT id, partner_id, role FROM member_invitations \
         WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2",
    )
    .bind(token_hash)
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else { return Ok(Accepted::Unusable) };
    let (invitation, partner_id): (i64, i64) = (row.try_get("id")?, row.try_get("partner_id")?);
    let role: String = row.try_get("role")?;
    // Marked used first, guarded by `used_at IS NULL`: of two racing acceptances only one goes on.
    let marked = sqlx::query("UPDATE member_invitations SET used_at = $1 WHERE id = $2 AND used_at IS NULL")
        .bind(now)
        .bind(invitation)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if marked == 0 {
        return Ok(Accepted::Unusable);
    }
    sqlx::query(
        "INSERT INTO members (partner_id, phone, role, created_at, name) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (partner_id, phone) DO UPDATE SET name = COALESCE(excluded.name, members.name)",
    )
    .bind(partner_id)
    .bind(phone)
    .bind(role)
    .bind(now)
    .bind(name)
    .execute(&mut *tx)
    .await?;
    let sql =
        const_format::concatcp!("SELECT ", MEMBER_COLUMNS, " FROM members m WHERE m.partner_id = $1 AND m.phone = $2");
    let member = member_from_row(&sqlx::query(sql).bind(partner_id).bind(phone).fetch_one(&mut *tx).await?)?;
    sqlx::query("UPDATE member_invitations SET used_by = $1 WHERE id = $2")
        .bind(member.id)
        .bind(invitation)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Accepted::Member(member))
}

/// The memberships of `phone`, with their partners, oldest first.
pub async fn memberships(db: &Db, phone: &str) -> Result<Vec<(Member, String)>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT ",
        MEMBER_COLUMNS,
        ", p.code FROM members m JOIN partners p ON p.id = m.partner_id WHERE m.phone = $1 ORDER BY m.id"
    );
    let rows = sqlx::query(sql).bind(phone).fetch_all(db.reader()).await?;
    rows.iter().map(|r| Ok((member_from_row(r)?, r.try_get("code")?))).collect()
}

/// A member by id, whichever partner's.
pub async fn find(db: &Db, member_id: i64) -> Result<Option<Member>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", MEMBER_COLUMNS, " FROM members m WHERE m.id = $1");
    sqlx::query(sql).bind(member_id).fetch_optional(db.reader()).await?.as_ref().map(member_from_row).transpose()
}

/// The partner's members, oldest first.
pub async fn list(db: &Db, partner_id: i64) -> Result<Vec<Member>, sqlx::Error> {
    let sql =
        const_format::concatcp!("SELECT ", MEMBER_COLUMNS, " FROM members m WHERE m.partner_id = $1 ORDER BY m.id");
    let rows = sqlx::query(sql).bind(partner_id).fetch_all(db.reader()).await?;
    rows.iter().map(member_from_row).collect()
}

/// What changing or removing a member came to.
pub enum Changed {
    Done(Option<Member>),
    NotFound,
    /// It would leave the partner without an owner.
    LastOwner,
}

/// Whether the partner has an owner other than `member_id`.
async fn another_owner(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    partner_id: i64,
    member_id: i64,
) -> Result<bool, sqlx::Error> {
    let n: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE partner_id = $1 AND role = 'owner' AND id <> $2")
            .bind(partner_id)
            .bind(member_id)
            .fetch_one(&mut **tx)
            .await?;
    Ok(n > 0)
}

async fn find_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    partner_id: i64,
    member_id: i64,
) -> Result<Option<Member>, sqlx::Error> {
    let sql =
        const_format::concatcp!("SELECT ", MEMBER_COLUMNS, " FROM members m WHERE m.id = $1 AND m.partner_id = $2");
    sqlx::query(sql)
        .bind(member_id)
        .bind(partner_id)
        .fetch_optional(&mut **tx)
        .await?
        .as_ref()
        .map(member_from_row)
        .transpose()
}

/// Gives a member another role (and a name, when given), and the keys they made with it; never takes the
/// last owner's.
pub async fn update(
    db: &Db,
    partner_id: i64,
    member_id: i64,
    role: Option<MemberRole>,
    name: Option<&str>,
) -> Result<Changed, sqlx::Error> {
    let mut tx = db.begin().await?;
    let Some(member) = find_in(&mut tx, partner_id, member_id).await? else { return Ok(Changed::NotFound) };
    if let Some(role) = role {
        if member.role == MemberRole::Owner
            && role != MemberRole::Owner
            && !another_owner(&mut tx, partner_id, member_id).await?
        {
            return Ok(Changed::LastOwner);
        }
        sqlx::query("UPDATE members SET role = $1 WHERE id = $2")
            .bind(role.as_str())
            .bind(member_id)
            .execute(&mut *tx)
            .await?;
        // The keys they made act with their role, from now on.
        sqlx::query("UPDATE partner_keys SET role = $1 WHERE created_by = $2")
            .bind(role.as_str())
            .bind(member_id)
            .execute(&mut *tx)
            .await?;
    }
    if let Some(name) = name {
        sqlx::query("UPDATE members SET name = $1 WHERE id = $2").bind(name).bind(member_id).execute(&mut *tx).await?;
    }
    let member = find_in(&mut tx, partner_id, member_id).await?;
    tx.commit().await?;
    Ok(Changed::Done(member))
}

/// Removes a member, ends their sessions, revokes the API keys they made, forgets their passkeys and
/// unpublishes the agent devices of their browsers (their audit entries stay, naming them by id); never the
/// last owner.
pub async fn remove(db: &Db, partner_id: i64, member_id: i64, now: Millis) -> Result<Changed, sqlx::Error> {
    let mut tx = db.begin().await?;
    let Some(member) = find_in(&mut tx, partner_id, member_id).await? else { return Ok(Changed::NotFound) };
    if member.role == MemberRole::Owner && !another_owner(&mut tx, partner_id, member_id).await? {
        return Ok(Changed::LastOwner);
    }
    end_sessions_in(&mut tx, member_id, now).await?;
    // The API keys they made stop working with them (a key acts for its member).
    sqlx::query("UPDATE partner_keys SET revoked_at = $1 WHERE created_by = $2 AND revoked_at IS NULL")
        .bind(now)
        .bind(member_id)
        .execute(&mut *tx)
        .await?;
    // The member's row goes; what pointed at it keeps its history without the link (the schema's foreign keys
    // have no ON DELETE rule, and SQLite cannot add one without rebuilding each table).
    for unlink in [
        "UPDATE audit_log SET member_id = NULL WHERE member_id = $1",
        "UPDATE member_invitations SET invited_by = NULL WHERE invited_by = $1",
        "UPDATE member_invitations SET used_by = NULL WHERE used_by = $1",
        "UPDATE conversations SET assignee_id = NULL WHERE assignee_id = $1",
        "UPDATE conversation_notes SET member_id = NULL WHERE member_id = $1",
    ] {
        sqlx::query(unlink).bind(member_id).execute(&mut *tx).await?;
    }
    sqlx::query("DELETE FROM member_sessions WHERE member_id = $1").bind(member_id).execute(&mut *tx).await?;
    // The agent devices of the member's browsers: no content key made from now on is wrapped to them.
    sqlx::query("DELETE FROM agent_devices WHERE member_id = $1").bind(member_id).execute(&mut *tx).await?;
    // Their passkeys, and any passkey ceremony they had begun.
    for gone in
        ["DELETE FROM member_passkeys WHERE member_id = $1", "DELETE FROM passkey_ceremonies WHERE member_id = $1"]
    {
        sqlx::query(gone).bind(member_id).execute(&mut *tx).await?;
    }
    sqlx::query("DELETE FROM members WHERE id = $1").bind(member_id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(Changed::Done(Some(member)))
}

/// Starts a session for `member_id`, ending at `ends_at` at the latest.
#[allow(clippy::too_many_arguments)]
pub async fn start_session(
    db: &Db,
    member_id: i64,
    token_hash: &str,
    now: Millis,
    ends_at: Millis,
    address: &str,
    user_agent: Option<&str>,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO member_sessions (member_id, token_hash, created_at, last_seen_at, ends_at, address, user_agent) \
         VALUES ($1, $2, $3, $3, $4, $5, $6) RETURNING id",
    )
    .bind(member_id)
    .bind(token_hash)
    .bind(now)
    .bind(ends_at)
    .bind(address)
    .bind(user_agent)
    .fetch_one(db.writer())
    .await
}

/// The live session with this token digest: not ended, before its absolute end, and seen within `idle` ms.
pub async fn find_session(
    db: &Db,
    token_hash: &str,
    now: Millis,
    idle: Millis,
) -> Result<Option<Session>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT s.id AS session_id, s.token_hash, s.created_at AS session_created_at, s.last_seen_at, s.ends_at, ",
        MEMBER_COLUMNS,
        ", p.code, p.name AS partner_name, p.is_platform, p.webhook_url \
         FROM member_sessions s JOIN members m ON m.id = s.member_id JOIN partners p ON p.id = m.partner_id \
         WHERE s.token_hash = $1 AND s.ended_at IS NULL AND s.ends_at > $2 AND s.last_seen_at > $3"
    );
    let row = sqlx::query(sql).bind(token_hash).bind(now).bind(now - idle).fetch_optional(db.reader()).await?;
    let Some(row) = row else { return Ok(None) };
    let member = member_from_row(&row)?;
    Ok(Some(Session {
        id: row.try_get("session_id")?,
        partner: Partner {
            id: member.partner_id,
            code: row.try_get("code")?,
            name: row.try_get("partner_name")?,
            is_platform: row.try_get::<i64, _>("is_platform")? != 0,
            webhook_url: row.try_get("webhook_url")?,
        },
        member,
        token_hash: row.try_get("token_hash")?,
        created_at: row.try_get("session_created_at")?,
        last_seen_at: row.try_get("last_seen_at")?,
        ends_at: row.try_get("ends_at")?,
    }))
}

/// Notes activity on a session (what its idle lifetime counts from).
pub async fn seen(db: &Db, session_id: i64, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE member_sessions SET last_seen_at = $1 WHERE id = $2 AND last_seen_at < $1")
        .bind(now)
        .bind(session_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Ends one session (signing out).
pub async fn end_session(db: &Db, session_id: i64, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE member_sessions SET ended_at = $1 WHERE id = $2 AND ended_at IS NULL")
        .bind(now)
        .bind(session_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

async fn end_sessions_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    member_id: i64,
    now: Millis,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query("UPDATE member_sessions SET ended_at = $1 WHERE member_id = $2 AND ended_at IS NULL")
        .bind(now)
        .bind(member_id)
        .execute(&mut **tx)
        .await?
        .rows_affected())
}

/// Ends every session of a member ("sign out everywhere"); how many were live.
pub async fn end_sessions(db: &Db, member_id: i64, now: Millis) -> Result<u64, sqlx::Error> {
    let mut tx = db.begin().await?;
    let n = end_sessions_in(&mut tx, member_id, now).await?;
    tx.commit().await?;
    Ok(n)
}

/// One entry of the audit log.
#[derive(Debug, Clone)]
pub struct AuditEntry {
    pub id: i64,
    pub member_id: Option<i64>,
    pub phone: Option<String>,
    /// The member's display name now.
    pub name: Option<String>,
    /// The API key the call was made with (none: a member's session), and its prefix.
    pub key_id: Option<i64>,
    pub key_prefix: Option<String>,
    pub action: String,
    pub target: String,
    pub status: i64,
    pub address: Option<String>,
    pub at: Millis,
}

/// What a member changed, or tried to (with their session, or with an API key: `key_id`, and the member who
/// made it, if any): `action` is the route (`POST /api/v1/bots/{code}/token`), `target` the path.
#[derive(Debug)]
pub struct AuditWrite {
    pub partner_id: i64,
    pub member_id: Option<i64>,
    pub key_id: Option<i64>,
    pub action: String,
    pub target: String,
    pub status: u16,
    pub address: String,
    pub at: Millis,
}

/// Writes an audit entry in the caller's transaction.
pub async fn audit_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, e: &AuditWrite) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO audit_log (partner_id, member_id, key_id, action, target, status, address, at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(e.partner_id)
    .bind(e.member_id)
    .bind(e.key_id)
    .bind(&e.action)
    .bind(&e.target)
    .bind(e.status as i64)
    .bind(&e.address)
    .bind(e.at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The group commit of audit entries (`store::writer`): the entries of requests answered together share a
/// transaction, each written before its answer goes out.
pub fn audit_writer(db: Db) -> super::writer::GroupCommit<AuditWrite, ()> {
    super::writer::GroupCommit::spawn(db, 256, |tx, e| Box::pin(audit_in(tx, e)))
}

/// The partner's audit log, newest first, `limit` entries older than `before` (an entry id).
pub async fn audit_log(
    db: &Db,
    partner_id: i64,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditEntry>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT a.id, COALESCE(a.member_id, k.created_by) AS member_id, m.phone, m.name, a.key_id, k.key_prefix, a.action, \
         a.target, a.status, a.address, a.at FROM audit_log a LEFT JOIN partner_keys k ON k.id = a.key_id \
         LEFT JOIN members m ON m.id = COALESCE(a.member_id, k.created_by) \
         WHERE a.partner_id = $1 AND a.id < $2 ORDER BY a.id DESC LIMIT $3",
    )
    .bind(partner_id)
    .bind(before.unwrap_or(i64::MAX))
    .bind(limit)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            Ok(AuditEntry {
                id: r.try_get("id")?,
                member_id: r.try_get("member_id")?,
                phone: r.try_get("phone")?,
                name: r.try_get("name")?,
                key_id: r.try_get("key_id")?,
                key_prefix: r.try_get("key_prefix")?,
                action: r.try_get("action")?,
                target: r.try_get("target")?,
                status: r.try_get("status")?,
                address: r.try_get("address")?,
                at: r.try_get("at")?,
            })
        })
        .collect()
}
