import { useEffect, useRef, useState } from "preact/hooks";
import { errorText } from "../shared/format";
import { onBackOnline } from "./offline";

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {errorText(error, { own: true })}
    </p>
  );
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
