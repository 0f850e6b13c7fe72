// The hub: every message newest first, rendered by content type; unread markers; cursor paging as the
// user scrolls; new and changed messages arriving live (the event stream); E2E messages opened in the browser.
import { useEffect, useRef, useState } from "preact/hooks";
import { auth, enc, get, post, type FlowCard, type Message, type Page } from "../api";
import { hubAad, open, type Envelope } from "../../shared/e2e";
import { deviceKey } from "../keystore";
import { navigate } from "../router";
import { Summary } from "../steps";
import { onLive } from "../live";
import { declineOffer, shouldOffer, turnOnPush } from "../push";
import { SearchBox, useSearch } from "../search";
import { documentKind, openViewer, type Viewable } from "../viewer";
import { onBackOnline, save } from "../offline";
import { ErrorNote, Loading, useTitle } from "../util";
import { when } from "../../shared/format";

// The inbox survives navigation: going back to it shows it at once.
interface InboxState {
  items: Message[];
  cursor: string | null;
  done: boolean;
  loaded: boolean;
}
let inbox: InboxState = { items: [], cursor: null, done: false, loaded: false };
const subscribers = new Set<() => void>();
let saving: number | undefined;
function update(f: (s: InboxState) => InboxState) {
  inbox = f(inbox);
  subscribers.forEach((s) => s());
  // What the inbox shows (live changes too) is what it shows offline.
  clearTimeout(saving);
  saving = window.setTimeout(() => inbox.loaded && save(FIRST_PAGE, { data: inbox.items, next_cursor: inbox.cursor }), 300);
}
export function resetInbox() {
  inbox = { items: [], cursor: null, done: false, loaded: false };
  opened.clear();
  changedAt.clear();
}

/** Changes to single messages (live, or made here) counted, and the count at each message's last change:
 * a page asked for before a message changed is older than what is shown of it, and does not overwrite it. */
let changes = 0;
const changedAt = new Map<string, number>();

/** `fresh` merged into `old`; `askedAt` is the count of changes when `fresh` was asked for (none: newer than all). */
function merge(old: Message[], fresh: Message[], askedAt = Infinity): Message[] {
  const byRef = new Map(old.map((m) => [m.ref, m]));
  for (const m of fresh) {
    const shown = byRef.get(m.ref);
    if (shown && (changedAt.get(m.ref) ?? 0) > askedAt) continue;
    byRef.set(m.ref, { ...shown, ...m });
  }
  return [...byRef.values()].sort((a, b) => b.message_id - a.message_id);
}
function changed(ref: string) {
  changedAt.set(ref, ++changes);
}

export function cachedMessage(ref: string): Message | undefined {
  return inbox.items.find((m) => m.ref === ref);
}
export function cachedFlowCard(flowRef: string): Message | undefined {
  return inbox.items.find((m) => (m.flow as FlowCard | null)?.ref === flowRef);
}
export function rememberMessage(m: Message) {
  changed(m.ref);
  update((s) => ({ ...s, items: merge(s.items, [m]) }));
}

const PAGE = 50;
const FIRST_PAGE = `/me/messages?limit=${PAGE}`;

// Live: a message arriving or changing (read on another device) is merged in as it comes, whether or not
// the inbox is on screen; after a gap the stream could not replay, the newest page is fetched again.
onLive("message.created", (m: Message) => rememberMessage(m));
onLive("message.updated", (m: Message) => rememberMessage(m));
onLive("reset", () => refetch());
onBackOnline(() => refetch());

/** The newest page fetched again, if the inbox was loaded or its first page is on its way. A fetch on its
 * way may be answered with a page older than what this ask is about (a stream that opened after the server
 * answered starts after messages that page does not have), so it is fetched once more when it is back. */
function refetch() {
  if (firstLoad) askedAgain = true;
  else if (inbox.loaded) loadFirst().catch(() => {});
}

/** The newest page's fetch on its way (joined by whoever asks for it meanwhile), and whether a refetch was
 * asked for while it was. */
let firstLoad: Promise<void> | null = null;
let askedAgain = false;
function loadFirst(): Promise<void> {
  if (firstLoad) return firstLoad;
  firstLoad = (async () => {
    try {
      do {
        askedAgain = false;
        await fetchFirst();
      } while (askedAgain);
    } finally {
      firstLoad = null;
    }
  })();
  return firstLoad;
}

async function fetchFirst() {
  const asked = changes;
  const page = await get<Page<Message>>(FIRST_PAGE);
  update((s) => ({
    ...s,
    items: merge(s.items, page.data, asked),
    cursor: s.loaded ? s.cursor : page.next_cursor ?? null,
    done: s.loaded ? s.done : !page.next_cursor,
    loaded: true,
  }));
}

