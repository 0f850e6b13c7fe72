// The partner's webhook endpoint, a signed test, and the delivery log with replay.
import { useEffect, useRef, useState } from "preact/hooks";
import { errorText, when } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { get, post, put, type Page, type TestOutcome, type WebhookDelivery, type WebhookDeliveryDetail, type WebhookSettings } from "./api";
import { useLiveDeliveries } from "./live";
import { acting, useTitle } from "./page";

/** A local date-time input's value as a record time (`YYYY-MM-DD HH:MM:SS`, UTC). */
const utcRecordTime = (local: string) => new Date(local).toISOString().slice(0, 19).replace("T", " ");

/** What sending a delivery again did: sent now, or (events about one message go in order) sent once the
 * earlier one it waits for, sent again with it, is delivered. */
const retried = (d: WebhookDelivery) =>
  d.waiting_for
    ? `${d.delivery_id} waits for ${d.waiting_for}, an earlier event about the same message that has not been delivered yet: ` +
      `${d.waiting_for} is sent again now, and ${d.delivery_id} goes once it is delivered.`
    : `${d.delivery_id} sent again.`;

export function Webhooks() {
  const [url, setUrl] = useState("");
  const [secret, setSecret] = useState<string | null>(null);
  const [state, setState] = useState("");
  const [event, setEvent] = useState("");
  const [list, setList] = useState<WebhookDelivery[]>([]);
  const [rate, setRate] = useState<string | null>(null);
  const [open, setOpen] = useState<WebhookDeliveryDetail | null>(null);
  const [since, setSince] = useState(() => new Date(Date.now() - 24 * 3600 * 1000 - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 16));
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const query = new URLSearchParams({ limit: "50" });
  if (state) query.set("state", state);
  if (event.trim()) query.set("event", event.trim());
  if (from) query.set("since", utcRecordTime(from));
  if (to) query.set("until", utcRecordTime(to));
  // Only the answer to the last load asked is shown (a live refresh asked before a filter changed may
  // answer after the filter's).
  const asked = useRef(0);
  const load = () => {
    const mine = ++asked.current;
    return Promise.all([
      get<Page<WebhookDelivery>>(`/webhooks/deliveries?${query}`).then((p) => mine === asked.current && setList(p.data)),
      // The endpoint's recent success rate: of the last 100 deliveries that have been tried.
      get<Page<WebhookDelivery>>("/webhooks/deliveries?limit=100").then((p) => {
        const tried = p.data.filter((d) => d.attempts > 0 || d.state !== "pending");
        const ok = tried.filter((d) => d.state === "succeeded").length;
        setRate(tried.length ? `${Math.round((100 * ok) / tried.length)} % of the last ${tried.length} deliveries succeeded` : "No delivery yet");
      }),
    ]).catch((e) => setError(errorText(e)));
  };
  // Live: fetched as the filters change, and again when deliveries are tried (the console's stream says so).
  // What no attempt announces — a delivery that waits behind a failing one, or one dead at once for want of
  // a URL — shows at the next of those, or within 15 seconds.
  useEffect(() => {
    void load();
    const timer = setInterval(() => document.visibilityState === "visible" && load(), 15000);
    return () => clearInterval(timer);
  }, [query.toString()]);
  useLiveDeliveries(load, [query.toString()]);
  useTitle("Webhooks");
  const act = acting(load, setError, setStatus);
  return (
    <section class="page" aria-labelledby="webhooks-h">
      <h1 id="webhooks-h">Webhooks</h1>
      <Alert text={error} />
      <p role="status">{status}</p>
      <form
        class="card invite"
        onSubmit={(e) => {
          e.preventDefault();
          act(async () => {
            const s = await put<WebhookSettings>("/settings/webhook", { webhook_url: url.trim() || null });
            setSecret(s.webhook_secret ?? null);
            return s.webhook_url ? `Events now go to ${s.webhook_url}.` : "Webhook removed.";
          });
        }}
      >
        <h2>Endpoint</h2>
        <label for="webhook-url">Endpoint URL</label>
        <input id="webhook-url" type="url" placeholder="https://example.com/hubbub" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
        <button class="primary">Save endpoint</button>
        {secret ? (
          <p>
            Signing secret (shown once): <span class="mono">{secret}</span>
          </p>
        ) : null}
        <button
          type="button"
          onClick={() =>
            act(async () => {
              const r = await post<TestOutcome>("/webhooks/test");
              return r.ok ? `Test event delivered (HTTP ${r.status}).` : `Test event not delivered: ${r.error ?? `HTTP ${r.status}`}.`;
            })
          }
        >
          Send a test event
        </button>
        {rate ? <p class="meta">{rate}</p> : null}
      </form>
      <form
        class="card filters"
        onSubmit={(e) => {
          e.preventDefault();
          act(async () => {
            const r = await post<{ retried: number }>("/webhooks/deliveries/retry", { since: utcRecordTime(since) });
            return `${r.retried} failed ${r.retried === 1 ? "delivery" : "deliveries"} sent again.`;
          });
        }}
      >
        <div class="field">
          <label for="since">Failed since</label>
          <input id="since" type="datetime-local" value={since} onInput={(e) => setSince(e.currentTarget.value)} required />
        </div>
        <button>Send every failed delivery again</button>
      </form>
      <div class="filters">
        <div class="field">
          <label for="delivery-state">State</label>
          <select id="delivery-state" value={state} onChange={(e) => setState(e.currentTarget.value)}>
            <option value="">All</option>
            <option value="pending">Pending</option>
            <option value="succeeded">Succeeded</option>
            <option value="failed">Failed (retrying)</option>
            <option value="dead">Dead</option>
          </select>
        </div>
        <div class="field">
          <label for="delivery-event">Event</label>
          <input id="delivery-event" value={event} placeholder="message.status" onInput={(e) => setEvent(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="delivery-from">Created from</label>
          <input id="delivery-from" type="datetime-local" value={from} onInput={(e) => setFrom(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="delivery-to">Created before</label>
          <input id="delivery-to" type="datetime-local" value={to} onInput={(e) => setTo(e.currentTarget.value)} />
        </div>
      </div>
      <table>
        <caption class="sr-only">Deliveries, newest first</caption>
        <Head cols={["Created", "Event", "State", "Attempts", "Last answer"]} actions />
        <tbody>
          {/* Keyed by delivery: as the log refreshes, a row (and a focused button in it) stays with its delivery. */}
          {list.map((d) => (
            <tr key={d.delivery_id}>
              <td>{when(d.created_at)}</td>
              <td>{d.event}</td>
              <td>
                {d.state}
                {d.waiting_for ? <span class="meta"> · waits for {d.waiting_for}</span> : null}
              </td>
              <td>{d.attempts}</td>
              <td>{d.last_status ? `HTTP ${d.last_status}` : ""} {d.last_error ?? ""}</td>
              <td>
                <button type="button" onClick={() => act(async () => setOpen(await get<WebhookDeliveryDetail>(`/webhooks/deliveries/${d.delivery_id}`)))}>
                  Details of {d.delivery_id}
                </button>{" "}
                <button type="button" onClick={() => act(async () => retried(await post<WebhookDelivery>(`/webhooks/deliveries/${d.delivery_id}/retry`)))}>
                  Send {d.delivery_id} again
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {open ? (
        <section class="card" aria-labelledby="delivery-h">
          <h2 id="delivery-h">Delivery {open.delivery_id}</h2>
          <p>
            {open.event} · {open.state} · {open.attempts} attempt(s){open.last_status ? ` · last answer HTTP ${open.last_status}` : ""}
            {open.last_error ? ` · ${open.last_error}` : ""}
          </p>
          <h3>Request body (signed with X-Service-Signature)</h3>
          <pre class="mono" tabIndex={0}>
            {JSON.stringify(open.payload, null, 2)}
          </pre>
          <button type="button" onClick={() => setOpen(null)}>
            Close details
          </button>
        </section>
      ) : null}
    </section>
  );
}
