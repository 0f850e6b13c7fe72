// Support conversations: the list with states, a new thread, the thread with replies (live), and
// end-to-end encryption with the conversation key (docs/e2e.md, "Encrypted conversations").
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, auth, enc, get, post, type Account, type Conversation, type ConversationKeys, type ConversationThread, type Message, type Page, type PeerDirectory } from "../api";
import { conversationAad, conversationKeyAad, decrypt, encrypt, newContentKey, newRef, unwrapKey, wrapKey, type Envelope, type KeyWrap } from "../../shared/e2e";
import { deviceKey, publishDeviceKey } from "../keystore";
import { navigate } from "../router";
import { useLive } from "../live";
import { SearchBox, useSearch } from "../search";
import { discard, queue, save, sendWith, useQueued } from "../offline";
import { errorText, lastMessageLine, when } from "../../shared/format";
import { ErrorNote, Loading, useAsync, useTitle } from "../util";
import { useTypingShown, useTypingSignal } from "../../shared/typing";

const STATE_LABEL: Record<string, string> = { open: "Open", pending: "Waiting for you", closed: "Closed" };

/** Who the person sees as the writer of a partner's message: the agent's first name, else the partner. */
const sender = (m: Message | undefined, partnerName: string) =>
  m?.direction === "out" ? (m.sender_name ?? partnerName) : undefined;

// Replies written offline are sent from the outbox with their idempotency key: a retry is written once.
sendWith(async (q) => {
  try {
    await post<Message>(`/me/conversations/${enc(q.conversation)}/messages`, { body: q.body, idempotency_key: q.key });
    return "sent";
  } catch (e) {
    // Unreachable, busy or failing for now: tried again later. Refused (gone, invalid): said so, kept.
    if (e instanceof ApiError && (e.status === 0 || e.status === 429 || e.status >= 500)) return "offline";
    return { refused: errorText(e, { own: true }) };
  }
});

export function Conversations() {
  useTitle("Support");
  const list = useAsync(() => get<Page<Conversation>>("/me/conversations?limit=100"), []);
  useLive(["conversation.message", "conversation.updated", "reset"], () => list.reload());
  const search = useSearch<Conversation>("/me/conversations?limit=100");
  const searching = search.q.trim() !== "";
  const shown = searching ? search.results : list.data?.data;
  return (
    <section aria-labelledby="conv-h">
      <div class="title-row">
        <h1 id="conv-h">Support</h1>
        <a class="button primary" href="/conversations/new">
          New conversation
        </a>
      </div>
      <SearchBox search={search} label="Search conversations" />
      <ErrorNote error={searching ? search.error : list.error} />
      {!shown && !(searching ? search.error : list.error) ? <Loading what={searching ? "Searching" : "Loading"} /> : null}
      {!searching && shown?.length === 0 ? <p class="empty">No conversations yet. Start one to ask a partner for help.</p> : null}
      {searching && shown?.length === 0 && !search.searching ? (
        <p class="empty" role="status">
          No conversations match “{search.q.trim()}”.
        </p>
      ) : null}
      <ul class="cards" aria-label={searching ? "Search results" : undefined}>
        {shown?.map((c) => (
          <li key={c.ref} class="card">
            <h2>
              <a href={`/conversations/${enc(c.ref)}`}>{c.subject || "Conversation"}</a>
            </h2>
            <p class="meta">
              {c.partner_name} · {when(c.last_message_at, "short")} · <span class={`status-pill s-${c.state}`}>{STATE_LABEL[c.state] ?? c.state}</span>
              {c.unread ? <span class="badge">{c.unread} unread</span> : null}
            </p>
            {c.last_message ? <p class="preview">{lastMessageLine(c.last_message, "You", c.partner_name)}</p> : null}
          </li>
        ))}
      </ul>
    </section>
  );
}

