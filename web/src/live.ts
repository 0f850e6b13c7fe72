// The user's live events (GET /api/v1/me/events, Server-Sent Events): one stream for the whole app, opened
// with a single-use ticket (an EventSource cannot send the token, and the token never goes in a URL),
// reopened with the last event id after a lost connection so nothing is missed or shown twice.
import { useEffect, useRef, useState } from "preact/hooks";
import { auth, post } from "./api";

export type LiveKind =
  | "message.created"
  | "message.updated"
  | "conversation.message"
  | "conversation.updated"
  | "flow.updated"
  | "account.updated"
  | "reset";
const KINDS: LiveKind[] = ["message.created", "message.updated", "conversation.message", "conversation.updated", "flow.updated", "account.updated", "reset"];

type Handler = (data: any) => void;
const handlers = new Map<LiveKind, Set<Handler>>();
const statusListeners = new Set<(s: LiveStatus) => void>();
export type LiveStatus = "connecting" | "live" | "reconnecting";

let source: EventSource | null = null;
let lastId: string | null = null;
let status: LiveStatus = "connecting";
let retry = 0;
let timer: number | undefined;
let onLogout: (() => void) | null = null;

function setStatus(s: LiveStatus) {
  status = s;
  document.documentElement.dataset.live = s;
  statusListeners.forEach((l) => l(s));
}

function dispatch(kind: LiveKind, data: unknown) {
  handlers.get(kind)?.forEach((h) => {
    try {
      h(data);
    } catch (e) {
      console.error(e);
    }
  });
}

async function open() {
  clearTimeout(timer);
  if (!auth.token()) return;
  let ticket: string;
  try {
    ticket = (await post<{ ticket: string }>("/me/events/ticket")).ticket;
  } catch {
    // Signed out (the API call already sent the app to the login screen), or offline: try again later.
    return again();
  }
  const url = `/api/v1/me/events?ticket=${encodeURIComponent(ticket)}` + (lastId ? `&last_event_id=${encodeURIComponent(lastId)}` : "");
  const es = new EventSource(url);
  source = es;
  const fresh = !lastId;
  es.onopen = () => {
    retry = 0;
    setStatus("live");
    // A stream opened without a last id starts with what comes next: what came before it opened (say,
    // between a view's first fetch and now) is fetched again by the views, as after a reset.
    if (fresh) dispatch("reset", {});
  };
  for (const kind of KINDS) {
    es.addEventListener(kind, (e) => {
      const m = e as MessageEvent;
      if (m.lastEventId) lastId = m.lastEventId;
      dispatch(kind, m.data ? JSON.parse(m.data) : {});
    });
  }
  es.addEventListener("logout", () => {
    close();
    onLogout?.();
  });
  // The browser would retry with the used ticket: close, and reopen with a fresh one.
  es.onerror = () => {
    if (source !== es) return;
    es.close();
    source = null;
    again();
  };
}

function again() {
  setStatus("reconnecting");
  retry = Math.min(retry + 1, 6);
  timer = window.setTimeout(open, Math.min(250 * 2 ** retry, 10_000));
}

/** Opens the stream (once per sign-in); `logout` is called when the server ends it for a signed-out token. */
export function startLive(logout: () => void) {
  onLogout = logout;
  if (!source && timer === undefined) open();
}

/** Closes the stream (logging out). */
export function close() {
  clearTimeout(timer);
  timer = undefined;
  source?.close();
  source = null;
  lastId = null;
  retry = 0;
  setStatus("connecting");
}

/** Calls `handler` with the body of each live event of this kind, for the app's whole life (module state). */
export function onLive(kind: LiveKind, handler: Handler): void {
  if (!handlers.has(kind)) handlers.set(kind, new Set());
  handlers.get(kind)!.add(handler);
}

/** Calls `handler` with the body of each live event of these kinds while the component is mounted. */
export function useLive(kinds: LiveKind[], handler: Handler, deps: unknown[] = []): void {
  const ref = useRef(handler);
  ref.current = handler;
  useEffect(() => {
    const h: Handler = (d) => ref.current(d);
    kinds.forEach((k) => {
      if (!handlers.has(k)) handlers.set(k, new Set());
      handlers.get(k)!.add(h);
    });
    return () => kinds.forEach((k) => handlers.get(k)?.delete(h));
  }, deps);
}

/** The stream's state, for a quiet "reconnecting" note. */
export function useLiveStatus(): LiveStatus {
  const [s, set] = useState(status);
  useEffect(() => {
    statusListeners.add(set);
    return () => void statusListeners.delete(set);
  }, []);
  return s;
}
