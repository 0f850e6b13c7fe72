// The partner's bots: create (credentials shown once), rotate the token, upload a component (with the
// compiler's errors as the author needs them), set the webhook and allowed IPs, invite a phone to a flow,
// and the recent sessions.
import { useEffect, useRef, useState } from "preact/hooks";
import { errorText, when } from "../shared/format";
import { Alert, Head, ShownOnce } from "../shared/ui";
import { enc, get, patch, post, upload, type Page, type Bot, type BotCreated, type BotSession, type BotToken, type FlowInvited } from "./api";
import { acting, useList } from "./page";

export function Bots() {
  const { list: bots, error, setError, load } = useList<Bot>("Bots", "/bots");
  const [code, setCode] = useState("");
  const [name, setName] = useState("");
  const [created, setCreated] = useState<BotCreated | null>(null);
  return (
    <section class="page" aria-labelledby="bots-h">
      <h1 id="bots-h">Bots</h1>
      <Alert text={error} />
      <form
        class="card invite"
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          try {
            setCreated(await post<BotCreated>("/bots", { code: code.trim(), name: name.trim() }));
            setCode("");
            setName("");
            await load();
          } catch (err) {
            setError(errorText(err));
          }
        }}
      >
        <h2>New bot</h2>
        <label for="bot-code">Code (a-z, 0-9, - and _)</label>
        <input id="bot-code" value={code} onInput={(e) => setCode(e.currentTarget.value)} required />
        <label for="bot-name">Name</label>
        <input id="bot-name" value={name} onInput={(e) => setName(e.currentTarget.value)} required />
        <button class="primary">Create bot</button>
        {created ? (
          <div role="status">
            <p>{created.warning}</p>
            <ShownOnce label="Bot token" value={created.bot_token} />
            <ShownOnce label="Webhook secret" value={created.webhook_secret} />
          </div>
        ) : null}
      </form>
      <ul class="plain catalog">
        {bots.map((b) => (
          <li>
            <BotCard key={b.code} bot={b} onChange={load} />
          </li>
        ))}
      </ul>
    </section>
  );
}

function BotCard({ bot, onChange }: { bot: Bot; onChange: () => void }) {
  const [token, setToken] = useState<string | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const file = useRef<HTMLInputElement>(null);
  const flows = bot.component?.flows ?? [];
  return (
    <article class="card template" aria-labelledby={`bot-${bot.code}`}>
      <h2 id={`bot-${bot.code}`}>
        {bot.name} <span class="meta">({bot.code} · {bot.runtime_mode})</span>
      </h2>
      <p class="meta">
        Token {bot.credentials.token_prefix}… · {bot.component ? `component ${bot.component.digest.slice(0, 19)}…, ${bot.component.size} bytes` : "no component yet"}
      </p>
      {flows.length ? (
        <p>
          Flows:{" "}
          {flows.map((f) => (
            <span class="status-pill">
              {f.title} ({f.code})
            </span>
          ))}
        </p>
      ) : null}
      <button
        type="button"
        onClick={async () => {
          setProblem(null);
          try {
            setToken((await post<BotToken>(`/bots/${bot.code}/token/rotate`)).bot_token);
            setStatus("The old token stopped working; the new one is below, shown once.");
            onChange();
          } catch (e) {
            setProblem(errorText(e));
          }
        }}
      >
        Rotate the token of {bot.code}
      </button>
      {token ? <ShownOnce label="New bot token" value={token} /> : null}
      <form
        class="reply"
        onSubmit={async (e) => {
          e.preventDefault();
          const f = file.current?.files?.[0];
          if (!f) return;
          setProblem(null);
          setStatus(`Uploading ${f.name}…`);
          try {
            await upload(`/bots/${bot.code}/component`, await f.arrayBuffer(), "application/wasm");
            setStatus(`${f.name} is the bot's component now.`);
            onChange();
          } catch (err) {
            setStatus(null);
            setProblem(errorText(err));
          }
        }}
      >
        <label for={`component-${bot.code}`}>Component (.wasm, wasm32-wasip2)</label>
        <input id={`component-${bot.code}`} type="file" accept=".wasm,application/wasm" ref={file} required />
        <button>Upload component</button>
      </form>
      {status ? <p role="status">{status}</p> : null}
      {problem ? (
        <div class="error" role="alert">
          <p>The component was not taken:</p>
          <pre class="mono">{problem}</pre>
        </div>
      ) : null}
      <BotSettings bot={bot} flows={flows} onChange={onChange} />
      <Sessions bot={bot} flows={flows} />
    </article>
  );
}

const CHANNEL_NAMES = { inapp: "In the app", whatsapp: "WhatsApp", sms: "SMS" } as const;
type ChannelName = keyof typeof CHANNEL_NAMES;

/**
 * Where a bot answers (its channels, and where it is the entry bot that a person who writes starts), where
 * its events go (`webhook` mode) and who may call its inbound webhook.
 */
