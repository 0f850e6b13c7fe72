// The partner's data over its life: how long each kind is kept (retention), and its messages' export.
import { useEffect, useState } from "preact/hooks";
import { errorText } from "../shared/format";
import { Alert } from "../shared/ui";
import { get, put, type RetentionSettings } from "./api";
import { acting, useTitle } from "./page";

type Kind = "messages_days" | "conversations_days" | "media_days" | "webhook_deliveries_days" | "bot_sessions_days";

const KINDS: { key: Kind; label: string; help: string }[] = [
  { key: "messages_days", label: "Hub messages", help: "with their attempts and history" },
  { key: "conversations_days", label: "Conversation messages", help: "a conversation whose last message is older goes whole, with its notes" },
  { key: "media_days", label: "Media", help: "a message keeps its text when its file goes" },
  { key: "webhook_deliveries_days", label: "Webhook deliveries", help: "never one still to be delivered" },
  { key: "bot_sessions_days", label: "Bot sessions", help: "counted from their last activity; payments keep their record" },
];

export function Data() {
  const [saved, setSaved] = useState<RetentionSettings | null>(null);
  const [days, setDays] = useState<Record<Kind, string>>({} as Record<Kind, string>);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const load = () =>
    get<RetentionSettings>("/settings/retention").then((s) => {
      setSaved(s);
      setDays(Object.fromEntries(KINDS.map((k) => [k.key, s[k.key] == null ? "" : String(s[k.key])])) as Record<Kind, string>);
    }, (e) => setError(errorText(e)));
  useTitle("Data");
  useEffect(() => void load(), []);
  const act = acting(load, setError, setStatus);
  const ceiling = saved?.max_days ?? null;
  const forever = ceiling == null ? "Kept until you choose otherwise" : `Kept ${ceiling} days (this host's longest)`;
  return (
    <section class="page" aria-labelledby="data-h">
      <h1 id="data-h">Data</h1>
      <Alert text={error} />
      <p role="status">{status}</p>
      {/* The server checks the days and says what is wrong with them (noValidate: its words, not the browser's).
          Shown once the saved days are in, so what is typed is never overwritten by them arriving. */}
      {saved === null ? (
        error ? null : <p class="muted">Loading…</p>
      ) : (
        <form
          class="card"
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            act(async () => {
              const body = Object.fromEntries(KINDS.map((k) => [k.key, days[k.key]?.trim() ? Number(days[k.key]) : null]));
              await put<RetentionSettings>("/settings/retention", body);
              return "Retention saved. Older data is removed within minutes.";
            });
          }}
        >
          <h2>Retention</h2>
          <p class="meta">Days to keep each kind of data; leave a field empty to keep it as long as the host does. Removed data leaves every list, search and export.</p>
          {KINDS.map((k) => (
            <div key={k.key}>
              <label for={`keep-${k.key}`}>{k.label} (days)</label>
              <input
                id={`keep-${k.key}`}
                type="number"
                min={1}
                max={ceiling ?? 36500}
                placeholder={forever}
                value={days[k.key] ?? ""}
                onInput={(e) => setDays({ ...days, [k.key]: e.currentTarget.value })}
              />
              <p class="meta">{k.help}</p>
            </div>
          ))}
          <button class="primary">Save retention</button>
        </form>
      )}
      <div class="card">
        <h2>Export</h2>
        <p class="meta">Every message, with its delivery attempts, one JSON object a line (NDJSON). The export is recorded in the audit log.</p>
        <a class="button" href="/api/v1/exports/messages" download="messages.ndjson">
          Download messages
        </a>
      </div>
    </section>
  );
}
