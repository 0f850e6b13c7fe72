import { useEffect, useState } from "preact/hooks";
import { errorText, when } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { get, post, type Page, type ThreadMessage } from "./api";
import { useTitle } from "./page";

/**
 * The message log: filters by phone, state and words; a message's delivery attempts (a waiting one says why
 * and until when) and changes of state; a scheduled message canceled before it goes.
 */
export function Messages() {
  const [phone, setPhone] = useState("");
  const [state, setState] = useState("");
  const [q, setQ] = useState("");
  const [query, setQuery] = useState(new URLSearchParams({ limit: "50" }));
  const [list, setList] = useState<ThreadMessage[] | null>(null);
  const [open, setOpen] = useState<ThreadMessage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  // Bumped to fetch the same page again (after a cancel).
  const [fetches, setFetches] = useState(0);
  useTitle("Messages");
  useEffect(() => {
    // An answer to a query since replaced (the page's first load, answered after a filter's) is dropped.
    let current = true;
    get<Page<ThreadMessage>>(`/messages?${query}`).then(
      (p) => {
        if (!current) return;
        setList(p.data);
        setError(null);
      },
      (e) => current && setError(errorText(e)),
    );
    return () => {
      current = false;
    };
  }, [query.toString(), fetches]);
  return (
    <section class="page" aria-labelledby="messages-h">
      <h1 id="messages-h">Messages</h1>
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          const next = new URLSearchParams({ limit: "50" });
          if (phone.trim()) next.set("phone", phone.trim());
          if (state) next.set("state", state);
          if (q.trim()) next.set("q", q.trim());
          setQuery(next);
        }}
      >
        <div class="field">
          <label for="messages-phone">Phone</label>
          <input id="messages-phone" value={phone} placeholder="+15551230000" onInput={(e) => setPhone(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="messages-state">State</label>
          <select id="messages-state" value={state} onChange={(e) => setState(e.currentTarget.value)}>
            <option value="">Any</option>
            {["scheduled", "queued", "sent", "delivered", "read", "failed", "canceled"].map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="messages-q">Words</label>
          <input id="messages-q" type="search" value={q} onInput={(e) => setQ(e.currentTarget.value)} />
        </div>
        <button type="submit">Filter</button>
      </form>
      <Alert text={error} />
      {status ? <p role="status">{status}</p> : null}
      {list === null ? (
        <p class="muted">Loading…</p>
      ) : list.length === 0 ? (
        <p class="muted">No messages here.</p>
      ) : (
        <table>
          <Head cols={["Created", "Phone", "Channel", "State", "Text"]} actions />
          <tbody>
            {list.map((m) => (
              <tr>
                <td>{when(m.created_at)}</td>
                <td>{m.phone}</td>
                <td>{m.channel ?? "—"}</td>
                <td>{m.state === "scheduled" && m.send_at ? `scheduled for ${when(m.send_at)}` : m.state}</td>
                <td class="pre">{(m.rendered_body ?? m.body ?? `[${m.content_type}]`).slice(0, 120)}</td>
                <td>
                  <button
                    type="button"
                    onClick={() =>
                      get<ThreadMessage>(`/messages/${m.message_id}?include=attempts,events`).then(setOpen, (e) => setError(errorText(e)))
                    }
                  >
                    History<span class="sr-only"> of message {m.message_id}</span>
                  </button>
                  {m.state === "scheduled" ? (
                    <button
                      type="button"
                      onClick={() =>
                        post(`/messages/${m.message_id}/cancel`, {}).then(
                          () => {
                            setStatus(`Message ${m.message_id} is canceled: it will not be sent.`);
                            setFetches((n) => n + 1);
                          },
                          (e) => setError(errorText(e)),
                        )
                      }
                    >
                      Cancel<span class="sr-only"> message {m.message_id}</span>
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {open ? (
        <article class="card" aria-labelledby="message-h">
          <h2 id="message-h">
            Message {open.message_id} to {open.phone}
          </h2>
          <p class="pre">{open.rendered_body ?? open.body ?? `[${open.content_type}]`}</p>
          <h3>Delivery attempts</h3>
          {open.attempts?.length ? (
            <table>
              <Head cols={["When", "Channel", "Kind", "State", "Provider's id", "Error"]} />
              <tbody>
                {open.attempts.map((a) => (
                  <tr>
                    <td>{when(a.at)}</td>
                    <td>{a.channel}</td>
                    <td>{a.kind}</td>
                    <td>{a.state}</td>
                    <td class="mono">{a.provider_ref ?? "—"}</td>
                    <td>{a.state === "waiting" && a.retry_at ? `${a.error}: again at ${when(a.retry_at)}` : (a.error ?? "—")}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p class="muted">No delivery attempt yet.</p>
          )}
          <h3>Its states</h3>
          <table aria-label={`States of message ${open.message_id}`}>
            <Head cols={["When", "State", "Channel"]} />
            <tbody>
              {(open.events ?? []).map((e) => (
                <tr>
                  <td>{when(e.at)}</td>
                  <td>{e.state}</td>
                  <td>{e.channel ?? "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <button type="button" onClick={() => setOpen(null)}>
            Close
          </button>
        </article>
      ) : null}
    </section>
  );
}
