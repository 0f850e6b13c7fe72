// The partner console at /console/: a partner's members sign in with their phone and a one-time code
// (the first time with the invitation link an owner gave them), agents answer conversations — filter,
// assign, reply, keep internal notes, close — and owners manage members and read the audit log. It loads
// only on /console/ and shares the end-user app's toolchain, styles and generated API types.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import "../styles.css";
import "./console.css";
import { Alert, Head, ShownOnce, acting, errorText, when } from "../pages/ui";
import {
  ApiError,
  del,
  enc,
  get,
  onSignedOut,
  patch,
  post,
  type AuditEntry,
  type Conversation,
  type Invitation,
  type Member,
  type MemberSession,
  type Note,
  type Page,
  type Thread,
  type ThreadMessage,
  type TestOutcome,
  type WebhookDelivery,
  type WebhookDeliveryDetail,
  type WebhookSettings,
  type Bot,
  type ApiKey,
  type Account,
  type ApiKeyCreated,
  type CannedReply,
  type Payment,
  type Template,
  type BotCreated,
  type BotToken,
  put,
  upload,
} from "../pages/api";
import { startLive, stopLive, useLive, useLiveStatus } from "./live";

// ---- Routing: /console/, /console/c/{id}, /console/members, /console/audit ----

const listeners = new Set<() => void>();
function go(path: string) {
  history.pushState(null, "", path);
  listeners.forEach((l) => l());
}
function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const l = () => setPath(location.pathname);
    listeners.add(l);
    addEventListener("popstate", l);
    return () => {
      listeners.delete(l);
      removeEventListener("popstate", l);
    };
  }, []);
  return path;
}
/** A link that moves within the console without reloading it. */
function Link({ href, children, ...rest }: { href: string; children: any; class?: string; "aria-current"?: "page" | undefined }) {
  return (
    <a
      href={href}
      {...rest}
      onClick={(e) => {
        if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        go(href);
      }}
    >
      {children}
    </a>
  );
}