export function NewConversation() {
  useTitle("New conversation");
  const account = useAsync(() => get<Account>("/me/account"), []);
  const [partner, setPartner] = useState("");
  const [subject, setSubject] = useState("");
  const [body, setBody] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const partners = account.data?.partners ?? [];
  useEffect(() => {
    if (!partner && partners.length) setPartner(partners[0].code);
  }, [partners.length]);
  async function submit(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const c = await post<ConversationThread>("/me/conversations", { partner, subject: subject || undefined, body });
      navigate(`/conversations/${enc(c.ref)}`, true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }
  return (
    <section aria-labelledby="new-h">
      <p>
        <a href="/conversations" class="back">← Support</a>
      </p>
      <h1 id="new-h">New conversation</h1>
      <ErrorNote error={account.error} />
      {account.data && partners.length === 0 ? <p class="empty">Your account is not linked to any partner yet, so there is no one to write to.</p> : null}
      <form class="card" onSubmit={submit}>
        <div class="field">
          <label for="nc-partner">Partner</label>
          <select id="nc-partner" value={partner} onChange={(e) => setPartner((e.target as HTMLSelectElement).value)} required>
            {partners.map((p) => (
              <option key={p.code} value={p.code}>
                {p.name}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="nc-subject">Subject</label>
          <input id="nc-subject" maxLength={200} value={subject} onInput={(e) => setSubject((e.target as HTMLInputElement).value)} />
        </div>
        <div class="field">
          <label for="nc-body">Message</label>
          <textarea id="nc-body" rows={4} required value={body} onInput={(e) => setBody((e.target as HTMLTextAreaElement).value)} />
        </div>
        <ErrorNote error={error} />
        <button type="submit" class="primary" disabled={busy || !partner || !body.trim()}>
          {busy ? "Sending…" : "Start conversation"}
        </button>
      </form>
    </section>
  );
}

/** The conversation's content keys this device can open, by version. */
class ConvKeys {
  keys = new Map<number, Uint8Array>();
  latest: number | null = null;
  constructor(public ref: string) {}

  async refresh(): Promise<void> {
    const r = await get<ConversationKeys>(`/me/conversations/${enc(this.ref)}/keys?device_uuid=${enc(auth.device())}`);
    this.latest = r.key_version ?? null;
    const device = await deviceKey();
    for (const w of r.wraps) {
      if (this.keys.has(w.key_version)) continue;
      try {
        this.keys.set(w.key_version, await unwrapKey(w as KeyWrap, device, conversationKeyAad(this.ref, w.key_version)));
      } catch {
        /* a wrap this device's key cannot open (published a new key since) */
      }
    }
  }

  /** Makes K_{v+1} and wraps it to every peer device (this user's and the partner's agents'). */
  async share(): Promise<number> {
    await publishDeviceKey();
    const dir = await get<PeerDirectory>(`/me/conversations/${enc(this.ref)}/devices`);
    const v = (dir.key_version ?? 0) + 1;
    const k = newContentKey();
    const aad = conversationKeyAad(this.ref, v);
    const wraps = [];
    for (const [kind, list] of [["user", dir.devices], ["agent", dir.agent_devices]] as const) {
      for (const d of list) {
        if (!d.has_keys || !d.identity_key_pub) continue;
        wraps.push({ ...(await wrapKey(k, { device_uuid: d.device_uuid, identity_key_pub: d.identity_key_pub }, aad)), device_kind: kind });
      }
    }
    await post(`/me/conversations/${enc(this.ref)}/keys`, { key_version: v, wraps });
    this.keys.set(v, k);
    this.latest = v;
    return v;
  }

  async open(m: Message): Promise<string> {
    const env = m.e2e_envelope as Envelope;
    const v = m.e2e_key_version ?? env.key_version ?? 1;
    let k = this.keys.get(v);
    if (!k) {
      await this.refresh();
      k = this.keys.get(v);
    }
    if (!k) throw new Error("no key");
    return decrypt(env, k, conversationAad(this.ref, m.ref));
  }
}

/** `t` with `m` in it: in place of the message with its ref, else added at the end. */
function withMessage(t: ConversationThread, m: Message): ConversationThread {
  const messages = t.messages.some((x) => x.ref === m.ref) ? t.messages.map((x) => (x.ref === m.ref ? m : x)) : [...t.messages, m];
  return { ...t, messages };
}

/** The partner's satisfaction question: the scale as buttons and an optional comment, or the answer given. */
function RatingAsk({ convRef, rating, onRated }: { convRef: string; rating: Conversation["rating"]; onRated: (c: Conversation) => void }) {
  const [score, setScore] = useState<number | null>(null);
  const [comment, setComment] = useState("");
  const [error, setError] = useState<unknown>(null);
  if (rating?.score) {
    return (
      <p class="rating-done" role="status">
        You rated this conversation {rating.score} out of 5. Thank you!
      </p>
    );
  }
  return (
    <form
      class="rating"
      onSubmit={async (e) => {
        e.preventDefault();
        if (!score) return;
        setError(null);
        try {
          onRated(await post<Conversation>(`/me/conversations/${enc(convRef)}/rating`, { score, comment: comment.trim() || undefined }));
        } catch (err) {
          setError(err);
        }
      }}
    >
      <fieldset>
        <legend>Your rating</legend>
        {[1, 2, 3, 4, 5].map((n) => (
          <button type="button" class={score === n ? "on" : ""} aria-pressed={score === n} onClick={() => setScore(n)}>
            {n}
            <span class="sr-only"> out of 5</span>
          </button>
        ))}
      </fieldset>
      <label for="rating-comment">Comment (optional)</label>
      <input id="rating-comment" maxLength={1000} value={comment} onInput={(e) => setComment((e.target as HTMLInputElement).value)} />
      <button class="primary" disabled={!score}>
        Send rating
      </button>
      <ErrorNote error={error} />
    </form>
  );
}

export function ConversationView({ convRef }: { convRef: string }) {
  const thread = useAsync(() => get<ConversationThread>(`/me/conversations/${enc(convRef)}`), [convRef]);
  // Live: a new message in this thread (an agent's reply, or the user's own from another device) and the
  // thread's state; after a gap the stream could not replay, the thread is fetched again.
  // An agent writing shows "typing…" until their message comes (or a few seconds pass).
  const [agentTyping, heardTyping, stoppedTyping] = useTypingShown([convRef]);
  useLive(["conversation.typing"], (d: { ref: string }) => d.ref === convRef && heardTyping(), [convRef]);
  const typing = useTypingSignal(() => post(`/me/conversations/${enc(convRef)}/typing`), [convRef]);
  useLive(["conversation.message"], ({ conversation, message }: { conversation: Conversation; message: Message }) => {
    if (conversation.ref !== convRef) return;
    if (message.direction === "out") stoppedTyping();
    thread.update((t) => ({ ...withMessage(t, message), state: conversation.state, unread: conversation.unread, last_message_at: conversation.last_message_at, rating: conversation.rating }));
  }, [convRef]);
  useLive(["conversation.updated"], (c: Conversation) => {
    if (c.ref === convRef) thread.update((t) => ({ ...t, state: c.state, rating: c.rating }));
  }, [convRef]);
  useLive(["reset"], () => thread.reload(), [convRef]);
  const keys = useRef(new ConvKeys(convRef));
  const [plain, setPlain] = useState<Record<string, string | null>>({});
  const [encrypted, setEncrypted] = useState(false);
  const [text, setText] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const t = thread.data;
  useTitle(t?.subject || "Conversation");
  // Replies waiting to be sent; once one goes, the thread is fetched again (the stream brings it too).
  const waiting = useQueued(convRef);
  // The thread as shown (live replies, receipts) is what it shows offline.
  useEffect(() => {
    if (t) save(`/me/conversations/${enc(convRef)}`, t);
  }, [t]);
  const waited = useRef(0);
  useEffect(() => {
    if (waiting.length < waited.current) thread.reload();
    waited.current = waiting.length;
  }, [waiting.length]);
  const list = useRef<HTMLOListElement>(null);

  useEffect(() => {
    keys.current = new ConvKeys(convRef);
    keys.current.refresh().then(() => setEncrypted(keys.current.latest !== null), () => {});
  }, [convRef]);

  // Decrypt the encrypted messages not yet opened.
  useEffect(() => {
    if (!t) return;
    const todo = t.messages.filter((m) => m.encryption === "e2e" && !(m.ref in plain));
    if (todo.length && keys.current.latest === null) setEncrypted(true);
    (async () => {
      const out: Record<string, string | null> = {};
      for (const m of todo) out[m.ref] = await keys.current.open(m).catch(() => null);
      if (todo.length) setPlain((old) => ({ ...old, ...out }));
    })();
  }, [t]);

  useEffect(() => {
    list.current?.lastElementChild?.scrollIntoView?.({ block: "nearest" });
  }, [t?.messages.length]);

  // Read receipts: what the agents wrote is read once the thread is on screen (now, or when the tab
  // becomes visible again); the partner sees it `read`, and the unread counts drop.
  const unseen = t?.messages.filter((m) => m.direction === "out" && m.state !== "read" && m.state !== "failed").map((m) => m.ref).join(",") ?? "";
  useEffect(() => {
    if (!unseen) return;
    let done = false;
    const read = () => {
      if (done || document.visibilityState !== "visible") return;
      done = true;
      post<ConversationThread>(`/me/conversations/${enc(convRef)}/read`).then(
        (r) => thread.update((t) => ({ ...t, unread: r.unread, messages: r.messages })),
        () => (done = false),
      );
    };
    read();
    document.addEventListener("visibilitychange", read);
    return () => document.removeEventListener("visibilitychange", read);
  }, [unseen, convRef]);
  const lastMine = t ? [...t.messages].reverse().find((m) => m.direction === "in")?.ref : undefined;
  // The latest satisfaction question is the one answered here.
  const lastRatingAsk = t ? [...t.messages].reverse().find((m) => m.rating)?.ref : undefined;

  async function send(e: Event) {
    e.preventDefault();
    const body = text.trim();
    if (!body) return;
    setBusy(true);
    setError(null);
    try {
      let sent: Message;
      if (encrypted) {
        const k = keys.current;
        await k.refresh().catch(() => {});
        let v = k.latest;
        if (v === null || !k.keys.has(v)) v = await k.share();
        const ref = newRef();
        const envelope = await encrypt(k.keys.get(v)!, v, body, conversationAad(convRef, ref));
        sent = await post<Message>(`/me/conversations/${enc(convRef)}/messages`, {
          encrypted: true,
          e2e_mode: "conversation",
          e2e_key_version: v,
          ref,
          e2e_envelope: envelope,
        });
        setPlain((old) => ({ ...old, [ref]: body }));
      } else {
        sent = await post<Message>(`/me/conversations/${enc(convRef)}/messages`, { body });
      }
      setText("");
      thread.update((t) => withMessage(t, sent));
    } catch (err) {
      // Offline: a plain reply waits in this browser and goes when the connection is back (an encrypted
      // one needs the service for its key, so it stays in the box with the error).
      if (err instanceof ApiError && err.status === 0 && !encrypted) {
        await queue(convRef, body);
        setText("");
      } else setError(err);
    } finally {
      setBusy(false);
    }
  }

  async function turnOnEncryption() {
    setError(null);
    try {
      await keys.current.share();
      setEncrypted(true);
    } catch (err) {
      setError(err);
    }
  }

  return (
    <section aria-labelledby="thread-h" class="thread">
      <p>
        <a href="/conversations" class="back">← Support</a>
      </p>
      <ErrorNote error={thread.error} />
      {!t && !thread.error ? <Loading /> : null}
      {t ? (
        <>
          <div class="title-row">
            <h1 id="thread-h">{t.subject || "Conversation"}</h1>
            <span class={`status-pill s-${t.state}`}>{STATE_LABEL[t.state] ?? t.state}</span>
          </div>
          <p class="meta">
            With {t.partner_name} · {encrypted ? "🔒 end-to-end encrypted" : "not encrypted"}
          </p>
          <ol class="chat" ref={list} aria-live="polite" aria-label="Messages">
            {t.messages.map((m, i) => (
              <li key={m.ref} class={"bubble " + (m.direction === "in" ? "me" : "agent")}>
                {m.direction === "in" ? (
                  <span class="sr-only">You: </span>
                ) : sender(t.messages[i - 1], t.partner_name) === sender(m, t.partner_name) ? (
                  <span class="sr-only">{sender(m, t.partner_name)}: </span>
                ) : (
                  <span class="sender">
                    {sender(m, t.partner_name)}
                    <span class="sr-only">: </span>
                  </span>
                )}
                {m.encryption === "e2e" ? (
                  m.ref in plain ? (
                    plain[m.ref] === null ? (
                      <em class="unreadable">This encrypted message can't be read on this device.</em>
                    ) : (
                      <>🔒 {plain[m.ref]}</>
                    )
                  ) : (
                    <em>Decrypting…</em>
                  )
                ) : (
                  m.rendered_body ?? m.body
                )}
                <time class="meta" dateTime={m.created_at}> {when(m.created_at, "short")}</time>
                {m.rating && m.ref === lastRatingAsk && t.rating ? (
                  <RatingAsk convRef={convRef} rating={t.rating} onRated={(c) => thread.update((old) => ({ ...old, rating: c.rating }))} />
                ) : null}
                {m.ref === lastMine ? (
                  <span class="receipt" data-receipt={m.state}>
                    {m.state === "read" ? "Seen" : m.state === "failed" ? "Not sent" : "Delivered"}
                  </span>
                ) : null}
              </li>
            ))}
            {waiting.map((q) => (
              <li key={q.key} class="bubble me queued" data-queued={q.error ? "refused" : "waiting"}>
                <span class="sr-only">You: </span>
                {q.body}
                {q.error ? (
                  <span class="receipt" data-receipt="refused">
                    Not sent: {q.error}{" "}
                    <button type="button" class="link" onClick={() => discard(q.key)}>
                      Remove
                    </button>
                  </span>
                ) : (
                  <span class="receipt" data-receipt="queued">
                    Waiting to send
                  </span>
                )}
              </li>
            ))}
          </ol>
          <p class="typing" role="status">
            {agentTyping ? `${t.partner_name} is typing…` : ""}
          </p>
          <form class="composer" onSubmit={send}>
            <label for="reply" class="sr-only">
              Your reply
            </label>
            <textarea id="reply" rows={2} placeholder="Write a reply" value={text} onInput={(e) => {
                setText((e.target as HTMLTextAreaElement).value);
                typing();
              }} onKeyDown={(e) => e.key === "Enter" && (e.ctrlKey || e.metaKey) && send(e)} />
            <button type="submit" class="primary" disabled={busy || !text.trim()}>
              {busy ? "Sending…" : encrypted ? "Send encrypted" : "Send"}
            </button>
          </form>
          {!encrypted ? (
            <button type="button" class="link" onClick={turnOnEncryption}>
              Encrypt this conversation end to end
            </button>
          ) : null}
          <ErrorNote error={error} />
        </>
      ) : null}
    </section>
  );
}
