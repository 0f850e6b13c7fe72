// Search in the app's lists: a search box that asks the server (`q` on /me/messages and /me/conversations,
// served by a text index) as the user types, and pages through what matches.
import { useEffect, useRef, useState } from "preact/hooks";
import { get, type Page } from "./api";

export interface Search<T> {
  q: string;
  setQ: (q: string) => void;
  /** What matches, once asked; null while the box is empty. */
  results: T[] | null;
  searching: boolean;
  error: unknown;
  more: (() => void) | null;
}

/** Searches `path` (a list taking `q`) for what is typed, a moment after the typing stops. */
export function useSearch<T>(path: string): Search<T> {
  const [q, setQ] = useState("");
  const [results, setResults] = useState<T[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [searching, setSearching] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const asked = useRef(0);

  const ask = async (text: string, after: string | null) => {
    const n = ++asked.current;
    setSearching(true);
    setError(null);
    try {
      const sep = path.includes("?") ? "&" : "?";
      const page = await get<Page<T>>(`${path}${sep}q=${encodeURIComponent(text)}` + (after ? `&cursor=${encodeURIComponent(after)}` : ""));
      if (n !== asked.current) return; // a newer search answered, or will
      setResults((old) => (after && old ? [...old, ...page.data] : page.data));
      setCursor(page.next_cursor ?? null);
    } catch (e) {
      if (n === asked.current) setError(e);
    } finally {
      if (n === asked.current) setSearching(false);
    }
  };

  useEffect(() => {
    const text = q.trim();
    if (!text) {
      asked.current++;
      setResults(null);
      setCursor(null);
      setError(null);
      setSearching(false);
      return;
    }
    const t = window.setTimeout(() => ask(text, null), 250);
    return () => clearTimeout(t);
  }, [q, path]);

  return { q, setQ, results, searching, error, more: cursor ? () => ask(q.trim(), cursor) : null };
}

/** The search box of a list. */
export function SearchBox({ search, label }: { search: Search<unknown>; label: string }) {
  return (
    <form role="search" class="search" onSubmit={(e) => e.preventDefault()}>
      <label for="search-q" class="sr-only">
        {label}
      </label>
      <input
        id="search-q"
        type="search"
        placeholder={label}
        value={search.q}
        autocomplete="off"
        onInput={(e) => search.setQ((e.target as HTMLInputElement).value)}
        onKeyDown={(e) => e.key === "Escape" && search.setQ("")}
      />
    </form>
  );
}
