// What a console page begins with: the tab's title, and for a page that shows one list, the list, its
// error, a status line, `load` that fetches it and `act` that makes a change.
import { useEffect, useState } from "preact/hooks";
import { errorText } from "../shared/format";
import { get, type Page } from "./api";

/** The tab's title, set as the page opens: `name · Hubbub console`. */
export function useTitle(name: string): void {
  useEffect(() => {
    document.title = `${name} · Hubbub console`;
  }, []);
}

/**
 * How a page makes a change: the error cleared, `what` done, what it says (`done`, or the text `what`
 * answers) put in the status, the page's data fetched again with `reload`; a failure's text in the error.
 */
export function acting(reload: () => unknown, setError: (e: string | null) => void, setStatus?: (s: string) => void) {
  return async (what: () => Promise<unknown>, done?: string) => {
    setError(null);
    try {
      const said = await what();
      const text = done ?? (typeof said === "string" ? said : undefined);
      if (text) setStatus?.(text);
      await reload();
    } catch (e) {
      setError(errorText(e));
    }
  };
}

/** A change a page makes through `acting`. */
export type Act = ReturnType<typeof acting>;

/**
 * A page that shows one list: `path`'s first page, fetched as the page opens, whose tab is titled `title`.
 * `load` fetches it again (a failure's text goes to `error`); `act` makes a change (`acting`) and then loads;
 * `status` is what the last change said.
 */
export function useList<T>(title: string, path: string) {
  const [list, setList] = useState<T[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const load = () => get<Page<T>>(path).then((p) => setList(p.data), (e) => setError(errorText(e)));
  useTitle(title);
  useEffect(() => void load(), []);
  const act = acting(load, setError, setStatus);
  return { list, error, setError, status, setStatus, load, act };
}
