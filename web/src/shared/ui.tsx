// What the pages beside the app (the partner console, the developer portal) show alike: an error, a
// secret shown once with a copy button, a table's headings.
import { useState } from "preact/hooks";

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
