// The console's one live connection: the partner's conversation events (`GET /api/v1/conversations/events`,
// Server-Sent Events, opened with the member's session cookie). The browser reconnects by itself and sends
// the last event id, so what came meanwhile is replayed; a `reset` (or the stream opening at all) means
// "fetch afresh". Views subscribe with `useLive`; the header shows when the connection is being restored.
import { useEffect, useState } from "preact/hooks";

/** What a view hears: an event's kind and its body (`conversation.message`: `{conversation, message}`;
 * `conversation.updated`: the conversation), or `fresh` when everything should be fetched again. */
export type LiveEvent = { kind: "conversation.message" | "conversation.updated"; data: any } | { kind: "fresh" };

const handlers = new Set<(e: LiveEvent) => void>();
const statusListeners = new Set<() => void>();
let source: EventSource | null = null;
let status: "connecting" | "live" | "reconnecting" = "connecting";

function setStatus(s: typeof status) {
  status = s;
  statusListeners.forEach((l) => l());
}

const tell = (e: LiveEvent) => handlers.forEach((h) => h(e));

let stopped = false;

/** Opens the stream (once); `onLogout` when the server ends it because the session ended, `onClosed` when
 * the browser gave up on it (the caller checks the session). */
export function startLive(onLogout: () => void, onClosed: () => void = () => undefined): void {
  if (source) return;
  stopped = false;
  const s = new EventSource("/api/v1/conversations/events");
  source = s;
  s.onopen = () => {
    setStatus("live");
    tell({ kind: "fresh" });
  };
  s.onerror = () => {
    setStatus("reconnecting");
    // The browser retries by itself unless the answer was not a stream (the host down behind a proxy, the
    // session ended): then a new connection in a few seconds, and the next request finds out which.
    if (s.readyState === EventSource.CLOSED && source === s) {
      source = null;
      setTimeout(() => {
        if (!source && !stopped) startLive(onLogout, onClosed);
      }, 3000);
      onClosed();
    }
  };
  for (const kind of ["conversation.message", "conversation.updated"] as const) {
    s.addEventListener(kind, (e) => tell({ kind, data: JSON.parse((e as MessageEvent).data) }));
  }
  s.addEventListener("reset", () => tell({ kind: "fresh" }));
  s.addEventListener("logout", () => {
    stopLive();
    onLogout();
  });
}

export function stopLive(): void {
  stopped = true;
  source?.close();
  source = null;
  setStatus("connecting");
}

/** Calls `f` for each live event while the calling view is shown. */
export function useLive(f: (e: LiveEvent) => void, deps: unknown[]): void {
  useEffect(() => {
    handlers.add(f);
    return () => void handlers.delete(f);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
}

/** Whether the live connection is up (`live`), or being restored. */
export function useLiveStatus(): typeof status {
  const [, render] = useState(0);
  useEffect(() => {
    const l = () => render((n) => n + 1);
    statusListeners.add(l);
    return () => void statusListeners.delete(l);
  }, []);
  return status;
}
