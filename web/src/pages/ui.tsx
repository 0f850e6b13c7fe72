// What the pages beside the app (the partner console, the developer portal) show alike: times, errors, and
// a secret shown once with a copy button.
import { useState } from "preact/hooks";
import { ApiError } from "./api";

/** A record time (`YYYY-MM-DD HH:MM:SS`, UTC) in the reader's own time and format. */
export const when = (t: string) => new Date(t.replace(" ", "T") + "Z").toLocaleString();

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
