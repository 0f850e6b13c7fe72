// Offline: what the app last read from /me is kept in this browser (IndexedDB) and shown when the service
// cannot be reached, marked as such; what the user writes in a conversation while offline waits in an
// outbox here and is sent when the connection is back, each with its own idempotency key, so a retry (a
// lost answer, a second tab) never writes it twice. Signing out empties both.
import { useEffect, useState } from "preact/hooks";
import { database } from "../shared/idb";

const DB = "hubbub-offline"; // apart from the device key's database (keystore.ts), which outlives a session
const SAVED = "saved";
const OUTBOX = "outbox";

/** A reply written offline, waiting to be sent. `key` is its idempotency key (and its id here). */
export interface Queued {
  key: string;
  conversation: string;
  body: string;
  at: string;
  /** Why the service refused it (it is not retried then). */
  error?: string;
}

const run = database(DB, { [SAVED]: undefined, [OUTBOX]: { keyPath: "key" } });

// Offline or not: set by the outcome of each request (and the browser's online/offline events).
let offline = false;
let savedAt: string | null = null;
const listeners = new Set<() => void>();
const backOnline = new Set<() => void>();

function setOffline(value: boolean, at: string | null = null) {
  const was = offline;
  offline = value;
  savedAt = value ? (at ?? savedAt) : null;
  document.documentElement.dataset.offline = value ? "1" : "0";
  listeners.forEach((l) => l());
  if (was && !value) {
    backOnline.forEach((l) => l());
    void flush();
  }
}

/** Whether the app is showing saved data because the service cannot be reached, and as of when. */
export function useOffline(): { offline: boolean; savedAt: string | null } {
  const [, render] = useState(0);
  useEffect(() => {
    const l = () => render((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return { offline, savedAt };
}

/** Calls `f` when the connection is back after the app was offline (views fetch again then). */
export function onBackOnline(f: () => void): () => void {
  backOnline.add(f);
  return () => backOnline.delete(f);
}

/** A request reached the service. */
export function reached(): void {
  if (offline) setOffline(false);
}

/** Which GET responses are kept: the user's own reads, but never the stream's tickets or key material. */
const keep = (path: string) => path.startsWith("/me/") && !/\/keys\b|\/devices\b|\/push\b|\/events\b/.test(path);

/** Keeps what a GET of `path` answered. */
export function save(path: string, json: unknown): void {
  if (!keep(path)) return;
  run(SAVED, "readwrite", (s) => s.put({ json, at: new Date().toISOString() }, path)).catch(() => {});
}

/** What a GET of `path` last answered, when the service cannot be reached; marks the app offline. */
export async function recall<T>(path: string): Promise<T | undefined> {
  if (!keep(path)) return undefined;
  const hit = await run<{ json: T; at: string } | undefined>(SAVED, "readonly", (s) => s.get(path)).catch(() => undefined);
  setOffline(true, hit?.at ?? null);
  return hit?.json;
}

// The outbox.
const queuedListeners = new Set<() => void>();
const changed = () => queuedListeners.forEach((l) => l());

/** Keeps a reply to send when the connection is back. */
export async function queue(conversation: string, body: string): Promise<void> {
  const item: Queued = { key: crypto.randomUUID(), conversation, body, at: new Date().toISOString() };
  await run(OUTBOX, "readwrite", (s) => s.put(item));
  changed();
}

export async function queued(conversation: string): Promise<Queued[]> {
  const all = await run<Queued[]>(OUTBOX, "readonly", (s) => s.getAll()).catch(() => [] as Queued[]);
  return all.filter((q) => q.conversation === conversation).sort((a, b) => a.at.localeCompare(b.at));
}

export async function discard(key: string): Promise<void> {
  await run(OUTBOX, "readwrite", (s) => s.delete(key)).catch(() => {});
  changed();
}

/** The replies waiting for `conversation`, kept current. */
export function useQueued(conversation: string): Queued[] {
  const [items, setItems] = useState<Queued[]>([]);
  useEffect(() => {
    let live = true;
    const load = () => void queued(conversation).then((q) => live && setItems(q));
    load();
    queuedListeners.add(load);
    return () => {
      live = false;
      queuedListeners.delete(load);
    };
  }, [conversation]);
  return items;
}

/** How the outbox sends: set by the app (the API's POST), so this module stays below the API. */
type Sender = (q: Queued) => Promise<"sent" | "offline" | { refused: string }>;
let sender: Sender | null = null;
export function sendWith(f: Sender): void {
  sender = f;
  void flush();
}

let flushing: Promise<void> | null = null;
/** Sends what waits, oldest first; stops at the first that cannot reach the service. */
export function flush(): Promise<void> {
  flushing ??= (async () => {
    try {
      const all = await run<Queued[]>(OUTBOX, "readonly", (s) => s.getAll()).catch(() => [] as Queued[]);
      for (const q of all.filter((q) => !q.error).sort((a, b) => a.at.localeCompare(b.at))) {
        const outcome = sender ? await sender(q) : "offline";
        if (outcome === "offline") break;
        if (outcome === "sent") await run(OUTBOX, "readwrite", (s) => s.delete(q.key));
        else await run(OUTBOX, "readwrite", (s) => s.put({ ...q, error: outcome.refused }));
        changed();
      }
    } finally {
      flushing = null;
    }
  })();
  return flushing;
}

/** Empties what this browser kept (signing out, another user). */
export async function forget(): Promise<void> {
  await Promise.all([run(SAVED, "readwrite", (s) => s.clear()), run(OUTBOX, "readwrite", (s) => s.clear())]).catch(() => {});
  changed();
}

// The browser says the network is back: views fetch again and the outbox is sent (a request that still
// fails marks the app offline again).
window.addEventListener("online", () => (offline ? setOffline(false) : void flush()));
window.addEventListener("offline", () => setOffline(true));