let loadingMore = false;
async function loadMore() {
  if (loadingMore || inbox.done || !inbox.cursor) return;
  loadingMore = true;
  try {
    const asked = changes;
    const page = await get<Page<Message>>(`/me/messages?limit=${PAGE}&cursor=${enc(inbox.cursor)}`);
    update((s) => ({ ...s, items: merge(s.items, page.data, asked), cursor: page.next_cursor ?? null, done: !page.next_cursor }));
  } finally {
    loadingMore = false;
  }
}

export function useInbox(): InboxState {
  const [, set] = useState(0);
  useEffect(() => {
    const s = () => set((n) => n + 1);
    subscribers.add(s);
    return () => void subscribers.delete(s);
  }, []);
  return inbox;
}

const opened = new Set<string>();
/** Marks a message read (once), here and on the server. */
export async function markRead(m: Message) {
  if (m.state === "read" || opened.has(m.ref)) return;
  opened.add(m.ref);
  changed(m.ref);
  update((s) => ({ ...s, items: s.items.map((x) => (x.ref === m.ref ? { ...x, state: "read" } : x)) }));
  try {
    await post(`/me/messages/${enc(m.ref)}/read?device_uuid=${enc(auth.device())}`);
  } catch {
    opened.delete(m.ref);
  }
}

/** Marks a message read by its ref (the cached record if the inbox has it). */
export function markReadRef(ref: string) {
  return markRead(cachedMessage(ref) ?? ({ ref } as Message));
}

export const unread = (m: Message) => m.direction === "out" && m.state !== "read" && m.state !== "failed";

export function Inbox() {
  useTitle("Inbox");
  const state = useInbox();
  const [error, setError] = useState<unknown>(null);
  const sentinel = useRef<HTMLDivElement>(null);

  useEffect(() => {
    loadFirst().catch(setError);
  }, []);

  useEffect(() => {
    const el = sentinel.current;
    if (!el) return;
    const io = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) loadMore().catch(setError);
    }, { rootMargin: "400px" });
    io.observe(el);
    return () => io.disconnect();
  }, [state.loaded, state.done]);

  const search = useSearch<Message>("/me/messages");
  const count = state.items.filter(unread).length;
  if (search.q.trim())
    return (
      <section aria-labelledby="inbox-h">
        <h1 id="inbox-h">Inbox</h1>
        <SearchBox search={search} label="Search messages" />
        <ErrorNote error={search.error} />
        {search.results === null || (search.searching && !search.results.length) ? <Loading what="Searching" /> : null}
        {search.results?.length === 0 && !search.searching && !search.error ? (
          <p class="empty" role="status">
            No messages match “{search.q.trim()}”.
          </p>
        ) : null}
        <ol class="messages" aria-label="Search results">
          {search.results?.map((m) => (
            <li key={m.ref}>
              <MessageCard m={cachedMessage(m.ref) ?? m} />
            </li>
          ))}
        </ol>
        {search.more ? (
          <button type="button" onClick={search.more}>
            More results
          </button>
        ) : null}
      </section>
    );
  return (
    <section aria-labelledby="inbox-h">
      <h1 id="inbox-h">
        Inbox {count ? <span class="badge">{count} unread</span> : null}
      </h1>
      <SearchBox search={search} label="Search messages" />
      {state.loaded && state.items.length > 0 ? <PushOffer /> : null}
      <ErrorNote error={error} />
      {!state.loaded && !error ? <Loading what="Loading your messages" /> : null}
      {state.loaded && state.items.length === 0 ? <p class="empty">No messages yet. They will appear here as they arrive.</p> : null}
      <ol class="messages" aria-live="polite">
        {state.items.map((m) => (
          <li key={m.ref}>
            <MessageCard m={m} />
          </li>
        ))}
      </ol>
      {state.loaded && !state.done ? (
        <div ref={sentinel} class="sentinel">
          <button type="button" onClick={() => loadMore().catch(setError)}>
            Load older messages
          </button>
        </div>
      ) : null}
    </section>
  );
}

const TYPE_LABEL: Record<string, string> = {
  text: "Message",
  image: "Image",
  document: "Document",
  audio: "Audio",
  video: "Video",
  link: "Link",
  html: "Newsletter",
  system: "Notice",
};

function heading(m: Message): string {
  if (m.encryption === "e2e") return "Encrypted message";
  if (m.flow) return (m.flow as FlowCard).title || "Form";
  if (m.content_type === "html") return m.subject || "Newsletter";
  if (m.content_type === "link") return m.link?.title || m.link?.label || "Link";
  return TYPE_LABEL[m.content_type] ?? "Message";
}

/** An image message as the viewer shows it: its alt text is its caption (never a file name). */
function viewable(m: Message): Viewable {
  const caption = (m.rendered_body ?? m.body)?.trim() || null;
  return { ref: m.ref, kind: "image", src: mediaSrc(m), alt: caption ?? `Image from ${m.partner_name}`, caption, filename: m.media?.filename ?? null };
}

