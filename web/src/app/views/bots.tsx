// Bots of the user's linked partners, and an in-app chat session: text, menus and screens.
import { useEffect, useRef, useState } from "preact/hooks";
import { enc, get, post, type MyBot, type Page } from "../api";
import { interactive, StepView, type Step, type StepHandlers } from "../steps";
import { useLive } from "../live";
import { refreshUnread } from "../unread";
import { ErrorNote, Loading, useAsync, useTitle } from "../util";

export function Bots() {
  useTitle("Bots");
  const { data, error } = useAsync(() => get<Page<MyBot>>("/me/bots"), []);
  return (
    <section aria-labelledby="bots-h">
      <h1 id="bots-h">Bots</h1>
      <ErrorNote error={error} />
      {!data && !error ? <Loading /> : null}
      {data?.data.length === 0 ? <p class="empty">None of your partners offers a bot yet.</p> : null}
      <ul class="cards">
        {data?.data.map((b) => (
          <li key={`${b.partner.code}/${b.code}`} class="card">
            <h2>
              <a href={`/bots/${enc(b.ref)}`}>{b.name}</a>
            </h2>
            <p class="meta">{b.partner.name}</p>
          </li>
        ))}
      </ul>
    </section>
  );
}

type Entry = { from: "bot"; step: Step } | { from: "me"; text: string };
interface Steps {
  session: string;
  steps: Step[];
}

// `bot` is the bot's ref (two partners may give their bots the same code).
export function BotChat({ bot }: { bot: string }) {
  const bots = useAsync(() => get<Page<MyBot>>("/me/bots"), []);
  const name = bots.data?.data.find((b) => b.ref === bot)?.name ?? "Bot";
  useTitle(name);
  const [session, setSession] = useState<string | null>(null);
  const [entries, setEntries] = useState<Entry[]>([]);
  const [text, setText] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const end = useRef<HTMLDivElement>(null);
  const base = `/me/bots/${enc(bot)}/sessions`;

  const add = (steps: Step[], mine?: string) =>
    setEntries((old) => [...old, ...(mine ? [{ from: "me" as const, text: mine }] : []), ...steps.map((step) => ({ from: "bot" as const, step }))]);

  const start = async () => {
    setError(null);
    setEntries([]);
    // Back from a payment's checkout: the same session, whose bot answers the outcome (fetched by the poll).
    const resumed = sessionStorage.getItem(`hubbub.paying.bot.${bot}`);
    if (resumed) {
      sessionStorage.removeItem(`hubbub.paying.bot.${bot}`);
      setSession(resumed);
      return;
    }
    try {
      const r = await post<Steps>(base);
      setSession(r.session);
      add(r.steps);
    } catch (e) {
      setError(e);
    }
  };
  useEffect(() => {
    start();
  }, [bot]);
  // Webhook bots answer later: fetch what they sent since.
  // Webhook bots answer later, and a payment's outcome comes from the provider: the session's new steps are
  // fetched when the stream says it has some (and once on opening, for what came while the app was away).
  const fetchSteps = async () => {
    if (!session) return;
    const r = await get<Steps>(`${base}/${enc(session)}`);
    if (r.steps?.length) {
      add(r.steps);
      refreshUnread();
    }
  };
  useEffect(() => {
    fetchSteps().catch(() => {});
  }, [session]);
  useLive(["flow.updated"], (f: { ref: string }) => {
    if (f.ref === session) fetchSteps().catch(setError);
  }, [session]);
  useEffect(() => {
    end.current?.scrollIntoView?.({ block: "nearest" });
  }, [entries.length]);

  const event = async (body: Record<string, unknown>, mine?: string) => {
    const r = await post<Steps>(`${base}/${enc(session!)}/events`, body);
    add(r.steps ?? [], mine);
  };
  const on: StepHandlers = {
    select: (id, label) => event({ type: "select", id }, label),
    submit: (screen, values) => event({ type: "submit", screen, values }, Object.values(values).filter((v) => typeof v !== "boolean").join(", ") || "Sent"),
    paying: () => {
      if (session) sessionStorage.setItem(`hubbub.paying.bot.${bot}`, session);
    },
  };
  async function sendText(e: Event) {
    e.preventDefault();
    const t = text.trim();
    if (!t || !session) return;
    setBusy(true);
    setError(null);
    try {
      await event({ type: "text", text: t }, t);
      setText("");
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }
  const lastInteractive = entries.map((e, i) => (e.from === "bot" && interactive(e.step) ? i : -1)).reduce((a, b) => Math.max(a, b), -1);
  return (
    <section aria-labelledby="bot-h" class="botchat">
      <p>
        <a href="/bots" class="back">← Bots</a>
      </p>
      <h1 id="bot-h">{name}</h1>
      {!session && !error ? <Loading what="Starting the chat" /> : null}
      <div class="transcript" aria-live="polite">
        {entries.map((e, i) =>
          e.from === "me" ? (
            <p key={i} class="bubble me">
              <span class="sr-only">You: </span>
              {e.text}
            </p>
          ) : (
            <StepView key={i} step={e.step} active={i === lastInteractive} on={on} />
          ),
        )}
        <div ref={end} />
      </div>
      <ErrorNote error={error} />
      {error && !session ? (
        <button type="button" onClick={start}>
          Try again
        </button>
      ) : null}
      <form class="composer" onSubmit={sendText}>
        <label for="bot-text" class="sr-only">
          Message to {name}
        </label>
        <input id="bot-text" type="text" maxLength={4096} placeholder="Type a message" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} disabled={!session} />
        <button type="submit" class="primary" disabled={busy || !session || !text.trim()}>
          Send
        </button>
      </form>
    </section>
  );
}
