// Broadcasts: one text to every linked user who claimed their account, now or at a time of the partner's
// choosing. Compose with a preview of the card the users will see and how many it reaches now; then each
// broadcast's progress and its messages by state; a scheduled one canceled before it goes.
import { useEffect, useState } from "preact/hooks";
import { errorText, when } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { get, post, type Broadcast, type BroadcastAudience, type Page } from "./api";
import { acting, useTitle } from "./page";

const PRIORITIES: [string, string][] = [
  ["notification", "Notification"],
  ["marketing", "Marketing"],
];

const moving = (b: Broadcast) => b.state === "queued" || b.state === "sending";

export function Broadcasts() {
  const [list, setList] = useState<Broadcast[] | null>(null);
  const [audience, setAudience] = useState<BroadcastAudience | null>(null);
  const [body, setBody] = useState("");
  const [priority, setPriority] = useState("notification");
  // `datetime-local`: the partner's own clock; empty sends at once.
  const [sendAt, setSendAt] = useState("");
  const [confirming, setConfirming] = useState(false);
  const [open, setOpen] = useState<Broadcast | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const load = async () => {
    const [page, size] = await Promise.all([get<Page<Broadcast>>("/broadcasts?limit=50"), get<BroadcastAudience>("/broadcasts/audience")]);
    setList(page.data);
    setAudience(size);
    if (open) setOpen(await get<Broadcast>(`/broadcasts/${open.broadcast_id}`));
  };
  useTitle("Broadcasts");
  useEffect(() => void load().catch((e) => setError(errorText(e))), []);
  // While one is on its way, its progress is fetched again every two seconds (and no longer after).
  const busy = (list ?? []).some(moving) || (open !== null && moving(open));
  useEffect(() => {
    if (!busy) return;
    const timer = setInterval(() => void load().catch(() => undefined), 2000);
    return () => clearInterval(timer);
  }, [busy, open?.broadcast_id]);
  const act = acting(load, setError, setStatus);
  const reach = audience ? `${audience.count} ${audience.count === 1 ? "user" : "users"}` : "…";
  return (
    <section class="page" aria-labelledby="broadcasts-h">
      <h1 id="broadcasts-h">Broadcasts</h1>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
      <form
        class="card invite"
        onSubmit={(e) => {
          e.preventDefault();
          if (!confirming) return setConfirming(true);
          act(async () => {
            const later = sendAt ? { send_at: new Date(sendAt).toISOString() } : {};
            const made = await post<Broadcast>("/broadcasts", { content_type: "text", body, priority, ...later });
            setBody("");
            setSendAt("");
            setConfirming(false);
            setOpen(made);
            return made.send_at
              ? `Broadcast ${made.broadcast_id} is scheduled for ${when(made.send_at)}.`
              : `Broadcast ${made.broadcast_id} is on its way to ${reach}.`;
          });
        }}
      >
        <h2>New broadcast</h2>
        <label for="broadcast-body">Text</label>
        <textarea
          id="broadcast-body"
          rows={3}
          maxLength={4096}
          value={body}
          onInput={(e) => {
            setBody(e.currentTarget.value);
            setConfirming(false);
          }}
          required
        />
        <label for="broadcast-priority">Priority</label>
        <select id="broadcast-priority" value={priority} onChange={(e) => setPriority(e.currentTarget.value)}>
          {PRIORITIES.map(([v, label]) => (
            <option value={v}>{label}</option>
          ))}
        </select>
        <label for="broadcast-send-at">Send at (empty: now)</label>
        <input id="broadcast-send-at" type="datetime-local" value={sendAt} onInput={(e) => setSendAt(e.currentTarget.value)} />
        <p id="broadcast-audience">It goes to every linked user who claimed their account: {reach} now.</p>
        {body.trim() ? (
          <figure class="preview" aria-labelledby="preview-h">
            <figcaption id="preview-h" class="meta">
              Preview: the card in each user's hub
            </figcaption>
            <div class="bubble">{body}</div>
          </figure>
        ) : null}
        {confirming ? (
          <p role="alert">
            {sendAt ? `Send this to ${reach} at ${new Date(sendAt).toLocaleString()}? It can be canceled until then.` : `Send this to ${reach}? It cannot be called back.`}{" "}
            <button class="primary">Send to {reach}</button>{" "}
            <button type="button" onClick={() => setConfirming(false)}>
              Not yet
            </button>
          </p>
        ) : (
          <button class="primary" aria-describedby="broadcast-audience">
            Review and send
          </button>
        )}
      </form>
      {open ? <Progress broadcast={open} onClose={() => setOpen(null)} /> : null}
      {list === null ? (
        <p class="muted">Loading…</p>
      ) : list.length === 0 ? (
        <p class="muted">No broadcasts yet.</p>
      ) : (
        <table>
          <caption class="sr-only">Broadcasts, newest first</caption>
          <Head cols={["Created", "Text", "State", "Sent", "Failed"]} actions />
          <tbody>
            {list.map((b) => (
              <tr>
                <td>{when(b.created_at)}</td>
                <td class="pre">{(b.body ?? `[${b.content_type}]`).slice(0, 120)}</td>
                <td>{b.state === "scheduled" && b.send_at ? `scheduled for ${when(b.send_at)}` : b.state}</td>
                <td>
                  {b.sent}
                  {b.total != null ? ` of ${b.total}` : ""}
                </td>
                <td>{b.failed}</td>
                <td>
                  <button type="button" onClick={() => act(async () => setOpen(await get<Broadcast>(`/broadcasts/${b.broadcast_id}`)))}>
                    Progress<span class="sr-only"> of broadcast {b.broadcast_id}</span>
                  </button>
                  {b.state === "scheduled" ? (
                    <button
                      type="button"
                      onClick={() =>
                        act(async () => {
                          await post(`/broadcasts/${b.broadcast_id}/cancel`, {});
                          return `Broadcast ${b.broadcast_id} is canceled: it will not be sent.`;
                        })
                      }
                    >
                      Cancel<span class="sr-only"> broadcast {b.broadcast_id}</span>
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** One broadcast: how far its fan-out is, and its messages by state. */
function Progress({ broadcast: b, onClose }: { broadcast: Broadcast; onClose: () => void }) {
  const states = Object.entries(b.states ?? {});
  return (
    <article class="card" aria-labelledby="broadcast-h">
      <h2 id="broadcast-h">Broadcast {b.broadcast_id}</h2>
      <p>
        {b.state}
        {b.total != null ? ` · ${b.sent} of ${b.total} written` : " · counting its audience"}
        {b.failed ? ` · ${b.failed} failed` : ""}
        {b.completed_at ? ` · completed ${when(b.completed_at)}` : ""}
      </p>
      {b.total ? <progress max={b.total} value={b.sent + b.failed} aria-label={`Broadcast ${b.broadcast_id} progress`} /> : null}
      <h3>Its messages by state</h3>
      {states.length ? (
        <ul class="plain" aria-label="Messages by state">
          {states.map(([state, n]) => (
            <li>
              {state}: {n}
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">No message written yet.</p>
      )}
      <button type="button" onClick={onClose}>
        Close
      </button>
    </article>
  );
}