/** The images the viewer moves through from `m`: the inbox's, newest first, or `m` alone. */
function viewables(m: Message): Viewable[] {
  const images = inbox.items.filter((x) => x.content_type === "image" && x.encryption !== "e2e" && !x.flow);
  return (images.some((x) => x.ref === m.ref) ? images : [m]).map(viewable);
}

/** Where a message's bytes are: its content link (the ref is the capability, so <img> needs no token). */
function mediaSrc(m: Message): string {
  const url = m.media?.url ?? "";
  return /^https:\/\//.test(url) ? url : `/api/v1/content/${enc(m.ref)}`;
}

export function MessageCard({ m, full = false }: { m: Message; full?: boolean }) {
  const isUnread = unread(m);
  const cls = ["msg", "card", `t-${m.content_type}`, isUnread ? "unread" : "", m.encryption === "e2e" ? "e2e" : "", m.flow ? "flow" : ""].join(" ");
  return (
    <article class={cls} aria-label={`${heading(m)} from ${m.partner_name}${isUnread ? ", unread" : ""}`}>
      <header>
        {isUnread ? <span class="dot" title="Unread" aria-hidden="true" /> : null}
        <h2>
          {full ? heading(m) : <a href={`/m/${enc(m.ref)}`}>{heading(m)}</a>}
        </h2>
        {isUnread ? <span class="sr-only">Unread</span> : null}
        <span class="meta">
          {m.partner_name} · <time dateTime={m.created_at}>{when(m.created_at, "short")}</time>
        </span>
      </header>
      <Body m={m} full={full} />
    </article>
  );
}

function Body({ m, full }: { m: Message; full: boolean }) {
  if (m.encryption === "e2e") return <Sealed m={m} />;
  if (m.flow) return <FlowCardBody m={m} card={m.flow as FlowCard} />;
  const text = m.rendered_body ?? m.body;
  const caption = text ? <p class="text">{text}</p> : null;
  switch (m.content_type) {
    case "image": {
      const alt = viewable(m).alt;
      return (
        <>
          <button type="button" class="media-open" onClick={() => openViewer(viewables(m), m.ref)} aria-label={`Open the image full size: ${alt}`}>
            <img class="media" src={mediaSrc(m)} alt={alt} loading="lazy" />
          </button>
          {caption}
        </>
      );
    }
    case "audio":
      return (
        <>
          <audio class="media" controls preload="none" src={mediaSrc(m)} aria-label={m.media?.filename || "Audio"} />
          {caption}
        </>
      );
    case "video":
      return (
        <>
          <video class="media" controls preload="metadata" src={mediaSrc(m)} aria-label={m.media?.filename || "Video"} />
          {caption}
        </>
      );
    case "document": {
      const name = m.media?.filename || "document";
      // Stored documents open in place; one a partner linked to elsewhere is that site's to show.
      const kind = mediaSrc(m).startsWith("/") ? documentKind(m.media?.mimetype, m.media?.filename) : null;
      const open = (): Viewable => ({ ref: m.ref, kind: kind!, src: mediaSrc(m), alt: name, caption: text?.trim() || null, filename: m.media?.filename ?? null });
      return (
        <>
          {caption}
          <div class="doc-actions">
            {kind ? (
              <button type="button" class="button primary" onClick={() => openViewer([open()], m.ref)} aria-label={`Open ${name}`}>
                Open {name}
              </button>
            ) : null}
            <a class="button" href={mediaSrc(m)} download={m.media?.filename || true} data-external>
              Download {name}
              {m.media?.size ? ` (${Math.ceil(m.media.size / 1024)} KB)` : ""}
            </a>
          </div>
        </>
      );
    }
    case "link": {
      const l = m.link!;
      return (
        <div class="cta">
          {l.image_url ? <img src={l.image_url} alt="" loading="lazy" /> : null}
          {caption}
          {l.description ? <p class="muted">{l.description}</p> : null}
          <a class="button primary" href={l.url} target="_blank" rel="noopener noreferrer" data-external>
            {l.label || "Open link"}
          </a>
        </div>
      );
    }
    case "html":
      return (
        <>
          {m.preview ? <p class="muted">{m.preview}</p> : null}
          {!full ? (
            <a class="button" href={`/m/${enc(m.ref)}`}>
              Read newsletter
            </a>
          ) : null}
        </>
      );
    case "system":
      return <p class="text system-text">{text}</p>;
    default:
      return caption;
  }
}

