// The agents' inbox: the conversation list (filters, search, live), a thread (reply, assign, notes, close)
// and the contact panel beside it.
import { useEffect, useRef, useState } from "preact/hooks";
import { errorText, lastMessageLine, when } from "../shared/format";
import { Alert } from "../shared/ui";
import { get, patch, post, type ConversationSla, type Conversation, type Member, type MemberSession, type Note, type Page, type Thread, type ThreadMessage, type Account, type CannedReply, type Payment, type BotSession, type Label, type Macro, type MacroApplied } from "./api";
import { acting } from "./page";
import { useLive, useLiveTyping } from "./live";
import { useTypingShown, useTypingSignal } from "../shared/typing";
import { Link } from "./nav";
import { AgentConvKeys, agentDevice } from "./agent-e2e";

export const who = (members: Member[], id: number | null | undefined) => {
  const m = members.find((x) => x.id === id);
  return m ? m.name || m.phone : id ? `member ${id}` : "Unassigned";
};

/** What an SLA says now: the time left, or that it was breached. */
export function slaText(sla: ConversationSla | null | undefined, now: number): string | null {
  if (!sla) return null;
  if (sla.breached) return "SLA breached";
  const left = Date.parse(sla.due_at.replace(" ", "T") + "Z") - now;
  if (left <= 0) return "SLA due now";
  const min = Math.ceil(left / 60_000);
  return min < 60 ? `Reply due in ${min} min` : `Reply due in ${Math.round(min / 6) / 10} h`;
}

/** The time now, again every 30 seconds (what SLAs count down with). */
function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = window.setInterval(() => setNow(Date.now()), 30_000);
    return () => clearInterval(t);
  }, []);
  return now;
}

function SlaPill({ sla, now }: { sla: ConversationSla | null | undefined; now: number }) {
  const text = slaText(sla, now);
  return text ? <span class={"sla" + (sla?.breached ? " breached" : "")}>{text}</span> : null;
}

export function Inbox({ session, members, open }: { session: MemberSession; members: Member[]; open: number | null }) {
  const [state, setState] = useState("open");
  const [assigned, setAssigned] = useState("");
  const [label, setLabel] = useState("");
  const [sla, setSla] = useState("");
  const [sort, setSort] = useState("");
  const now = useNow();
  const [labels, setLabels] = useState<Label[]>([]);
  const [q, setQ] = useState("");
  const [search, setSearch] = useState("");
  const [list, setList] = useState<Conversation[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [changed, setChanged] = useState(0);
  const query = new URLSearchParams({ limit: "50" });
  if (state) query.set("state", state);
  if (assigned) query.set("assigned", assigned);
  if (label) query.set("label", label);
  if (sla) query.set("sla", sla);
  if (sort) query.set("sort", sort);
  if (search) query.set("q", search);
  // Loads asked for (the filters', a live event's, a thread's change): each asks with the filters shown at the
  // time, and only the answer to the last one asked is shown — a live refresh asked just before a search
  // may answer after it, unfiltered, and would replace the search's list while the box still holds the words.
  const shown = useRef("");
  shown.current = query.toString();
  const asked = useRef(0);
  const load = () => {
    const mine = ++asked.current;
    return get<Page<Conversation>>(`/conversations?${shown.current}`).then(
      (p) => {
        if (mine !== asked.current) return;
        setList(p.data);
        setError(null);
      },
      (e) => mine === asked.current && setError(errorText(e)),
    );
  };
  useEffect(() => void load(), [query.toString(), open, changed]);
  useEffect(() => {
    get<Page<Label>>("/labels").then((p) => setLabels(p.data), () => undefined);
  }, [changed]);
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
  // This browser's agent device, published as the console opens: a user's app wraps the content keys it makes
  // from now on for it too (a browser without X25519 in WebCrypto simply has none).
  useEffect(() => void agentDevice(session).catch(() => undefined), [session.partner.code, session.member.id]);
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
          {labels.length ? (
            <div class="field">
              <label for="filter-label">Label</label>
              <select id="filter-label" value={label} onChange={(e) => setLabel(e.currentTarget.value)}>
                <option value="">Any</option>
                {labels.map((l) => (
                  <option value={l.name}>{l.name}</option>
                ))}
              </select>
            </div>
          ) : null}
          <div class="field">
            <label for="filter-sla">SLA</label>
            <select id="filter-sla" value={sla} onChange={(e) => setSla(e.currentTarget.value)}>
              <option value="">Any</option>
              <option value="running">Waiting for a reply</option>
              <option value="breached">Breached</option>
            </select>
          </div>
          <div class="field">
            <label for="filter-sort">Order</label>
            <select id="filter-sort" value={sort} onChange={(e) => setSort(e.currentTarget.value)}>
              <option value="">Newest first</option>
              <option value="sla_due">Reply due first</option>
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
                    <SlaPill sla={c.sla} now={now} />
                    {(c.labels ?? []).map((name) => (
                      <span class="label-chip" style={{ borderColor: labels.find((l) => l.name === name)?.color }}>
                        {name}
                      </span>
                    ))}
                  </span>
                  <span class="meta">
                    {c.phone} · {c.state}{c.channel ? ` · ${channelName(c.channel)}` : ""} · {who(members, c.assignee_id)} ·{" "}
                    {when(c.last_message_at)}
                  </span>
                  {c.last_message ? <span class="preview">{lastMessageLine(c.last_message, "Contact", "API")}</span> : null}
                </Link>
              </li>
            ))}
          </ul>
        )}
      </section>
      {open ? <ThreadView key={open} id={open} members={members} labels={labels} session={session} onChange={() => setChanged((n) => n + 1)} /> : null}
    </div>
  );
}