function BotSettings({ bot, flows, onChange }: { bot: Bot; flows: { code: string; title: string }[]; onChange: () => void }) {
  const [url, setUrl] = useState(bot.webhook_url ?? "");
  const [ips, setIps] = useState(bot.allowed_ips ?? "");
  const [channels, setChannels] = useState<ChannelName[]>(bot.channels as ChannelName[]);
  const [entry, setEntry] = useState<ChannelName[]>((bot.entry ?? []) as ChannelName[]);
  const [entryFlow, setEntryFlow] = useState(bot.entry_flow ?? "");
  const toggle = (list: ChannelName[], c: ChannelName, on: boolean) => (on ? [...list.filter((x) => x !== c), c] : list.filter((x) => x !== c));
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const act = acting(onChange, setError, setStatus);
  return (
    <form
      class="reply"
      aria-label={`Settings of ${bot.code}`}
      onSubmit={(e) => {
        e.preventDefault();
        act(async () => {
          await patch(`/bots/${bot.code}`, {
            webhook_url: url.trim(),
            allowed_ips: ips.trim(),
            channels,
            entry: entry.filter((c) => channels.includes(c)),
            entry_flow: entryFlow || null,
          });
          return `The settings of ${bot.code} are saved.`;
        });
      }}
    >
      <fieldset>
        <legend>Channels it answers on</legend>
        {(Object.keys(CHANNEL_NAMES) as ChannelName[]).map((c) => (
          <label key={c}>
            <input type="checkbox" checked={channels.includes(c)} onChange={(e) => setChannels(toggle(channels, c, e.currentTarget.checked))} /> {CHANNEL_NAMES[c]}
          </label>
        ))}
      </fieldset>
      <fieldset>
        <legend>Entry bot: a person who writes here with nothing going on starts a session with it</legend>
        {(["whatsapp", "sms"] as ChannelName[]).map((c) => (
          <label key={c}>
            <input type="checkbox" checked={entry.includes(c)} disabled={!channels.includes(c)} onChange={(e) => setEntry(toggle(entry, c, e.currentTarget.checked))} /> {CHANNEL_NAMES[c]}
          </label>
        ))}
      </fieldset>
      <label for={`bot-entry-flow-${bot.code}`}>What an entry session starts</label>
      <select id={`bot-entry-flow-${bot.code}`} value={entryFlow} onChange={(e) => setEntryFlow(e.currentTarget.value)}>
        <option value="">A chat</option>
        {flows.map((f) => (
          <option key={f.code} value={f.code}>
            Flow {f.code}: {f.title}
          </option>
        ))}
      </select>
      <label for={`bot-webhook-${bot.code}`}>Webhook URL{bot.runtime_mode === "webhook" ? "" : " (webhook mode only)"}</label>
      <input id={`bot-webhook-${bot.code}`} type="url" placeholder="https://example.com/bot" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
      <label for={`bot-ips-${bot.code}`}>Allowed IPs for its inbound webhook (comma-separated addresses or CIDR blocks; empty: any)</label>
      <input id={`bot-ips-${bot.code}`} value={ips} placeholder="203.0.113.7, 198.51.100.0/24" onInput={(e) => setIps(e.currentTarget.value)} />
      <button>Save settings of {bot.code}</button>
      <Alert text={error} />
      {status ? <p role="status">{status}</p> : null}
    </form>
  );
}

/** Invite a phone to one of the bot's flows, and the bot's recent sessions. */
function Sessions({ bot, flows }: { bot: Bot; flows: { code: string; title: string }[] }) {
  const [list, setList] = useState<BotSession[] | null>(null);
  const [flow, setFlow] = useState(flows[0]?.code ?? "");
  const [phone, setPhone] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const load = () => get<Page<BotSession>>(`/flow-sessions?bot=${enc(bot.code)}&limit=10`).then((p) => setList(p.data));
  useEffect(() => {
    load().catch((e) => setError(errorText(e)));
  }, [bot.code]);
  useEffect(() => {
    if (!flows.some((f) => f.code === flow)) setFlow(flows[0]?.code ?? "");
  }, [flows.map((f) => f.code).join()]);
  const act = acting(load, setError, setStatus);
  return (
    <section aria-labelledby={`sessions-${bot.code}`}>
      {flows.length ? (
        <form
          class="filters"
          onSubmit={(e) => {
            e.preventDefault();
            act(async () => {
              const r = await post<FlowInvited>(`/bots/${bot.code}/flows/${enc(flow)}/invite`, { phone: phone.trim() });
              setPhone("");
              return `${r.flow_session.phone} is invited to ${r.flow_session.flow} (${r.flow_session.ref}).`;
            });
          }}
        >
          <div class="field">
            <label for={`invite-flow-${bot.code}`}>Flow</label>
            <select id={`invite-flow-${bot.code}`} value={flow} onChange={(e) => setFlow(e.currentTarget.value)}>
              {flows.map((f) => (
                <option value={f.code}>{f.title}</option>
              ))}
            </select>
          </div>
          <div class="field">
            <label for={`invite-phone-${bot.code}`}>Phone to invite</label>
            <input id={`invite-phone-${bot.code}`} type="tel" placeholder="+15551230000" value={phone} onInput={(e) => setPhone(e.currentTarget.value)} required />
          </div>
          <button>Invite to the flow</button>
        </form>
      ) : null}
      <Alert text={error} />
      {status ? <p role="status">{status}</p> : null}
      <h3 id={`sessions-${bot.code}`}>
        Recent sessions of {bot.code}{" "}
        <button type="button" onClick={() => act(load)}>
          Refresh<span class="sr-only"> the sessions of {bot.code}</span>
        </button>
      </h3>
      {list === null ? (
        <p class="muted">Loading…</p>
      ) : list.length === 0 ? (
        <p class="muted">No sessions yet.</p>
      ) : (
        <table class="page-table">
          <Head cols={["Started", "Phone", "Flow", "State", "Completed"]} />
          <tbody>
            {list.map((x) => (
              <tr>
                <td>{when(x.invited_at)}</td>
                <td>{x.phone}</td>
                <td>{x.kind === "chat" ? "chat" : (x.title ?? x.flow)}</td>
                <td>{x.state}</td>
                <td>{x.completed_at ? when(x.completed_at) : "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