function FlowCardBody({ m, card }: { m: Message; card: FlowCard }) {
  if (card.state === "completed") {
    return (
      <div>
        <p class="status-pill done">Completed · read only</p>
        {card.summary ? <Summary summary={card.summary} /> : null}
      </div>
    );
  }
  return (
    <div>
      {m.body ? <p class="text">{m.body}</p> : null}
      <a class="button primary" href={`/forms/${enc(card.ref)}`}>
        {card.state === "in_progress" ? "Continue the form" : "Open the form"}
      </a>
    </div>
  );
}

// Decrypted hub messages, by ref, for this page's life.
const plain = new Map<string, Promise<string>>();

export function openSealed(m: Message): Promise<string> {
  let p = plain.get(m.ref);
  if (!p) {
    p = (async () => {
      const key = await deviceKey();
      return open(m.e2e_envelope as Envelope, auth.device(), key, hubAad(m.partner, m.ref));
    })();
    plain.set(m.ref, p);
  }
  return p;
}

function Sealed({ m }: { m: Message }) {
  const [state, setState] = useState<{ text?: string; failed?: boolean }>({});
  useEffect(() => {
    let live = true;
    openSealed(m).then(
      (text) => live && setState({ text }),
      () => live && setState({ failed: true }),
    );
    return () => {
      live = false;
    };
  }, [m.ref]);
  if (state.text !== undefined)
    return (
      <p class="text">
        <span class="lock" aria-hidden="true">🔒 </span>
        <span class="sr-only">End-to-end encrypted: </span>
        {state.text}
      </p>
    );
  if (state.failed)
    return (
      <p class="unreadable" role="note">
        This encrypted message can't be read on this device: it was sealed for your other devices, or before this browser's key was published.
      </p>
    );
  return <p class="muted">Decrypting…</p>;
}

/** `/m/{ref}`: one message; newsletters open in the full-screen reader. Opening marks it read. */
export function MessageView({ msgRef: reference }: { msgRef: string }) {
  const state = useInbox();
  const m = state.items.find((x) => x.ref === reference);
  const [error, setError] = useState<unknown>(null);
  useTitle(m ? heading(m) : "Message");
  useEffect(() => {
    if (m) return;
    get<Message>(`/me/messages/${enc(reference)}`).then(rememberMessage, async (e) => {
      // A host without GET /me/messages/{ref}: look in the newest page.
      await loadFirst().catch(() => {});
      if (!cachedMessage(reference)) setError(e);
    });
  }, [reference]);
  useEffect(() => {
    if (m) markRead(m);
  }, [m?.ref]);
  if (error) return <section><h1>Message</h1><ErrorNote error={error} /><a href="/">Back to the inbox</a></section>;
  if (!m) return <Loading what="Opening the message" />;
  if (m.content_type === "html" && m.encryption !== "e2e") return <Reader m={m} />;
  return (
    <section class="detail">
      <p>
        <a href="/" class="back">← Inbox</a>
      </p>
      <MessageCard m={m} full />
    </section>
  );
}

function Reader({ m }: { m: Message }) {
  const close = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    close.current?.focus();
    const onKey = (e: KeyboardEvent) => e.key === "Escape" && back();
    document.addEventListener("keydown", onKey);
    document.body.classList.add("no-scroll");
    return () => {
      document.removeEventListener("keydown", onKey);
      document.body.classList.remove("no-scroll");
    };
  }, []);
  const back = () => (history.state?.app ? history.back() : navigate("/"));
  const title = m.subject || "Newsletter";
  return (
    <div class="reader" role="dialog" aria-modal="true" aria-labelledby="reader-h">
      <div class="reader-bar">
        <button type="button" ref={close} onClick={back}>
          ← Close
        </button>
        <h1 id="reader-h">{title}</h1>
        <span class="meta">{m.partner_name}</span>
      </div>
      {/* No scripts, no same-origin, no forms: the partner's HTML can only be read. */}
      <iframe title={title} src={`/api/v1/content/${enc(m.ref)}`} sandbox="allow-popups allow-popups-to-escape-sandbox" referrerpolicy="no-referrer" />
    </div>
  );
}

/** Offers notifications once the user has messages (never on first load of an empty app); asks the browser
 * only when they say yes. */
function PushOffer() {
  const [shown, setShown] = useState(shouldOffer);
  const [error, setError] = useState<unknown>(null);
  if (!shown) return null;
  const yes = async () => {
    try {
      await turnOnPush();
      declineOffer();
      setShown(false);
    } catch (e) {
      setError(e);
    }
  };
  return (
    <div class="card offer" role="region" aria-label="Notifications">
      <p>Get a notification when a message arrives while Hubbub is closed?</p>
      <ErrorNote error={error} />
      <div class="row">
        <button type="button" class="primary" onClick={yes}>
          Turn on notifications
        </button>
        <button
          type="button"
          onClick={() => {
            declineOffer();
            setShown(false);
          }}
        >
          Not now
        </button>
      </div>
    </div>
  );
}