/** Whether a thread is end-to-end encrypted, and what this browser can do in it. */
type E2eState = {
  /** A content key was shared in the thread, or it has encrypted messages. */
  on: boolean;
  /** This browser's agent device holds the newest content key. */
  current: boolean;
  /** Why this browser has no agent device (no X25519 in WebCrypto, IndexedDB refused, publishing failed). */
  noDevice: string | null;
};

/** One conversation: its messages, reply, assignment, closing and notes; `onChange` when it changed (the list refreshes).
 * An encrypted thread is opened and answered in this browser with the member's agent device (agent-e2e.ts). */
function ThreadView({ id, members, labels, session, onChange }: { id: number; members: Member[]; labels: Label[]; session: MemberSession; onChange: () => void }) {
  const self = session.member;
  const [thread, setThread] = useState<Thread | null>(null);
  const keys = useRef<AgentConvKeys | null>(null);
  const [e2e, setE2e] = useState<E2eState>({ on: false, current: false, noDevice: null });
  /** Decrypted texts by message ref; null: it cannot be read on this device. */
  const [plain, setPlain] = useState<Record<string, string | null>>({});
  const [notes, setNotes] = useState<Note[]>([]);
  const [reply, setReply] = useState("");
  const [note, setNote] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const [canned, setCanned] = useState<CannedReply[]>([]);
  const [macros, setMacros] = useState<Macro[]>([]);
  const [macro, setMacro] = useState("");
  const [transferTo, setTransferTo] = useState("");
  const [why, setWhy] = useState("");
  const heading = useRef<HTMLHeadingElement>(null);
  const replyBox = useRef<HTMLTextAreaElement>(null);
  useEffect(() => {
    get<Page<CannedReply>>("/canned-replies").then((p) => setCanned(p.data), () => undefined);
    get<Page<Macro>>("/macros").then((p) => setMacros(p.data), () => undefined);
  }, []);
  /** This device's keys of the thread, read again (a new version may have been shared), then its messages opened. */
  const keysOf = (t: Thread) => (keys.current ??= new AgentConvKeys(id, t.ref, () => agentDevice(session)));
  const openThread = async (t: Thread) => {
    const k = keysOf(t);
    let noDevice: string | null = null;
    try {
      noDevice = await k.check();
    } catch {
      /* the service could not be reached: what the messages say */
    }
    const encrypted = t.messages.filter((m) => m.encryption === "e2e");
    setE2e({ on: k.latest !== null || encrypted.length > 0, current: k.current, noDevice });
    const out: Record<string, string | null> = {};
    for (const m of encrypted) out[m.ref] = await k.open(m).catch(() => null);
    // A text once opened stays (sent from here, or opened with a key this device held).
    if (encrypted.length) setPlain((old) => ({ ...out, ...Object.fromEntries(Object.entries(old).filter(([, v]) => v !== null)) }));
  };
  /** Loads asked for: only the answer to the last is shown (an earlier one may come after it, and be older). */
  const asked = useRef(0);
  const load = () => {
    const mine = ++asked.current;
    return Promise.all([get<Thread>(`/conversations/${id}`), get<Page<Note>>(`/conversations/${id}/notes`)]).then(
      ([t, n]) => {
        if (mine !== asked.current) return;
        setThread(t);
        setNotes(n.data);
        void openThread(t);
        // What the user wrote is read once an agent has it open.
        if (t.unread > 0) post(`/conversations/${id}/read`).then(onChange, () => undefined);
      },
      (e) => mine === asked.current && setError(errorText(e)),
    );
  };
  useEffect(() => void load(), [id]);
  // The person writing shows "typing…" until their message comes (or a few seconds pass); this agent writing
  // tells the person.
  const [personTyping, heardTyping, stoppedTyping] = useTypingShown([id]);
  useLiveTyping((c) => c === id && heardTyping(), [id]);
  const typing = useTypingSignal(() => post(`/conversations/${id}/typing`), [id]);
  useLive((e) => {
    if (e.kind === "conversation.message" && e.data.conversation.conversation_id === id && e.data.message.direction === "in") stoppedTyping();
    if (e.kind === "fresh" || (e.kind === "conversation.message" ? e.data.conversation : e.data).conversation_id === id) load();
  }, [id]);
  // Opened (by a click or with Enter on the list), the thread takes the focus once it is on screen.
  useEffect(() => {
    if (thread) heading.current?.focus();
  }, [thread !== null]);
  const act = acting(() => load().then(onChange), setError, setStatus);
  if (!thread) return <section class="thread">{error ? <p role="alert">{error}</p> : <p class="muted">Loading…</p>}</section>;
  return (
    <section class="thread" aria-labelledby="thread-h">
      <h2 id="thread-h" tabIndex={-1} ref={heading}>
        {thread.subject || "Conversation"} · {thread.phone}
      </h2>
      <div class="thread-tools">
        <span class="status-pill">{thread.state}</span>
        <SlaPill sla={thread.sla} now={Date.now()} />
        {thread.rating ? (
          <span class="status-pill" data-rating={thread.rating.score ?? "asked"}>
            {thread.rating.score ? `Rated ${thread.rating.score}/5${thread.rating.comment ? `: “${thread.rating.comment}”` : ""}` : "Rating asked"}
          </span>
        ) : null}
        {thread.channel ? (
          <span class="status-pill" data-channel={thread.channel} title="The user last wrote from there: your replies go back there">
            Replies go by {channelName(thread.channel)}
          </span>
        ) : null}
        {e2e.on ? (
          <span class="status-pill" data-e2e="on" title="Messages are opened and sealed in this browser; the service stores ciphertext only">
            🔒 End-to-end encrypted
          </span>
        ) : null}
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
      {labels.length ? (
        <fieldset class="thread-labels">
          <legend>Labels</legend>
          {labels.map((l) => {
            const on = (thread.labels ?? []).includes(l.name);
            return (
              <label class="check">
                <input
                  type="checkbox"
                  checked={on}
                  onChange={() => {
                    const next = on ? (thread.labels ?? []).filter((n) => n !== l.name) : [...(thread.labels ?? []), l.name];
                    // Shown at once (the box stays as ticked); the answer, or a refusal, sets it as it is.
                    setThread({ ...thread, labels: next });
                    act(() => patch(`/conversations/${id}`, { labels: next }).catch((e) => load().then(() => Promise.reject(e))), on ? `Label ${l.name} removed.` : `Label ${l.name} added.`);
                  }}
                />{" "}
                <span class="label-chip" style={{ borderColor: l.color }}>
                  {l.name}
                </span>
              </label>
            );
          })}
        </fieldset>
      ) : null}
      <div class="thread-tools">
        {macros.length ? (
          <form
            class="inline"
            onSubmit={(e) => {
              e.preventDefault();
              const picked = macros.find((m) => String(m.id) === macro);
              if (!picked) return;
              act(async () => {
                await post<MacroApplied>(`/conversations/${id}/macro`, { macro_id: picked.id });
                setMacro("");
              }, `Macro ${picked.name} applied.`);
            }}
          >
            <label for="macro">Apply a macro</label>
            <select id="macro" value={macro} onChange={(e) => setMacro(e.currentTarget.value)}>
              <option value="">Choose…</option>
              {macros.map((m) => (
                <option value={String(m.id)}>{m.name}</option>
              ))}
            </select>
            <button disabled={!macro}>Apply</button>
          </form>
        ) : null}
        <form
          class="inline"
          onSubmit={(e) => {
            e.preventDefault();
            if (!transferTo || !why.trim()) return;
            act(async () => {
              await patch(`/conversations/${id}`, { assignee_id: Number(transferTo), note: why.trim() });
              setWhy("");
              setTransferTo("");
            }, `Transferred to ${who(members, Number(transferTo))}.`);
          }}
        >
          <label for="transfer-to">Transfer to</label>
          <select id="transfer-to" value={transferTo} onChange={(e) => setTransferTo(e.currentTarget.value)}>
            <option value="">Choose…</option>
            {members
              .filter((m) => m.id !== thread.assignee_id)
              .map((m) => (
                <option value={String(m.id)}>
                  {m.name || m.phone} ({m.status})
                </option>
              ))}
          </select>
          <label for="transfer-why">Why</label>
          <input id="transfer-why" value={why} maxLength={3900} placeholder="What they should know" onInput={(e) => setWhy(e.currentTarget.value)} />
          <button disabled={!transferTo || !why.trim()}>Transfer</button>
        </form>
      </div>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
      <ol class="messages-thread" aria-label="Messages">
        {thread.messages.map((m) => (
          <li class={m.direction === "in" ? "from-user" : "from-agent"}>
            <span class="meta">
              {m.direction === "in" ? thread.phone : m.author ? m.author.name || who(members, m.author.member_id) : "API"} · {when(m.created_at)}
              {m.direction === "in" && m.channel ? ` · by ${channelName(m.channel)}` : ""}
              {m.direction === "out" ? ` · ${m.state}` : ""}
            </span>
            <p>
              {m.encryption !== "e2e" ? (
                m.body ?? `[${m.content_type}]`
              ) : !(m.ref in plain) ? (
                <em>Decrypting…</em>
              ) : plain[m.ref] === null ? (
                <em class="unreadable">Encrypted message: it cannot be read on this device (its key was not shared with this browser).</em>
              ) : (
                plain[m.ref]
              )}
            </p>
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
            // Encrypted or not is asked again now (a key may have been shared since the thread loaded); when that
            // cannot be known, nothing is sent.
            const k = keysOf(thread);
            await k.check();
            if (k.latest !== null || thread.messages.some((m) => m.encryption === "e2e")) {
              // Sealed here with the thread's key; only the envelope goes to the service. Never sent as plaintext.
              const sealed = await k.seal(body);
              await post<ThreadMessage>(`/conversations/${id}/messages`, { ...sealed, idempotency_key: crypto.randomUUID() });
              setPlain((old) => ({ ...old, [sealed.ref]: body }));
            } else {
              await post(`/conversations/${id}/messages`, { body, idempotency_key: crypto.randomUUID() });
            }
            setReply("");
          }, "Reply sent.");
        }}
      >
        {e2e.on && e2e.noDevice ? (
          <p class="hint" role="note">
            This conversation is end-to-end encrypted. {e2e.noDevice}
          </p>
        ) : e2e.on && !e2e.current ? (
          <p class="hint" role="note">
            This conversation is end-to-end encrypted, and its current key was not shared with this browser: earlier messages cannot
            be read here. Your reply starts a new key, shared with the user's devices and your team's agent devices, so what the user
            writes after it can be.
          </p>
        ) : null}
        <label for="reply">{e2e.on ? `Encrypted reply to ${thread.phone}` : `Reply to ${thread.phone}`}</label>
        <p class="typing" role="status">
          {personTyping ? `${thread.phone} is typing…` : ""}
        </p>
        <textarea
          id="reply"
          ref={replyBox}
          rows={3}
          value={reply}
          onInput={(e) => {
            setReply(e.currentTarget.value);
            typing();
          }}
        />
        {self.name ? null : (
          <p class="hint">
            Your replies are signed “{session.partner.name}”: <Link href="/console/profile">add your name</Link> so the person sees who answers.
          </p>
        )}
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
        <button class="primary">{e2e.on ? "Send encrypted reply" : "Send reply"}</button>
      </form>
      <Contact phone={thread.phone} />
      <section class="notes" aria-labelledby="notes-h">
        <h3 id="notes-h">Internal notes</h3>
        <p class="hint">Only your team sees these; the user never does.</p>
        <ul>
          {notes.map((n) => (
            <li>
              <span class="meta">
                {n.name ?? n.phone ?? "API"} · {when(n.created_at)}
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

/** Who the user is to this partner: the account, its custom fields, the latest hub messages sent to them, their
 * flow sessions and payments. */
function Contact({ phone }: { phone: string }) {
  const [account, setAccount] = useState<Account | null>(null);
  const [messages, setMessages] = useState<ThreadMessage[]>([]);
  const [payments, setPayments] = useState<Payment[]>([]);
  const [sessions, setSessions] = useState<BotSession[]>([]);
  useEffect(() => {
    // Answers about a person whose thread is no longer open are dropped (they could land after the new one's).
    let current = true;
    const keep =
      <T,>(set: (v: T) => void) =>
      (v: T) =>
        current && set(v);
    get<Page<BotSession>>(`/flow-sessions?phone=${encodeURIComponent(phone)}&limit=5`).then(
      (p) => keep(setSessions)(p.data),
      () => keep(setSessions)([]),
    );
    get<Account>(`/accounts/${encodeURIComponent(phone)}`).then(keep(setAccount), () => keep(setAccount)(null));
    get<Page<Payment>>(`/payments?phone=${encodeURIComponent(phone)}&limit=5`).then(
      (p) => keep(setPayments)(p.data),
      () => keep(setPayments)([]),
    );
    // Hub messages only (what the partner sent outside conversations), the latest five.
    get<Page<ThreadMessage>>(`/messages?phone=${encodeURIComponent(phone)}&limit=50`).then(
      (p) => keep(setMessages)(p.data.filter((m) => m.direction === "out" && m.conversation_id == null).slice(0, 5)),
      () => keep(setMessages)([]),
    );
    return () => {
      current = false;
    };
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
      <h4>Flow sessions</h4>
      {sessions.length ? (
        <ul class="plain">
          {sessions.map((x) => (
            <li class="meta">
              {when(x.invited_at)} · {x.bot} · {x.kind === "chat" ? "chat" : (x.title ?? x.flow)} · {x.state.replace("_", " ")}
              {x.completed_at ? ` ${when(x.completed_at)}` : ""}
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">None.</p>
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

/** How a channel a user writes from is named to agents. */
function channelName(channel: string): string {
  return channel === "sms" ? "SMS" : channel === "whatsapp" ? "WhatsApp" : "the app";
}
