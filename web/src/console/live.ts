// The console's one live connection: the partner's conversation events and its webhook log's moves
// (`GET /api/v1/conversations/events`,
// Server-Sent Events, opened with the member's session cookie). The browser reconnects by itself and sends
// the last event id, so what came meanwhile is replayed; a `reset` (or the stream opening at all) means
// "fetch afresh". Views subscribe with `useLive`; the header shows when the connection is being restored.
import { useEffect } from "preact/hooks";
import { eventStream, useStreamStatus, type StreamStatus } from "../shared/sse";

/** What a view hears: an event's kind and its body (`conversation.message`: `{conversation, message}`;
 * `conversation.updated`: the conversation), or `fresh` when everything should be fetched again. */
export type LiveEvent = { kind: "conversation.message" | "conversation.updated"; data: any } | { kind: "fresh" };

const stream = eventStream({
  kinds: ["conversation.message", "conversation.updated", "conversation.typing", "webhook.deliveries", "reset"],
  reconnect: "browser",
  url: () => "/api/v1/conversations/events",
  opened: () => stream.dispatch("reset", {}),
});

/** Opens the stream (once); `onLogout` when the server ends it because the session ended, `onClosed` when
 * the browser gave up on it (the caller checks the session). */
export function startLive(onLogout: () => void, onClosed: () => void = () => undefined): void {
  stream.start(onLogout, onClosed);
}

export const stopLive = stream.stop;

/** Calls `f` for each live event while the calling view is shown. */
export function useLive(f: (e: LiveEvent) => void, deps: unknown[]): void {
  useEffect(() => {
    const offs = [
      stream.on("conversation.message", (data) => f({ kind: "conversation.message", data })),
      stream.on("conversation.updated", (data) => f({ kind: "conversation.updated", data })),
      stream.on("reset", () => f({ kind: "fresh" })),
    ];
    return () => offs.forEach((off) => off());
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
}

/** Calls `f` with the conversation's id when the person writes in it (`conversation.typing`), while the
 * calling view is shown. */
export function useLiveTyping(f: (conversationId: number) => void, deps: unknown[]): void {
  useEffect(() => stream.on("conversation.typing", (data) => f(data.conversation_id)), deps);
}

/** Calls `f` when the partner's webhook deliveries moved (tried: one event a batch), or when everything
 * should be fetched again, while the calling view is shown; at most once a second (a busy endpoint moves
 * many times a second), the last call never dropped. */
export function useLiveDeliveries(f: () => void, deps: unknown[]): void {
  useEffect(() => {
    let last = 0;
    let timer: number | undefined;
    const soon = () => {
      if (timer !== undefined) return;
      timer = window.setTimeout(() => {
        timer = undefined;
        last = Date.now();
        f();
      }, Math.max(0, last + 1000 - Date.now()));
    };
    const offs = [stream.on("webhook.deliveries", soon), stream.on("reset", soon)];
    return () => {
      clearTimeout(timer);
      offs.forEach((off) => off());
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
}

/** Whether the live connection is up (`live`), or being restored. */
export const useLiveStatus = (): StreamStatus => useStreamStatus(stream);
