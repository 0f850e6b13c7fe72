// The user's live events (GET /api/v1/me/events, Server-Sent Events): one stream for the whole app, opened
// with a single-use ticket (an EventSource cannot send the token, and the token never goes in a URL),
// reopened with the last event id after a lost connection so nothing is missed or shown twice.
import { useEffect, useRef } from "preact/hooks";
import { eventStream, useStreamStatus, type Handler, type StreamStatus } from "../shared/sse";
import { auth, post } from "./api";

export type LiveKind =
  | "message.created"
  | "message.updated"
  | "conversation.message"
  | "conversation.updated"
  | "conversation.typing"
  | "flow.updated"
  | "account.updated"
  | "reset";
const KINDS: LiveKind[] = ["message.created", "message.updated", "conversation.message", "conversation.updated", "conversation.typing", "flow.updated", "account.updated", "reset"];
export type LiveStatus = StreamStatus;

const stream = eventStream<LiveKind>({
  kinds: KINDS,
  // The browser would retry with the used ticket: closed, and reopened with a fresh one.
  reconnect: "reopen",
  // Signed out: none. A ticket that cannot be had (signed out: the API call already sent the app to the login
  // screen; or offline) is asked for again later.
  url: async (lastId) => {
    if (!auth.token()) return null;
    const ticket = (await post<{ ticket: string }>("/me/events/ticket")).ticket;
    return `/api/v1/me/events?ticket=${encodeURIComponent(ticket)}` + (lastId ? `&last_event_id=${encodeURIComponent(lastId)}` : "");
  },
  // A stream opened without a last id starts with what comes next: what came before it opened (say, between
  // a view's first fetch and now) is fetched again by the views, as after a reset.
  opened: (fresh) => fresh && stream.dispatch("reset", {}),
  status: (s) => (document.documentElement.dataset.live = s),
});

/** Opens the stream (once per sign-in); `logout` is called when the server ends it for a signed-out token. */
export function startLive(logout: () => void) {
  stream.start(logout);
}

/** Closes the stream (logging out). */
export const close = stream.stop;

/** Calls `handler` with the body of each live event of this kind, for the app's whole life (module state). */
export function onLive(kind: LiveKind, handler: Handler): void {
  stream.on(kind, handler);
}

/** Calls `handler` with the body of each live event of these kinds while the component is mounted. */
export function useLive(kinds: LiveKind[], handler: Handler, deps: unknown[] = []): void {
  const ref = useRef(handler);
  ref.current = handler;
  useEffect(() => {
    const h: Handler = (d) => ref.current(d);
    const offs = kinds.map((k) => stream.on(k, h));
    return () => offs.forEach((off) => off());
  }, deps);
}

/** The stream's state, for a quiet "reconnecting" note. */
export const useLiveStatus = (): LiveStatus => useStreamStatus(stream);