/** Calls `load` now, every `ms` while the page is visible, and when the page comes back into view. */
function usePoll(load: () => void, ms: number, deps: unknown[]) {
  useEffect(() => {
    load();
    const timer = setInterval(() => document.visibilityState === "visible" && load(), ms);
    const back = () => document.visibilityState === "visible" && load();
    document.addEventListener("visibilitychange", back);
    return () => {
      clearInterval(timer);
      document.removeEventListener("visibilitychange", back);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
}


// ---- Sign in ----

function SignIn({ onSignedIn }: { onSignedIn: (s: MemberSession) => void }) {
  const invitation = location.hash.startsWith("#inv_") ? location.hash.slice(1) : null;
  const [phone, setPhone] = useState("");
  const [code, setCode] = useState("");
  const [partner, setPartner] = useState("");
  const [askPartner, setAskPartner] = useState(false);
  const [sent, setSent] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);

  const send = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await post("/auth/otp/start", { phone: phone.trim() });
      setSent(true);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  const signIn = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body: Record<string, string> = { phone: phone.trim(), code: code.trim() };
      if (invitation) body.invitation = invitation;
      if (partner.trim()) body.partner = partner.trim();
      const session = await post<MemberSession>("/members/sessions", body);
      history.replaceState(null, "", "/console/");
      onSignedIn(session);
    } catch (err) {
      if (err instanceof ApiError && err.field === "partner") setAskPartner(true);
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="console-signin card">
      <h1 tabIndex={-1} ref={heading}>
        Hubbub console
      </h1>
      <p class="muted">{invitation ? "You were invited to a partner's console. Sign in with your phone to accept." : "Sign in with your phone."}</p>
      {!sent ? (
        <form onSubmit={send}>
          <label for="phone">Phone number</label>
          <input id="phone" type="tel" autocomplete="tel" placeholder="+15551234567" value={phone} onInput={(e) => setPhone(e.currentTarget.value)} required />
          <button class="primary" disabled={busy}>
            Send code
          </button>
        </form>
      ) : (
        <form onSubmit={signIn}>
          <p class="hint">We sent a code to {phone}.</p>
          <label for="code">Code</label>
          <input id="code" inputMode="numeric" autocomplete="one-time-code" value={code} onInput={(e) => setCode(e.currentTarget.value)} required />
          {askPartner ? (
            <>
              <label for="partner">Partner code</label>
              <input id="partner" value={partner} onInput={(e) => setPartner(e.currentTarget.value)} required />
            </>
          ) : null}
          <button class="primary" disabled={busy}>
            Sign in
          </button>
        </form>
      )}
      <Alert text={error} />
    </main>
  );
}

// ---- The signed-in console ----

function Shell({ session, onSignOut }: { session: MemberSession; onSignOut: () => void }) {
  const path = usePath();
  const owner = session.member.role === "owner";
  const admin = owner || session.member.role === "admin";
  const [members, setMembers] = useState<Member[]>([]);
  const live = useLiveStatus();
  useEffect(() => {
    get<Page<Member>>("/members").then((p) => setMembers(p.data), () => undefined);
  }, [path]);
  useEffect(() => {
    // Ended by the server (signed out elsewhere, or idle): the next request says so and signs this page out.
    const check = () => void get("/members/me").catch(() => undefined);
    startLive(check, check);
    return stopLive;
  }, []);
  const signOut = async (everywhere: boolean) => {
    stopLive();
    await del(everywhere ? "/members/sessions" : "/members/sessions/current").catch(() => undefined);
    onSignOut();
  };
  const nav = [
    { href: "/console/", label: "Conversations", on: path === "/console/" || path.startsWith("/console/c/") },
    ...(admin
      ? [
          { href: "/console/bots", label: "Bots", on: path.startsWith("/console/bots") },
          { href: "/console/webhooks", label: "Webhooks", on: path.startsWith("/console/webhooks") },
          { href: "/console/keys", label: "API keys", on: path.startsWith("/console/keys") },
          { href: "/console/canned", label: "Canned replies", on: path.startsWith("/console/canned") },
          { href: "/console/messages", label: "Messages", on: path.startsWith("/console/messages") },
          { href: "/console/templates", label: "Templates", on: path.startsWith("/console/templates") },
        ]
      : []),
    ...(owner
      ? [
          { href: "/console/members", label: "Members", on: path.startsWith("/console/members") },
          { href: "/console/audit", label: "Audit log", on: path.startsWith("/console/audit") },
        ]
      : []),
  ];
  const conversation = path.match(/^\/console\/c\/(\d+)$/)?.[1];
  let page;
  if (path.startsWith("/console/members") && owner) page = <Members self={session.member} />;
  else if (path.startsWith("/console/audit") && owner) page = <Audit />;
  else if (path.startsWith("/console/webhooks") && admin) page = <Webhooks />;
  else if (path.startsWith("/console/bots") && admin) page = <Bots />;
  else if (path.startsWith("/console/keys") && admin) page = <Keys />;
  else if (path.startsWith("/console/canned") && admin) page = <Canned />;
  else if (path.startsWith("/console/messages") && admin) page = <Messages />;
  else if (path.startsWith("/console/templates") && admin) page = <Templates />;
  else page = <Inbox session={session} members={members} open={conversation ? Number(conversation) : null} />;
  return (
    <div class="console">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="console-top">
        <strong>{session.partner.name}</strong>
        <nav aria-label="Console">
          {nav.map((n) => (
            <Link href={n.href} class={n.on ? "on" : ""} aria-current={n.on ? "page" : undefined}>
              {n.label}
            </Link>
          ))}
        </nav>
        {live === "reconnecting" ? (
          <span class="live-note" role="status">
            Reconnecting…
          </span>
        ) : null}
        <span class="meta">
          {session.member.name || session.member.phone} · {session.member.role}
        </span>
        <button type="button" onClick={() => signOut(false)}>
          Sign out
        </button>
        <button type="button" onClick={() => signOut(true)}>
          Sign out everywhere
        </button>
      </header>
      <main id="main">{page}</main>
    </div>
  );
}

const who = (members: Member[], id: number | null | undefined) => {
  const m = members.find((x) => x.id === id);
  return m ? m.name || m.phone : id ? `member ${id}` : "Unassigned";
};

function Inbox({ session, members, open }: { session: MemberSession; members: Member[]; open: number | null }) {
  const [state, setState] = useState("open");
  const [assigned, setAssigned] = useState("");
  const [q, setQ] = useState("");
  const [search, setSearch] = useState("");
  const [list, setList] = useState<Conversation[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [changed, setChanged] = useState(0);
  const query = new URLSearchParams({ limit: "50" });
  if (state) query.set("state", state);
  if (assigned) query.set("assigned", assigned);
  if (search) query.set("q", search);
  const load = () =>
    get<Page<Conversation>>(`/conversations?${query}`).then(
      (p) => {
        setList(p.data);
        setError(null);
      },
      (e) => setError(errorText(e)),
    );
  useEffect(() => void load(), [query.toString(), open, changed]);
  // Live: any change to a conversation fetches the list again (a burst of events, once).
  const soon = useRef<number | undefined>(undefined);
  useLive(() => {
    clearTimeout(soon.current);
    soon.current = window.setTimeout(load, 100);
  }, [query.toString()]);
  const unread = (list ?? []).reduce((n, c) => n + c.unread, 0);
  useEffect(() => {
    document.title = `${unread ? `(${unread}) ` : ""}Conversations · ${session.partner.name} · Hubbub console`;
  }, [unread, session.partner.name]);
  return (
    <div class={"inbox" + (open ? " with-thread" : "")}>
      <section class="conversation-list" aria-labelledby="conversations-h">
        <h1 id="conversations-h">Conversations</h1>
        <form
          class="filters"
          role="search"
          onSubmit={(e) => {
            e.preventDefault();
            setSearch(q.trim());
          }}
        >
          <div class="field">
            <label for="filter-state">State</label>
            <select
              id="filter-state" value={state} onChange={(e) => setState(e.currentTarget.value)}>
              <option value="open">Open</option>
              <option value="pending">Pending</option>
              <option value="closed">Closed</option>
              <option value="">All</option>
            </select>
          </div>
          <div class="field">
            <label for="filter-assigned">Assigned</label>
            <select
              id="filter-assigned" value={assigned} onChange={(e) => setAssigned(e.currentTarget.value)}>
              <option value="">Everyone</option>
              <option value="me">Me</option>
              <option value="none">Unassigned</option>
            </select>
          </div>
          <div class="field">
            <label for="filter-q">Search</label>
            <input
              id="filter-q" type="search" value={q} placeholder="Subject, phone or words" onInput={(e) => setQ(e.currentTarget.value)} />
          </div>
          <button type="submit">Search</button>
        </form>
        <Alert text={error} />
        {list === null ? (
          <p class="muted">Loading…</p>
        ) : list.length === 0 ? (
          <p class="muted">No conversations here.</p>
        ) : (
          <ul class="rows">
            {list.map((c) => (
              <li class={c.conversation_id === open ? "on" : ""}>
                <Link href={`/console/c/${c.conversation_id}`} aria-current={c.conversation_id === open ? "page" : undefined}>
                  <span class="row-main">
                    <strong>{c.subject || c.phone}</strong>
                    {c.unread ? <span class="badge">{c.unread} unread</span> : null}
                  </span>
                  <span class="meta">
                    {c.phone} · {c.state} · {who(members, c.assignee_id)} · {when(c.last_message_at)}
                  </span>
                </Link>
              </li>
            ))}
          </ul>
        )}
      </section>
      {open ? <ThreadView key={open} id={open} members={members} self={session.member} onChange={() => setChanged((n) => n + 1)} /> : null}
    </div>
  );
}

/** One conversation: its messages, reply, assignment, closing and notes; `onChange` when it changed (the list refreshes). */
function ThreadView({ id, members, self, onChange }: { id: number; members: Member[]; self: Member; onChange: () => void }) {
  const [thread, setThread] = useState<Thread | null>(null);
  const [notes, setNotes] = useState<Note[]>([]);
  const [reply, setReply] = useState("");
  const [note, setNote] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const [canned, setCanned] = useState<CannedReply[]>([]);
  const heading = useRef<HTMLHeadingElement>(null);
  const replyBox = useRef<HTMLTextAreaElement>(null);
  useEffect(() => {
    get<Page<CannedReply>>("/canned-replies").then((p) => setCanned(p.data), () => undefined);
  }, []);
  const load = () =>
    Promise.all([get<Thread>(`/conversations/${id}`), get<Page<Note>>(`/conversations/${id}/notes`)]).then(
      ([t, n]) => {
        setThread(t);
        setNotes(n.data);
        // What the user wrote is read once an agent has it open.
        if (t.unread > 0) post(`/conversations/${id}/read`).then(onChange, () => undefined);
      },
      (e) => setError(errorText(e)),
    );
  useEffect(() => void load(), [id]);
  useLive((e) => {
    if (e.kind === "fresh" || (e.kind === "conversation.message" ? e.data.conversation : e.data).conversation_id === id) load();
  }, [id]);
  useEffect(() => heading.current?.focus(), [id]);
  const act = acting(() => load().then(onChange), setError, setStatus);
  if (!thread) return <section class="thread">{error ? <p role="alert">{error}</p> : <p class="muted">Loading…</p>}</section>;
  return (
    <section class="thread" aria-labelledby="thread-h">
      <h2 id="thread-h" tabIndex={-1} ref={heading}>
        {thread.subject || "Conversation"} · {thread.phone}
      </h2>
      <div class="thread-tools">
        <span class="status-pill">{thread.state}</span>
        <div class="field">
          <label for="assignee">Assigned to</label>
          <select
            id="assignee"
            value={thread.assignee_id ? String(thread.assignee_id) : ""}
            onChange={(e) => {
              const v = e.currentTarget.value;
              act(() => patch(`/conversations/${id}`, { assignee_id: v ? Number(v) : null }), v ? `Assigned to ${who(members, Number(v))}.` : "Unassigned.");
            }}
          >
            <option value="">Unassigned</option>
            {members.map((m) => (
              <option value={String(m.id)}>
                {m.id === self.id ? `Me (${m.name || m.phone})` : m.name || m.phone}
              </option>
            ))}
          </select>
        </div>
        {thread.state !== "closed" ? (
          <button type="button" onClick={() => act(() => patch(`/conversations/${id}`, { state: "closed" }), "Conversation closed.")}>
            Close conversation
          </button>
        ) : null}
      </div>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
      <ol class="messages-thread" aria-label="Messages">
        {thread.messages.map((m) => (
          <li class={m.direction === "in" ? "from-user" : "from-agent"}>
            <span class="meta">
              {m.direction === "in" ? thread.phone : "Agent"} · {when(m.created_at)}
              {m.direction === "out" ? ` · ${m.state}` : ""}
            </span>
            <p>{m.encryption === "e2e" ? "Encrypted message (open it on a device with the agent key)" : m.body ?? `[${m.content_type}]`}</p>
          </li>
        ))}
      </ol>
      <form
        class="reply"
        onSubmit={(e) => {
          e.preventDefault();
          const body = reply.trim();
          if (!body) return;
          act(async () => {
            await post(`/conversations/${id}/messages`, { body, idempotency_key: crypto.randomUUID() });
            setReply("");
          }, "Reply sent.");
        }}
      >
        <label for="reply">Reply to {thread.phone}</label>
        <textarea id="reply" ref={replyBox} rows={3} value={reply} onInput={(e) => setReply(e.currentTarget.value)} />
        {canned.length ? (
          <div class="field">
            <label for="canned">Insert a canned reply</label>
            <select
              id="canned"
              value=""
              onChange={(e) => {
                const picked = canned.find((c) => String(c.id) === e.currentTarget.value);
                if (!picked) return;
                setReply((r) => (r.trim() ? `${r.trimEnd()}\n${picked.body}` : picked.body));
                replyBox.current?.focus();
              }}
            >
              <option value="">Choose…</option>
              {canned.map((c) => (
                <option value={String(c.id)}>/{c.shortcut}</option>
              ))}
            </select>
          </div>
        ) : null}
        <button class="primary">Send reply</button>
      </form>
      <Contact phone={thread.phone} />
      <section class="notes" aria-labelledby="notes-h">
        <h3 id="notes-h">Internal notes</h3>
        <p class="hint">Only your team sees these; the user never does.</p>
        <ul>
          {notes.map((n) => (
            <li>
              <span class="meta">
                {n.phone ?? "API"} · {when(n.created_at)}
              </span>
              <p>{n.body}</p>
            </li>
          ))}
        </ul>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            const body = note.trim();
            if (!body) return;
            act(async () => {
              await post(`/conversations/${id}/notes`, { body });
              setNote("");
            }, "Note added.");
          }}
        >
          <label for="note">Add a note</label>
          <textarea id="note" rows={2} value={note} onInput={(e) => setNote(e.currentTarget.value)} />
          <button>Add note</button>
        </form>
      </section>
    </section>
  );
}

