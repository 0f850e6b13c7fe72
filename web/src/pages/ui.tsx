// What the pages beside the app (the partner console, the developer portal) show alike: times, errors, and
// a secret shown once with a copy button.
import { useState } from "preact/hooks";
import { ApiError } from "./api";

/** A record time (`YYYY-MM-DD HH:MM:SS`, UTC) in the reader's own time and format. */
export const when = (t: string) => new Date(t.replace(" ", "T") + "Z").toLocaleString();

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

/** What to tell the reader about a failed call: the API's message, or a plain word when there is none. */
export const errorText = (e: unknown) => (e instanceof ApiError ? e.message : "Something went wrong. Try again.");

/** An error, announced to screen readers; nothing when there is none. */
export function Alert({ text }: { text: string | null }) {
  return text ? (
    <p class="error" role="alert">
      {text}
    </p>
  ) : null;
}

/** A secret shown once: selectable, with a copy button. */
export function ShownOnce({ label, value }: { label: string; value: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <div class="made">
      <input class="mono" readOnly value={value} aria-label={label} onFocus={(e) => e.currentTarget.select()} />
      <button type="button" onClick={() => navigator.clipboard?.writeText(value).then(() => setCopied(true), () => setCopied(false))}>
        {copied ? "Copied" : `Copy the ${label.toLowerCase()}`}
      </button>
    </div>
  );
}

/** A table's column headings; `actions` adds a last column for the row's buttons, named for screen readers. */
export function Head({ cols, actions = false }: { cols: string[]; actions?: boolean }) {
  return (
    <thead>
      <tr>
        {cols.map((c) => (
          <th scope="col">{c}</th>
        ))}
        {actions ? (
          <th scope="col">
            <span class="sr-only">Actions</span>
          </th>
        ) : null}
      </tr>
    </thead>
  );
}
