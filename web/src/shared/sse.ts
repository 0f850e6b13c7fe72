// A live event stream (Server-Sent Events) as the pages follow one: opened at an address the side gives,
// brought back after a lost connection without missing what came meanwhile (the last event id goes with
// the reconnection), its named events handed to the handlers of their kind, and a `logout` event that ends
// it. The app's (app/live.ts) opens with a single-use ticket and reopens itself; the console's
// (console/live.ts) opens with the member's cookie and lets the browser retry.
import { useEffect, useState } from "preact/hooks";

export type StreamStatus = "connecting" | "live" | "reconnecting";
export type Handler = (data: any) => void;

export interface StreamOptions<K extends string> {
  /** The event kinds handed to handlers (`logout` is the stream's own). */
  kinds: readonly K[];
  /**
   * The address of a new connection, given the id of the last event heard (null before any, and after
   * `stop`). Null: none now (signed out), the stream stays closed; a failure: tried again later.
   */
  url: (lastId: string | null) => string | null | Promise<string | null>;
  /**
   * How a lost connection comes back. `reopen`: closed at once and opened again here at a new `url` (which
   * carries the last id), after a delay growing from half a second to ten: for a single-use address the
   * browser could not retry. `browser`: the browser's own retry, which sends the last id as the
   * Last-Event-ID header; only when it gives up (the answer was not a stream), a new connection in 3 s.
   */
  reconnect: "reopen" | "browser";
  /** Each time the stream opens; `fresh` when it opened without a last id (what came before is not replayed). */
  opened?: (fresh: boolean) => void;
  /** Each change of status. */
  status?: (s: StreamStatus) => void;
}

export type EventStream<K extends string> = ReturnType<typeof eventStream<K>>;

export function eventStream<K extends string>(o: StreamOptions<K>) {
  const handlers = new Map<K, Set<Handler>>();
  const statusListeners = new Set<(s: StreamStatus) => void>();
  let source: EventSource | null = null;
  let lastId: string | null = null;
  let status: StreamStatus = "connecting";
  let running = false;
  /** Counts the openings: an address that arrives after a later opening (or `stop`) is not used. */
  let opening = 0;
  let retry = 0;
  let timer: number | undefined;
  let onLogout: () => void = () => undefined;
  let onClosed: () => void = () => undefined;

  function setStatus(s: StreamStatus) {
    status = s;
    o.status?.(s);
    statusListeners.forEach((l) => l(s));
  }

  /** Hands `data` to each handler of `kind` (also for events made up here, e.g. a `reset` when opened afresh). */
  function dispatch(kind: K, data: unknown) {
    handlers.get(kind)?.forEach((h) => {
      try {
        h(data);
      } catch (e) {
        console.error(e);
      }
    });
  }

  function open() {
    clearTimeout(timer);
    const mine = ++opening;
    const url = o.url(lastId);
    if (url === null || typeof url === "string") connect(url);
    else url.then((u) => mine === opening && connect(u), () => mine === opening && again());
  }

  function connect(url: string | null) {
    if (url === null) return;
    const es = new EventSource(url);
    source = es;
    const fresh = !lastId;
    es.onopen = () => {
      retry = 0;
      setStatus("live");
      o.opened?.(fresh);
    };
    for (const kind of o.kinds) {
      es.addEventListener(kind, (e) => {
        const m = e as MessageEvent;
        if (m.lastEventId) lastId = m.lastEventId;
        dispatch(kind, m.data ? JSON.parse(m.data) : {});
      });
    }
    es.addEventListener("logout", () => {
      stop();
      onLogout();
    });
    es.onerror = () => {
      if (source !== es) return;
      if (o.reconnect === "reopen") {
        es.close();
        source = null;
        again();
      } else {
        setStatus("reconnecting");
        if (es.readyState !== EventSource.CLOSED) return;
        source = null;
        timer = window.setTimeout(() => running && !source && open(), 3000);
      }
      onClosed();
    };
  }

  function again() {
    setStatus("reconnecting");
    retry = Math.min(retry + 1, 6);
    timer = window.setTimeout(open, Math.min(250 * 2 ** retry, 10_000));
  }

  /** Closes the stream (signing out); the next `start` opens it afresh. */
  function stop() {
    running = false;
    opening++;
    clearTimeout(timer);
    timer = undefined;
    source?.close();
    source = null;
    lastId = null;
    retry = 0;
    setStatus("connecting");
  }

  return {
    /**
     * Opens the stream, once until `stop`: `logout` when the server ends it because the sign-in ended,
     * `closed` each time the connection was lost for good (the caller may check its sign-in).
     */
    start(logout: () => void, closed: () => void = () => undefined): void {
      onLogout = logout;
      onClosed = closed;
      if (running) return;
      running = true;
      open();
    },
    stop,
    dispatch,
    /** Calls `h` with the body of each event of `kind` until the returned function is called. */
    on(kind: K, h: Handler): () => void {
      if (!handlers.has(kind)) handlers.set(kind, new Set());
      handlers.get(kind)!.add(h);
      return () => void handlers.get(kind)?.delete(h);
    },
    status: (): StreamStatus => status,
    /** Calls `l` with each new status until the returned function is called. */
    onStatus(l: (s: StreamStatus) => void): () => void {
      statusListeners.add(l);
      return () => void statusListeners.delete(l);
    },
  };
}

/** The stream's status, kept current in the calling component (a quiet "Reconnecting…" note). */
export function useStreamStatus(stream: { status: () => StreamStatus; onStatus: (l: (s: StreamStatus) => void) => () => void }): StreamStatus {
  const [, render] = useState(0);
  useEffect(() => stream.onStatus(() => render((n) => n + 1)), []);
  return stream.status();
}
