// Analytics, for admins and owners: what the partner's conversations came to, by the day or hour and by agent
// (GET /analytics/conversations, read from rollups), drawn with Chart.js — loaded only when this page opens —
// with every figure also in a table.
import { useEffect, useRef, useState } from "preact/hooks";
import { errorText } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { get, type ConversationAnalytics } from "./api";
import { useTitle } from "./page";

const day = (d: Date) => d.toISOString().slice(0, 10);
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

export function Analytics() {
  useTitle("Analytics");
  const today = new Date();
  const [from, setFrom] = useState(day(new Date(today.getTime() - 29 * 86_400_000)));
  const [to, setTo] = useState(day(today));
  const [interval, setInterval] = useState("day");
  const [report, setReport] = useState<ConversationAnalytics | null>(null);
  const [error, setError] = useState<string | null>(null);
  const asked = useRef(0);
  const load = () => {
    const mine = ++asked.current;
    get<ConversationAnalytics>(`/analytics/conversations?from=${from}&to=${to}&interval=${interval}`).then(
      (r) => {
        if (mine !== asked.current) return;
        setReport(r);
        setError(null);
      },
      (e) => mine === asked.current && setError(errorText(e)),
    );
  };
  useEffect(load, []);
  const labels = (report?.series ?? []).map((b) => (interval === "hour" ? b.at.slice(5, 16) : b.at.slice(0, 10)));
  const t = report?.totals;
  return (
    <section class="page analytics" aria-labelledby="analytics-h">
      <h1 id="analytics-h">Analytics</h1>
      <p class="hint">Your conversations, counted as they happen. Days are UTC days.</p>
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
        <button class="primary">Show</button>
      </form>
      <Alert text={error} />
      {!report || !t ? (
        error ? null : <p class="muted">Loading…</p>
      ) : (
        <>
          <dl class="totals">
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
          <h2>Conversations opened and resolved</h2>
          <ChartOf
            label="Conversations opened and resolved"
            kind="line"
            labels={labels}
            sets={[
              { label: "Opened", data: report.series.map((b) => b.opened), color: "#2563eb" },
              { label: "Resolved", data: report.series.map((b) => b.resolved), color: "#16a34a" },
            ]}
          />
          <h2>Time to first response (minutes)</h2>
          <ChartOf
            label="Average time to first response, in minutes"
            kind="bar"
            labels={labels}
            sets={[{ label: "First response", data: report.series.map((b) => (b.avg_first_response_s == null ? null : Math.round(b.avg_first_response_s / 6) / 10)), color: "#9333ea" }]}
          />
          <h2>By agent</h2>
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
      )}
    </section>
  );
}
