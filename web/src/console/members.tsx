// Owners only: the partner's members (invite, change roles, remove) and the audit log.
import { useEffect, useState } from "preact/hooks";
import { errorText, when } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { del, enc, get, patch, post, type AuditEntry, type Invitation, type Member, type Page } from "./api";
import { useList, useTitle } from "./page";

export function Members({ self }: { self: Member }) {
  const { list: members, error, act } = useList<Member>("Members", "/members");
  const [role, setRole] = useState("agent");
  const [made, setMade] = useState<Invitation | null>(null);
  const [copied, setCopied] = useState(false);
  return (
    <section class="page" aria-labelledby="members-h">
      <h1 id="members-h">Members</h1>
      <Alert text={error} />
      <table>
        <caption class="sr-only">Members and their roles</caption>
        <Head cols={["Name", "Phone", "Role", "Since"]} actions />
        <tbody>
          {members.map((m) => (
            <tr>
              <td>{m.name ?? <span class="meta">no name yet</span>}</td>
              <td>{m.phone}</td>
              <td>
                <select aria-label={`Role of ${m.name || m.phone}`} value={m.role} onChange={(e) => act(() => patch(`/members/${m.id}`, { role: e.currentTarget.value }))}>
                  <option value="owner">Owner</option>
                  <option value="admin">Admin</option>
                  <option value="agent">Agent</option>
                </select>
              </td>
              <td>{when(m.created_at)}</td>
              <td>
                {m.id !== self.id ? (
                  <button type="button" onClick={() => confirm(`Remove ${m.name || m.phone}? Their sessions end at once.`) && act(() => del(`/members/${m.id}`))}>
                    Remove {m.name || m.phone}
                  </button>
                ) : (
                  <span class="meta">You</span>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form
        class="invite card"
        onSubmit={(e) => {
          e.preventDefault();
          setCopied(false);
          act(async () => setMade(await post<Invitation>("/members/invitations", { role })));
        }}
      >
        <h2>Invite someone</h2>
        <label for="invite-role">Role</label>
        <select id="invite-role" value={role} onChange={(e) => setRole(e.currentTarget.value)}>
            <option value="agent">Agent: conversations and contacts</option>
            <option value="admin">Admin: everything but members</option>
            <option value="owner">Owner: everything</option>
          </select>
        <button class="primary">Create invitation</button>
        {made ? (
          <div class="made" role="status">
            <p>
              Send this link to the person you invite ({made.role}). It works once, until {when(made.expires_at)}, and is not shown again.
            </p>
            <input class="mono" readOnly value={made.link} aria-label="Invitation link" onFocus={(e) => e.currentTarget.select()} />
            <button
              type="button"
              onClick={() =>
                navigator.clipboard?.writeText(made.link).then(
                  () => setCopied(true),
                  () => setCopied(false),
                )
              }
            >
              {copied ? "Copied" : "Copy link"}
            </button>
          </div>
        ) : null}
      </form>
    </section>
  );
}

export function Audit() {
  const [entries, setEntries] = useState<AuditEntry[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = (cursor?: string) =>
    get<Page<AuditEntry>>(`/audit-log?limit=50${cursor ? `&cursor=${enc(cursor)}` : ""}`).then(
      (p) => {
        setEntries((old) => (cursor ? [...old, ...p.data] : p.data));
        setNext(p.next_cursor ?? null);
      },
      (e) => setError(errorText(e)),
    );
  useTitle("Audit log");
  useEffect(() => void load(), []);
  return (
    <section class="page" aria-labelledby="audit-h">
      <h1 id="audit-h">Audit log</h1>
      <p class="hint">Every change made in the console or with an API key, and every attempt refused for its role, newest first.</p>
      <Alert text={error} />
      <table>
        <caption class="sr-only">What members and keys changed</caption>
        <Head cols={["When", "Who", "What", "Answer", "From"]} />
        <tbody>
          {entries.map((e) => (
            <tr>
              <td>{when(e.at)}</td>
              <td>
                {e.phone ? (e.name ? `${e.name} (${e.phone})` : e.phone) : e.member_id ? "a removed member" : e.key_id ? "the command line's key" : "a removed member"}
                {e.key_prefix ? (
                  <>
                    <br />
                    <span class="meta">
                      with key <span class="mono">{e.key_prefix}</span>
                    </span>
                  </>
                ) : null}
              </td>
              <td>
                <span class="mono">{e.action}</span>
                <br />
                <span class="meta">{e.target}</span>
              </td>
              <td>{e.status}</td>
              <td>{e.address ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {next ? (
        <button type="button" onClick={() => load(next)}>
          Older entries
        </button>
      ) : null}
    </section>
  );
}