/** Who the user is to this partner: the account, its custom fields, and the latest hub messages sent to them. */
function Contact({ phone }: { phone: string }) {
  const [account, setAccount] = useState<Account | null>(null);
  const [messages, setMessages] = useState<ThreadMessage[]>([]);
  const [payments, setPayments] = useState<Payment[]>([]);
  useEffect(() => {
    get<Account>(`/accounts/${encodeURIComponent(phone)}`).then(setAccount, () => setAccount(null));
    get<Page<Payment>>(`/payments?phone=${encodeURIComponent(phone)}&limit=5`).then((p) => setPayments(p.data), () => setPayments([]));
    // Hub messages only (what the partner sent outside conversations), the latest five.
    get<Page<ThreadMessage>>(`/messages?phone=${encodeURIComponent(phone)}&limit=50`).then(
      (p) => setMessages(p.data.filter((m) => m.direction === "out" && m.conversation_id == null).slice(0, 5)),
      () => setMessages([]),
    );
  }, [phone]);
  const fields = Object.entries((account?.fields ?? {}) as Record<string, unknown>);
  return (
    <section class="contact" aria-labelledby="contact-h">
      <h3 id="contact-h">Contact</h3>
      {account ? (
        <dl>
          <dt>Phone</dt>
          <dd>{account.phone}</dd>
          <dt>Name</dt>
          <dd>{account.display_name ?? "—"}</dd>
          <dt>Account</dt>
          <dd>{account.state}</dd>
          {fields.map(([k, v]) => (
            <>
              <dt>{k}</dt>
              <dd>{typeof v === "object" ? JSON.stringify(v) : String(v)}</dd>
            </>
          ))}
        </dl>
      ) : (
        <p class="muted">No account linked to this phone.</p>
      )}
      <h4>Latest messages sent to them</h4>
      {messages.length ? (
        <ul class="plain">
          {messages.map((m) => (
            <li class="meta">
              {when(m.created_at)} · {m.template_code ?? m.content_type} · {m.state}
              {m.channel ? ` by ${m.channel}` : ""}: {(m.rendered_body ?? m.body ?? "").slice(0, 80)}
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">None yet.</p>
      )}
      <h4>Payments</h4>
      {payments.length ? (
        <ul class="plain">
          {payments.map((p) => (
            <li class="meta">
              {when(p.created_at)} · {(p.amount_minor / 100).toFixed(2)} {p.currency} · {p.state} · {p.bot}
              {p.description ? `: ${p.description}` : ""}
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">None.</p>
      )}
    </section>
  );
}

/** The message log: filters by phone, state and words; a message's delivery attempts. */
function Messages() {
  const [phone, setPhone] = useState("");
  const [state, setState] = useState("");
  const [q, setQ] = useState("");
  const [query, setQuery] = useState(new URLSearchParams({ limit: "50" }));
  const [list, setList] = useState<ThreadMessage[] | null>(null);
  const [open, setOpen] = useState<ThreadMessage | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    document.title = "Messages · Hubbub console";
  }, []);
  useEffect(() => {
    get<Page<ThreadMessage>>(`/messages?${query}`).then(
      (p) => {
        setList(p.data);
        setError(null);
      },
      (e) => setError(errorText(e)),
    );
  }, [query.toString()]);
  return (
    <section class="page" aria-labelledby="messages-h">
      <h1 id="messages-h">Messages</h1>
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          const next = new URLSearchParams({ limit: "50" });
          if (phone.trim()) next.set("phone", phone.trim());
          if (state) next.set("state", state);
          if (q.trim()) next.set("q", q.trim());
          setQuery(next);
        }}
      >
        <div class="field">
          <label for="messages-phone">Phone</label>
          <input id="messages-phone" value={phone} placeholder="+15551230000" onInput={(e) => setPhone(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="messages-state">State</label>
          <select id="messages-state" value={state} onChange={(e) => setState(e.currentTarget.value)}>
            <option value="">Any</option>
            {["queued", "sent", "delivered", "read", "failed"].map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="messages-q">Words</label>
          <input id="messages-q" type="search" value={q} onInput={(e) => setQ(e.currentTarget.value)} />
        </div>
        <button type="submit">Filter</button>
      </form>
      <Alert text={error} />
      {list === null ? (
        <p class="muted">Loading…</p>
      ) : list.length === 0 ? (
        <p class="muted">No messages here.</p>
      ) : (
        <table>
          <Head cols={["Created", "Phone", "Channel", "State", "Text"]} actions />
          <tbody>
            {list.map((m) => (
              <tr>
                <td>{when(m.created_at)}</td>
                <td>{m.phone}</td>
                <td>{m.channel ?? "—"}</td>
                <td>{m.state}</td>
                <td class="pre">{(m.rendered_body ?? m.body ?? `[${m.content_type}]`).slice(0, 120)}</td>
                <td>
                  <button
                    type="button"
                    onClick={() =>
                      get<ThreadMessage>(`/messages/${m.message_id}?include=attempts`).then(setOpen, (e) => setError(errorText(e)))
                    }
                  >
                    Attempts<span class="sr-only"> of message {m.message_id}</span>
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {open ? (
        <article class="card" aria-labelledby="message-h">
          <h2 id="message-h">
            Message {open.message_id} to {open.phone}
          </h2>
          <p class="pre">{open.rendered_body ?? open.body ?? `[${open.content_type}]`}</p>
          {open.attempts?.length ? (
            <table>
              <Head cols={["When", "Channel", "Kind", "State", "Provider's id", "Error"]} />
              <tbody>
                {open.attempts.map((a) => (
                  <tr>
                    <td>{when(a.at)}</td>
                    <td>{a.channel}</td>
                    <td>{a.kind}</td>
                    <td>{a.state}</td>
                    <td class="mono">{a.provider_ref ?? "—"}</td>
                    <td>{a.error ?? "—"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p class="muted">No delivery attempt yet.</p>
          )}
          <button type="button" onClick={() => setOpen(null)}>
            Close
          </button>
        </article>
      ) : null}
    </section>
  );
}

/** Templates: their status and the review's decision; create a draft, submit it for review. */
function Templates() {
  const [list, setList] = useState<Template[]>([]);
  const [code, setCode] = useState("");
  const [channel, setChannel] = useState("inapp");
  const [category, setCategory] = useState("utility");
  const [lang, setLang] = useState("en");
  const [body, setBody] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const load = () => get<Page<Template>>("/templates?limit=100").then((p) => setList(p.data));
  useEffect(() => {
    document.title = "Templates · Hubbub console";
    load().catch((e) => setError(errorText(e)));
  }, []);
  const act = acting(load, setError, setStatus);
  return (
    <section class="page" aria-labelledby="templates-h">
      <h1 id="templates-h">Templates</h1>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
      <form
        class="card"
        onSubmit={(e) => {
          e.preventDefault();
          act(async () => {
            const made = await post<Template>("/templates", { code: code.trim(), channel, category, lang: lang.trim(), body });
            setCode("");
            setBody("");
            return `Template ${made.code} saved as a draft.`;
          });
        }}
      >
        <h2>New template</h2>
        <label for="template-code">Code</label>
        <input id="template-code" value={code} placeholder="order_shipped" onInput={(e) => setCode(e.currentTarget.value)} required />
        <label for="template-channel">Channel</label>
        <select id="template-channel" value={channel} onChange={(e) => setChannel(e.currentTarget.value)}>
          <option value="inapp">In the app</option>
          <option value="whatsapp">WhatsApp</option>
          <option value="sms">SMS</option>
        </select>
        <label for="template-category">Category</label>
        <select id="template-category" value={category} onChange={(e) => setCategory(e.currentTarget.value)}>
          <option value="utility">Utility</option>
          <option value="marketing">Marketing</option>
          <option value="authentication">Authentication</option>
        </select>
        <label for="template-lang">Language</label>
        <input id="template-lang" value={lang} onInput={(e) => setLang(e.currentTarget.value)} />
        <label for="template-body">Text</label>
        <textarea id="template-body" rows={3} value={body} placeholder="Hi {{name}}, your order has shipped." onInput={(e) => setBody(e.currentTarget.value)} required />
        <button class="primary">Save draft</button>
      </form>
      {list.length === 0 ? (
        <p class="muted">No templates yet.</p>
      ) : (
        <table>
          <Head cols={["Code", "Channel", "Language", "Status", "Text", "Decision"]} actions />
          <tbody>
            {list.map((t) => (
              <tr>
                <td class="mono">{t.code}</td>
                <td>{t.channel}</td>
                <td>{t.lang}</td>
                <td>
                  <span class="status-pill">{t.status}</span>
                </td>
                <td class="pre">{t.body}</td>
                <td>{t.rejection_reason ? `Rejected: ${t.rejection_reason}` : t.status === "approved" ? "Approved" : "—"}</td>
                <td>
                  {t.status === "draft" || t.status === "rejected" ? (
                    <button type="button" onClick={() => act(() => post(`/templates/${t.template_id}/submit`), `${t.code} submitted for review.`)}>
                      Submit<span class="sr-only"> {t.code}</span>
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function Members({ self }: { self: Member }) {
  const [members, setMembers] = useState<Member[]>([]);
  const [role, setRole] = useState("agent");
  const [made, setMade] = useState<Invitation | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  const load = () => get<Page<Member>>("/members").then((p) => setMembers(p.data), (e) => setError(errorText(e)));
  useEffect(() => {
    load();
    document.title = "Members · Hubbub console";
  }, []);
  const act = acting(load, setError);
  return (
    <section class="page" aria-labelledby="members-h">
      <h1 id="members-h">Members</h1>
      <Alert text={error} />
      <table>
        <caption class="sr-only">Members and their roles</caption>
        <Head cols={["Phone", "Name", "Role", "Since"]} actions />
        <tbody>
          {members.map((m) => (
            <tr>
              <td>{m.phone}</td>
              <td>{m.name ?? ""}</td>
              <td>
                <select aria-label={`Role of ${m.phone}`} value={m.role} onChange={(e) => act(() => patch(`/members/${m.id}`, { role: e.currentTarget.value }))}>
                  <option value="owner">Owner</option>
                  <option value="admin">Admin</option>
                  <option value="agent">Agent</option>
                </select>
              </td>
              <td>{when(m.created_at)}</td>
              <td>
                {m.id !== self.id ? (
                  <button type="button" onClick={() => confirm(`Remove ${m.phone}? Their sessions end at once.`) && act(() => del(`/members/${m.id}`))}>
                    Remove {m.phone}
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

function Audit() {
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
  useEffect(() => {
    load();
    document.title = "Audit log · Hubbub console";
  }, []);
  return (
    <section class="page" aria-labelledby="audit-h">
      <h1 id="audit-h">Audit log</h1>
      <p class="hint">Every change a member made, newest first.</p>
      <Alert text={error} />
      <table>
        <caption class="sr-only">What members changed</caption>
        <Head cols={["When", "Who", "What", "Answer", "From"]} />
        <tbody>
          {entries.map((e) => (
            <tr>
              <td>{when(e.at)}</td>
              <td>{e.phone ?? "a removed member"}</td>
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

/** A local date-time input's value as a record time (`YYYY-MM-DD HH:MM:SS`, UTC). */
const utcRecordTime = (local: string) => new Date(local).toISOString().slice(0, 19).replace("T", " ");

function Webhooks() {
  const [url, setUrl] = useState("");
  const [secret, setSecret] = useState<string | null>(null);
  const [state, setState] = useState("");
  const [event, setEvent] = useState("");
  const [list, setList] = useState<WebhookDelivery[]>([]);
  const [rate, setRate] = useState<string | null>(null);
  const [open, setOpen] = useState<WebhookDeliveryDetail | null>(null);
  const [since, setSince] = useState(() => new Date(Date.now() - 24 * 3600 * 1000 - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 16));
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const query = new URLSearchParams({ limit: "50" });
  if (state) query.set("state", state);
  if (event.trim()) query.set("event", event.trim());
  const load = () =>
    Promise.all([
      get<Page<WebhookDelivery>>(`/webhooks/deliveries?${query}`).then((p) => setList(p.data)),
      // The endpoint's recent success rate: of the last 100 deliveries that have been tried.
      get<Page<WebhookDelivery>>("/webhooks/deliveries?limit=100").then((p) => {
        const tried = p.data.filter((d) => d.attempts > 0 || d.state !== "pending");
        const ok = tried.filter((d) => d.state === "succeeded").length;
        setRate(tried.length ? `${Math.round((100 * ok) / tried.length)} % of the last ${tried.length} deliveries succeeded` : "No delivery yet");
      }),
    ]).catch((e) => setError(errorText(e)));
  usePoll(load, 5000, [query.toString()]);
  useEffect(() => {
    document.title = "Webhooks · Hubbub console";
  }, []);
  const act = acting(load, setError, setStatus);
  return (
    <section class="page" aria-labelledby="webhooks-h">
      <h1 id="webhooks-h">Webhooks</h1>
      <Alert text={error} />
      <p role="status">{status}</p>
      <form
        class="card invite"
        onSubmit={(e) => {
          e.preventDefault();
          act(async () => {
            const s = await put<WebhookSettings>("/settings/webhook", { webhook_url: url.trim() || null });
            setSecret(s.webhook_secret ?? null);
            return s.webhook_url ? `Events now go to ${s.webhook_url}.` : "Webhook removed.";
          });
        }}
      >
        <h2>Endpoint</h2>
        <label for="webhook-url">Endpoint URL</label>
        <input id="webhook-url" type="url" placeholder="https://example.com/hubbub" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
        <button class="primary">Save endpoint</button>
        {secret ? (
          <p>
            Signing secret (shown once): <span class="mono">{secret}</span>
          </p>
        ) : null}
        <button
          type="button"
          onClick={() =>
            act(async () => {
              const r = await post<TestOutcome>("/webhooks/test");
              return r.ok ? `Test event delivered (HTTP ${r.status}).` : `Test event not delivered: ${r.error ?? `HTTP ${r.status}`}.`;
            })
          }
        >
          Send a test event
        </button>
        {rate ? <p class="meta">{rate}</p> : null}
      </form>
      <form
        class="card filters"
        onSubmit={(e) => {
          e.preventDefault();
          act(async () => {
            const r = await post<{ retried: number }>("/webhooks/deliveries/retry", { since: utcRecordTime(since) });
            return `${r.retried} failed ${r.retried === 1 ? "delivery" : "deliveries"} sent again.`;
          });
        }}
      >
        <div class="field">
          <label for="since">Failed since</label>
          <input id="since" type="datetime-local" value={since} onInput={(e) => setSince(e.currentTarget.value)} required />
        </div>
        <button>Send every failed delivery again</button>
      </form>
      <div class="filters">
        <div class="field">
          <label for="delivery-state">State</label>
          <select id="delivery-state" value={state} onChange={(e) => setState(e.currentTarget.value)}>
            <option value="">All</option>
            <option value="pending">Pending</option>
            <option value="succeeded">Succeeded</option>
            <option value="failed">Failed (retrying)</option>
            <option value="dead">Dead</option>
          </select>
        </div>
        <div class="field">
          <label for="delivery-event">Event</label>
          <input id="delivery-event" value={event} placeholder="message.status" onInput={(e) => setEvent(e.currentTarget.value)} />
        </div>
      </div>
      <table>
        <caption class="sr-only">Deliveries, newest first</caption>
        <Head cols={["Created", "Event", "State", "Attempts", "Last answer"]} actions />
        <tbody>
          {list.map((d) => (
            <tr>
              <td>{when(d.created_at)}</td>
              <td>{d.event}</td>
              <td>{d.state}</td>
              <td>{d.attempts}</td>
              <td>{d.last_status ? `HTTP ${d.last_status}` : ""} {d.last_error ?? ""}</td>
              <td>
                <button type="button" onClick={() => act(async () => setOpen(await get<WebhookDeliveryDetail>(`/webhooks/deliveries/${d.delivery_id}`)))}>
                  Details of {d.delivery_id}
                </button>{" "}
                <button type="button" onClick={() => act(async () => (await post(`/webhooks/deliveries/${d.delivery_id}/retry`), `${d.delivery_id} sent again.`))}>
                  Send {d.delivery_id} again
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {open ? (
        <section class="card" aria-labelledby="delivery-h">
          <h2 id="delivery-h">Delivery {open.delivery_id}</h2>
          <p>
            {open.event} · {open.state} · {open.attempts} attempt(s){open.last_status ? ` · last answer HTTP ${open.last_status}` : ""}
            {open.last_error ? ` · ${open.last_error}` : ""}
          </p>
          <h3>Request body (signed with X-Service-Signature)</h3>
          <pre class="mono" tabIndex={0}>
            {JSON.stringify(open.payload, null, 2)}
          </pre>
          <button type="button" onClick={() => setOpen(null)}>
            Close details
          </button>
        </section>
      ) : null}
    </section>
  );
}

/** The partner's API keys: several at once, so one is replaced without downtime. */
function Keys() {
  const [keys, setKeys] = useState<ApiKey[]>([]);
  const [name, setName] = useState("");
  const [made, setMade] = useState<ApiKeyCreated | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => get<Page<ApiKey>>("/api-keys").then((p) => setKeys(p.data), (e) => setError(errorText(e)));
  useEffect(() => {
    load();
    document.title = "API keys · Hubbub console";
  }, []);
  const act = acting(load, setError);
  return (
    <section class="page" aria-labelledby="keys-h">
      <h1 id="keys-h">API keys</h1>
      <p class="hint">To replace a key without downtime: create a new one, move your services to it, then revoke the old one.</p>
      <Alert text={error} />
      <form
        class="card invite"
        onSubmit={(e) => {
          e.preventDefault();
          act(async () => {
            setMade(await post<ApiKeyCreated>("/api-keys", { name: name.trim() }));
            setName("");
          });
        }}
      >
        <label for="key-name">What the new key is for</label>
        <input id="key-name" value={name} onInput={(e) => setName(e.currentTarget.value)} required />
        <button class="primary">Create key</button>
        {made ? (
          <div role="status">
            <p>Store it now: it is shown this once.</p>
            <ShownOnce label="API key" value={made.api_key} />
          </div>
        ) : null}
      </form>
      <table>
        <caption class="sr-only">The partner's API keys</caption>
        <Head cols={["Name", "Prefix", "Created", "Last used", "Revoked"]} actions />
        <tbody>
          {keys.map((k) => (
            <tr>
              <td>{k.name}</td>
              <td class="mono">{k.prefix}</td>
              <td>{when(k.created_at)}</td>
              <td>{k.last_used_at ? when(k.last_used_at) : "never"}</td>
              <td>{k.revoked_at ? when(k.revoked_at) : ""}</td>
              <td>
                {k.revoked_at ? null : (
                  <button type="button" onClick={() => act(() => del(`/api-keys/${k.id}`))}>
                    Revoke {k.name}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function Bots() {
  const [bots, setBots] = useState<Bot[]>([]);
  const [code, setCode] = useState("");
  const [name, setName] = useState("");
  const [created, setCreated] = useState<BotCreated | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => get<Page<Bot>>("/bots").then((p) => setBots(p.data), (e) => setError(errorText(e)));
  useEffect(() => {
    load();
    document.title = "Bots · Hubbub console";
  }, []);
  return (
    <section class="page" aria-labelledby="bots-h">
      <h1 id="bots-h">Bots</h1>
      <Alert text={error} />
      <form
        class="card invite"
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          try {
            setCreated(await post<BotCreated>("/bots", { code: code.trim(), name: name.trim() }));
            setCode("");
            setName("");
            await load();
          } catch (err) {
            setError(errorText(err));
          }
        }}
      >
        <h2>New bot</h2>
        <label for="bot-code">Code (a-z, 0-9, - and _)</label>
        <input id="bot-code" value={code} onInput={(e) => setCode(e.currentTarget.value)} required />
        <label for="bot-name">Name</label>
        <input id="bot-name" value={name} onInput={(e) => setName(e.currentTarget.value)} required />
        <button class="primary">Create bot</button>
        {created ? (
          <div role="status">
            <p>{created.warning}</p>
            <ShownOnce label="Bot token" value={created.bot_token} />
            <ShownOnce label="Webhook secret" value={created.webhook_secret} />
          </div>
        ) : null}
      </form>
      <ul class="plain catalog">
        {bots.map((b) => (
          <li>
            <BotCard key={b.code} bot={b} onChange={load} />
          </li>
        ))}
      </ul>
    </section>
  );
}

function BotCard({ bot, onChange }: { bot: Bot; onChange: () => void }) {
  const [token, setToken] = useState<string | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const file = useRef<HTMLInputElement>(null);
  const flows = bot.component?.flows ?? [];
  return (
    <article class="card template" aria-labelledby={`bot-${bot.code}`}>
      <h2 id={`bot-${bot.code}`}>
        {bot.name} <span class="meta">({bot.code} · {bot.runtime_mode})</span>
      </h2>
      <p class="meta">
        Token {bot.credentials.token_prefix}… · {bot.component ? `component ${bot.component.digest.slice(0, 19)}…, ${bot.component.size} bytes` : "no component yet"}
      </p>
      {flows.length ? (
        <p>
          Flows:{" "}
          {flows.map((f) => (
            <span class="status-pill">
              {f.title} ({f.code})
            </span>
          ))}
        </p>
      ) : null}
      <button
        type="button"
        onClick={async () => {
          setProblem(null);
          try {
            setToken((await post<BotToken>(`/bots/${bot.code}/token/rotate`)).bot_token);
            setStatus("The old token stopped working; the new one is below, shown once.");
            onChange();
          } catch (e) {
            setProblem(errorText(e));
          }
        }}
      >
        Rotate the token of {bot.code}
      </button>
      {token ? <ShownOnce label="New bot token" value={token} /> : null}
      <form
        class="reply"
        onSubmit={async (e) => {
          e.preventDefault();
          const f = file.current?.files?.[0];
          if (!f) return;
          setProblem(null);
          setStatus(`Uploading ${f.name}…`);
          try {
            await upload(`/bots/${bot.code}/component`, await f.arrayBuffer(), "application/wasm");
            setStatus(`${f.name} is the bot's component now.`);
            onChange();
          } catch (err) {
            setStatus(null);
            setProblem(errorText(err));
          }
        }}
      >
        <label for={`component-${bot.code}`}>Component (.wasm, wasm32-wasip2)</label>
        <input id={`component-${bot.code}`} type="file" accept=".wasm,application/wasm" ref={file} required />
        <button>Upload component</button>
      </form>
      {status ? <p role="status">{status}</p> : null}
      {problem ? (
        <div class="error" role="alert">
          <p>The component was not taken:</p>
          <pre class="mono">{problem}</pre>
        </div>
      ) : null}
    </article>
  );
}

/** The partner's canned replies: kept here by admins and owners, picked by agents in a thread's reply box. */
function Canned() {
  const [list, setList] = useState<CannedReply[]>([]);
  const [editing, setEditing] = useState<CannedReply | null>(null);
  const [shortcut, setShortcut] = useState("");
  const [body, setBody] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const load = () => get<Page<CannedReply>>("/canned-replies").then((p) => setList(p.data));
  useEffect(() => {
    document.title = "Canned replies · Hubbub console";
    load().catch((e) => setError(errorText(e)));
  }, []);
  const act = acting(load, setError, setStatus);
  const edit = (r: CannedReply | null) => {
    setEditing(r);
    setShortcut(r?.shortcut ?? "");
    setBody(r?.body ?? "");
  };
  return (
    <section class="page" aria-labelledby="canned-h">
      <h1 id="canned-h">Canned replies</h1>
      <p class="hint">Answers your agents send often. In a conversation, they insert one from the reply box.</p>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
      <form
        class="card"
        onSubmit={(e) => {
          e.preventDefault();
          const was = editing;
          act(async () => {
            const sent = { shortcut: shortcut.trim(), body };
            if (was) await put(`/canned-replies/${was.id}`, sent);
            else await post("/canned-replies", sent);
            edit(null);
            return was ? `/${sent.shortcut} saved.` : `/${sent.shortcut} added.`;
          });
        }}
      >
        <h2>{editing ? `Edit /${editing.shortcut}` : "New canned reply"}</h2>
        <label for="canned-shortcut">Shortcut</label>
        <input id="canned-shortcut" value={shortcut} pattern="[a-z0-9_\-]{1,32}" placeholder="refund" onInput={(e) => setShortcut(e.currentTarget.value)} required />
        <p class="hint">Lower-case letters, digits, - and _.</p>
        <label for="canned-body">Text</label>
        <textarea id="canned-body" rows={3} value={body} onInput={(e) => setBody(e.currentTarget.value)} required />
        <button class="primary">{editing ? "Save" : "Add canned reply"}</button>
        {editing ? (
          <button type="button" onClick={() => edit(null)}>
            Cancel
          </button>
        ) : null}
      </form>
      {list.length === 0 ? (
        <p class="muted">No canned replies yet.</p>
      ) : (
        <table>
          <Head cols={["Shortcut", "Text", "Changed"]} actions />
          <tbody>
            {list.map((r) => (
              <tr>
                <td class="mono">/{r.shortcut}</td>
                <td class="pre">{r.body}</td>
                <td>{when(r.updated_at)}</td>
                <td>
                  <button type="button" onClick={() => edit(r)}>
                    Edit<span class="sr-only"> /{r.shortcut}</span>
                  </button>
                  <button type="button" onClick={() => confirm(`Delete /${r.shortcut}?`) && act(() => del(`/canned-replies/${r.id}`), `/${r.shortcut} deleted.`)}>
                    Delete<span class="sr-only"> /{r.shortcut}</span>
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function Console() {
  const [session, setSession] = useState<MemberSession | null | undefined>(undefined);
  const [flash, setFlash] = useState<string | null>(null);
  useEffect(() => {
    get<MemberSession>("/members/me").then(setSession, () => setSession(null));
    return onSignedOut(() => {
      setFlash("Your session has ended. Please sign in again.");
      setSession(null);
    });
  }, []);
  if (session === undefined) return <p class="muted console-signin">Loading…</p>;
  if (!session)
    return (
      <>
        {flash ? (
          <p class="flash" role="alert">
            {flash}
          </p>
        ) : null}
        <SignIn
          onSignedIn={(s) => {
            setFlash(null);
            setSession(s);
            go("/console/");
          }}
        />
      </>
    );
  return (
    <Shell
      session={session}
      onSignOut={() => {
        setSession(null);
        go("/console/");
      }}
    />
  );
}

render(<Console />, document.getElementById("console")!);
