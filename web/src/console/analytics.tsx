// Analytics, for admins and owners: what the partner's messages came to (GET /analytics/messages: the delivery
// funnel by channel, template and broadcast, fallbacks and their cost at the partner's prices, time to read)
// and its conversations (GET /analytics/conversations: by the day or hour and by agent), both read from
// rollups, drawn with Chart.js — loaded only when this page opens — with every figure also in a table.
import { useEffect, useRef, useState } from "preact/hooks";
import { errorText } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { get, put, type ConversationAnalytics, type MessageAnalytics, type MessageFigures, type Prices } from "./api";
import { useTitle } from "./page";

const day = (d: Date) => d.toISOString().slice(0, 10);
const CHANNELS: Record<string, string> = { inapp: "App", whatsapp: "WhatsApp", sms: "SMS" };
const share = (n: number, of: number) => (of > 0 ? `${Math.round((100 * n) / of)} %` : "—");
const money = (v: number | null | undefined, currency: string | null | undefined) =>
  v == null ? "no price set" : new Intl.NumberFormat("en", { style: "currency", currency: currency ?? "EUR", maximumFractionDigits: 4 }).format(v);
const minutes = (s: number | null | undefined) => (s == null ? "—" : s < 60 ? `${Math.round(s)} s` : s < 3600 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`);

/** A Chart.js chart of `kind` over `labels`, with one dataset per entry of `sets`, drawn again when they change. */
function ChartOf({ label, kind, labels, sets }: { label: string; kind: "line" | "bar"; labels: string[]; sets: { label: string; data: (number | null)[]; color: string }[] }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    let chart: { destroy: () => void } | null = null;
    let gone = false;
    import("chart.js").then(({ Chart, LineController, BarController, LineElement, BarElement, PointElement, CategoryScale, LinearScale, Legend, Tooltip }) => {
      if (gone || !canvas.current) return;
      Chart.register(LineController, BarController, LineElement, BarElement, PointElement, CategoryScale, LinearScale, Legend, Tooltip);
      chart = new Chart(canvas.current, {
        type: kind,
        data: { labels, datasets: sets.map((s) => ({ label: s.label, data: s.data, borderColor: s.color, backgroundColor: s.color, tension: 0.2 })) },
        options: { animation: false, responsive: true, maintainAspectRatio: false, scales: { y: { beginAtZero: true } } },
      });
    });
    return () => {
      gone = true;
      chart?.destroy();
    };
  }, [kind, JSON.stringify(labels), JSON.stringify(sets)]);
  return (
    <div class="chart">
      <canvas ref={canvas} role="img" aria-label={label} />
    </div>
  );
}

/** The partner's prices per paid message, which cost its fallbacks (PUT /settings/prices). */
function PricesForm({ onSaved }: { onSaved: () => void }) {
  const [prices, setPrices] = useState<Prices | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    get<Prices>("/settings/prices").then(setPrices, (e) => setError(errorText(e)));
  }, []);
  if (!prices) return error ? <Alert text={error} /> : <p class="muted">Loading…</p>;
  const number = (v: string) => (v.trim() === "" ? null : Number(v));
  return (
    <form
      class="filters prices"
      aria-labelledby="prices-h"
      onSubmit={(e) => {
        e.preventDefault();
        setStatus(null);
        const body = { currency: prices.currency || null, whatsapp: prices.whatsapp ?? null, sms: prices.sms ?? null };
        put<Prices>("/settings/prices", body).then(
          (saved) => {
            setPrices(saved);
            setError(null);
            setStatus("Prices saved.");
            onSaved();
          },
          (e) => setError(errorText(e)),
        );
      }}
    >
      <h3 id="prices-h">What a message costs you</h3>
      <div class="field">
        <label for="price-currency">Currency</label>
        <input id="price-currency" value={prices.currency ?? ""} placeholder="EUR" maxLength={3} onInput={(e) => setPrices({ ...prices, currency: e.currentTarget.value.toUpperCase() || null })} />
      </div>
      <div class="field">
        <label for="price-whatsapp">WhatsApp message</label>
        <input id="price-whatsapp" type="number" min="0" max="100" step="0.000001" value={prices.whatsapp ?? ""} onInput={(e) => setPrices({ ...prices, whatsapp: number(e.currentTarget.value) })} />
      </div>
      <div class="field">
        <label for="price-sms">SMS</label>
        <input id="price-sms" type="number" min="0" max="100" step="0.000001" value={prices.sms ?? ""} onInput={(e) => setPrices({ ...prices, sms: number(e.currentTarget.value) })} />
      </div>
      <button>Save prices</button>
      <p role="status" class="muted">{status}</p>
      <Alert text={error} />
    </form>
  );
}

/** A funnel's cells: accepted (when counted), sent, delivered, read, failed, each with its share of those sent. */
function FunnelCells({ f, accepted = true }: { f: MessageFigures; accepted?: boolean }) {
  return (
    <>
      {accepted && <td>{f.accepted}</td>}
      <td>{f.sent}</td>
      <td>
        {f.delivered} <span class="muted">({share(f.delivered, f.sent)})</span>
      </td>
      <td>
        {f.read} <span class="muted">({share(f.read, f.sent)})</span>
      </td>
      <td>{f.failed}</td>
      <td>{minutes(f.avg_time_to_read_s)}</td>
    </>
  );
}

function MessagesReport({ report, interval, labels, channel }: { report: MessageAnalytics; interval: string; labels: string[]; channel: string }) {
  const t = report.totals;
  const channels = report.channels;
  return (
    <>
      <dl class="totals" aria-label="Messages over the range">
        {channel ? (
          <div>
            <dt>Sent on {CHANNELS[channel]}</dt>
            <dd>{t.sent}</dd>
          </div>
        ) : (
          <div>
            <dt>Accepted</dt>
            <dd>{t.accepted}</dd>
          </div>
        )}
        <div>
          <dt>Delivered</dt>
          <dd>{t.delivered}</dd>
        </div>
        <div>
          <dt>Read</dt>
          <dd>{t.read}</dd>
        </div>
        <div>
          <dt>Failed</dt>
          <dd>{t.failed}</dd>
        </div>
        <div>
          <dt>Time to read</dt>
          <dd>{minutes(t.avg_time_to_read_s)}</dd>
        </div>
        <div>
          <dt>Fell back</dt>
          <dd>{t.fallbacks}</dd>
        </div>
        <div>
          <dt>Paid messages</dt>
          <dd>{t.paid}</dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd>{money(t.cost, report.currency)}</dd>
        </div>
      </dl>
      <h3>Delivery funnel by channel</h3>
      <ChartOf
        label="Messages sent, delivered, read and failed on each channel"
        kind="bar"
        labels={channels.map((c) => CHANNELS[c.channel] ?? c.channel)}
        sets={[
          { label: "Sent", data: channels.map((c) => c.sent), color: "#2563eb" },
          { label: "Delivered", data: channels.map((c) => c.delivered), color: "#0891b2" },
          { label: "Read", data: channels.map((c) => c.read), color: "#16a34a" },
          { label: "Failed", data: channels.map((c) => c.failed), color: "#dc2626" },
        ]}
      />
      <h3>Messages by {interval}</h3>
      <ChartOf
        label={`Messages accepted, delivered, read and failed by ${interval}`}
        kind="line"
        labels={labels}
        sets={[
          { label: "Accepted", data: report.series.map((b) => b.accepted), color: "#2563eb" },
          { label: "Delivered", data: report.series.map((b) => b.delivered), color: "#0891b2" },
          { label: "Read", data: report.series.map((b) => b.read), color: "#16a34a" },
          { label: "Failed", data: report.series.map((b) => b.failed), color: "#dc2626" },
        ]}
      />
      <table>
        <caption>By channel: the funnel, fallbacks and cost</caption>
        <Head cols={["Channel", "Sent", "Delivered", "Read", "Failed", "Time to read", "Paid", "Fell back", "Cost"]} />
        <tbody>
          {channels.map((c) => (
            <tr>
              <td>{CHANNELS[c.channel] ?? c.channel}</td>
              <FunnelCells f={c} accepted={false} />
              <td>{c.paid}</td>
              <td>{c.fallbacks}</td>
              <td>{money(c.cost, report.currency)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {report.templates.length > 0 && (
        <table>
          <caption>By template</caption>
          <Head cols={["Template", "Accepted", "Sent", "Delivered", "Read", "Failed", "Time to read"]} />
          <tbody>
            {report.templates.map((r) => (
              <tr>
                <td>{r.template}</td>
                <FunnelCells f={r} />
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {report.broadcasts.length > 0 && (
        <table>
          <caption>By broadcast</caption>
          <Head cols={["Broadcast", "Accepted", "Sent", "Delivered", "Read", "Failed", "Time to read"]} />
          <tbody>
            {report.broadcasts.map((r) => (
              <tr>
                <td>#{r.broadcast_id}</td>
                <FunnelCells f={r} />
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function ConversationsReport({ report, interval, labels }: { report: ConversationAnalytics; interval: string; labels: string[] }) {
  const t = report.totals;
  return (
    <>
      <dl class="totals" aria-label="Conversations over the range">
        <div>
          <dt>Opened</dt>
          <dd>{t.opened}</dd>
        </div>
        <div>
          <dt>Resolved</dt>
          <dd>{t.resolved}</dd>
        </div>
        <div>
          <dt>First response</dt>
          <dd>{minutes(t.avg_first_response_s)}</dd>
        </div>
        <div>
          <dt>Resolution</dt>
          <dd>{minutes(t.avg_resolution_s)}</dd>
        </div>
        <div>
          <dt>SLA breaches</dt>
          <dd>{t.sla_breaches}</dd>
        </div>
        <div>
          <dt>Rating</dt>
          <dd>{t.csat_average != null ? `${t.csat_average.toFixed(1)} / 5 (${t.ratings})` : "—"}</dd>
        </div>
      </dl>
      <h3>Conversations opened and resolved</h3>
      <ChartOf
        label="Conversations opened and resolved"
        kind="line"
        labels={labels}
        sets={[
          { label: "Opened", data: report.series.map((b) => b.opened), color: "#2563eb" },
          { label: "Resolved", data: report.series.map((b) => b.resolved), color: "#16a34a" },
        ]}
      />
      <h3>Time to first response (minutes)</h3>
      <ChartOf
        label="Average time to first response, in minutes"
        kind="bar"
        labels={labels}
        sets={[{ label: "First response", data: report.series.map((b) => (b.avg_first_response_s == null ? null : Math.round(b.avg_first_response_s / 6) / 10)), color: "#9333ea" }]}
      />
      <h3>By agent</h3>
      {report.agents.length === 0 ? (
        <p class="muted">No agent has anything to count in this range yet.</p>
      ) : (
        <table>
          <caption class="sr-only">Each agent's figures over the range</caption>
          <Head cols={["Agent", "First responses", "First response", "Resolved", "Resolution", "SLA breaches", "Rating"]} />
          <tbody>
            {report.agents.map((a) => (
              <tr>
                <td>{a.name ?? `member ${a.member_id}`}</td>
                <td>{a.first_responses}</td>
                <td>{minutes(a.avg_first_response_s)}</td>
                <td>{a.resolved}</td>
                <td>{minutes(a.avg_resolution_s)}</td>
                <td>{a.sla_breaches}</td>
                <td>{a.csat_average != null ? `${a.csat_average.toFixed(1)} / 5 (${a.ratings})` : "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <details>
        <summary>The numbers, as a table</summary>
        <table>
          <caption class="sr-only">Each {interval}'s figures</caption>
          <Head cols={[interval === "hour" ? "Hour" : "Day", "Opened", "Resolved", "First response", "SLA breaches", "Ratings"]} />
          <tbody>
            {report.series.map((b, i) => (
              <tr>
                <td>{labels[i]}</td>
                <td>{b.opened}</td>
                <td>{b.resolved}</td>
                <td>{minutes(b.avg_first_response_s)}</td>
                <td>{b.sla_breaches}</td>
                <td>{b.ratings}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </>
  );
}

export function Analytics() {
  useTitle("Analytics");
  const today = new Date();
  const [from, setFrom] = useState(day(new Date(today.getTime() - 29 * 86_400_000)));
  const [to, setTo] = useState(day(today));
  const [interval, setInterval] = useState("day");
  const [channel, setChannel] = useState("");
  // The channel of the report shown (the select may have changed since).
  const [shown, setShown] = useState("");
  const [messages, setMessages] = useState<MessageAnalytics | null>(null);
  const [report, setReport] = useState<ConversationAnalytics | null>(null);
  const [error, setError] = useState<string | null>(null);
  const asked = useRef(0);
  const load = () => {
    const mine = ++asked.current;
    const range = `from=${from}&to=${to}&interval=${interval}`;
    Promise.all([
      get<MessageAnalytics>(`/analytics/messages?${range}${channel ? `&channel=${channel}` : ""}`),
      get<ConversationAnalytics>(`/analytics/conversations?${range}`),
    ]).then(
      ([m, c]) => {
        if (mine !== asked.current) return;
        setMessages(m);
        setShown(channel);
        setReport(c);
        setError(null);
      },
      (e) => mine === asked.current && setError(errorText(e)),
    );
  };
  useEffect(load, []);
  const labels = (report?.series ?? []).map((b) => (interval === "hour" ? b.at.slice(5, 16) : b.at.slice(0, 10)));
  return (
    <section class="page analytics" aria-labelledby="analytics-h">
      <h1 id="analytics-h">Analytics</h1>
      <p class="hint">Your messages and conversations, counted as they happen. Days are UTC days.</p>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          load();
        }}
      >
        <div class="field">
          <label for="analytics-from">From</label>
          <input id="analytics-from" type="date" value={from} onInput={(e) => setFrom(e.currentTarget.value)} required />
        </div>
        <div class="field">
          <label for="analytics-to">To</label>
          <input id="analytics-to" type="date" value={to} onInput={(e) => setTo(e.currentTarget.value)} required />
        </div>
        <div class="field">
          <label for="analytics-interval">By</label>
          <select id="analytics-interval" value={interval} onChange={(e) => setInterval(e.currentTarget.value)}>
            <option value="day">Day</option>
            <option value="hour">Hour</option>
          </select>
        </div>
        <div class="field">
          <label for="analytics-channel">Messages on</label>
          <select id="analytics-channel" value={channel} onChange={(e) => setChannel(e.currentTarget.value)}>
            <option value="">Every channel</option>
            <option value="inapp">App</option>
            <option value="whatsapp">WhatsApp</option>
            <option value="sms">SMS</option>
          </select>
        </div>
        <button class="primary">Show</button>
      </form>
      <Alert text={error} />
      {!report || !messages ? (
        error ? null : <p class="muted">Loading…</p>
      ) : (
        <>
          <h2>Messages</h2>
          <MessagesReport report={messages} interval={interval} labels={labels} channel={shown} />
          <details>
            <summary>Prices</summary>
            <PricesForm onSaved={load} />
          </details>
          <h2>Conversations</h2>
          <ConversationsReport report={report} interval={interval} labels={labels} />
        </>
      )}
    </section>
  );
}
