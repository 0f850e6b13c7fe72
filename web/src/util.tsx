import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "./api";
import { onBackOnline } from "./offline";

export function errorText(e: unknown): string {
  if (e instanceof ApiError) {
    if (e.code === "bot_error") return "The bot failed to answer. Your answers are kept: try again.";
    if (e.code === "rate_limited") return "Too many tries. Wait a moment and try again.";
    return e.message;
  }
  return e instanceof Error ? e.message : String(e);
}

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {errorText(error)}
    </p>
  );
}

/** Record times are `YYYY-MM-DD HH:MM:SS` UTC. */
export function when(t?: string | null): string {
  if (!t) return "";
  const d = new Date(t.replace(" ", "T") + (t.endsWith("Z") ? "" : "Z"));
  if (isNaN(d.getTime())) return t;
  const now = new Date();
  const sameDay = d.toDateString() === now.toDateString();
  return sameDay
    ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : d.toLocaleDateString([], { day: "numeric", month: "short", year: d.getFullYear() === now.getFullYear() ? undefined : "numeric" });
}

export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <p class="muted" role="status">
      {what}…
    </p>
  );
}

// The tab title: the view's name, after the count of what is unread (set by unread.ts).
let titleBase = "Hubbub";
let titleCount = 0;
const renderTitle = () => (document.title = (titleCount ? `(${titleCount}) ` : "") + titleBase);

export function setTitleCount(n: number): void {
  titleCount = n;
  renderTitle();
}

export function useTitle(t: string): void {
  useEffect(() => {
    titleBase = t ? `${t} · Hubbub` : "Hubbub";
    renderTitle();
  }, [t]);
}

export function useAsync<T>(
  f: () => Promise<T>,
  deps: unknown[],
): { data?: T; error?: unknown; reload: () => void; update: (change: (t: T) => T) => void } {
  const [state, setState] = useState<{ data?: T; error?: unknown }>({});
  const [n, setN] = useState(0);
  // A change set from a live event while a fetch is on its way may be missing from that fetch's answer
  // (the server answered before the change): then that answer is not shown over it, and is fetched again.
  const loading = useRef(false);
  const changed = useRef(false);
  useEffect(() => {
    let live = true;
    loading.current = true;
    changed.current = false;
    f().then(
      (data) => {
        if (!live) return;
        loading.current = false;
        if (changed.current) setN((x) => x + 1);
        else setState({ data });
      },
      (error) => {
        if (!live) return;
        loading.current = false;
        setState({ error });
      },
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  // Shown from what was saved while offline: fetched again once the connection is back.
  useEffect(() => onBackOnline(() => setN((x) => x + 1)), []);
  const reload = () => setN((x) => x + 1);
  // A live change to what is shown; with nothing shown yet (the first answer on its way may have left it
  // out), asked again.
  const update = (change: (t: T) => T) => {
    if (state.data === undefined) return reload();
    if (loading.current) changed.current = true;
    setState((s) => (s.data === undefined ? s : { data: change(s.data) }));
  };
  return { ...state, reload, update };
}
