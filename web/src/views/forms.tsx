// Forms: the open flow invitations, and a flow run step by step from the bot's JSON steps.
import { useEffect, useState } from "preact/hooks";
import { ApiError, enc, get, post, type FlowCard, type FlowProgress, type Message, type OpenForm, type Page } from "../api";
import { useLocation } from "../router";
import { interactive, StepView, Summary, type Field, type Step, type StepHandlers } from "../steps";
import { ErrorNote, Loading, useAsync, useTitle, when } from "../util";
import { cachedFlowCard, cachedMessage, markRead, rememberMessage } from "./inbox";

export function Forms() {
  useTitle("Forms");
  const { data, error } = useAsync(() => get<Page<OpenForm>>("/me/forms"), []);
  return (
    <section aria-labelledby="forms-h">
      <h1 id="forms-h">Forms</h1>
      <ErrorNote error={error} />
      {!data && !error ? <Loading /> : null}
      {data && data.data.length === 0 ? <p class="empty">No open forms. Invitations to fill in a form appear here.</p> : null}
      <ul class="cards">
        {data?.data.map((f) => (
          <li key={f.ref} class="card">
            <h2>
              <a href={`/forms/${enc(f.ref)}`}>{f.title || f.flow}</a>
            </h2>
            <p class="meta">
              {f.bot} · invited {when(f.invited_at)} · <span class="status-pill">{f.state === "in_progress" ? "in progress" : "new"}</span>
            </p>
          </li>
        ))}
      </ul>
    </section>
  );
}

type Entry = { from: "bot"; step: Step } | { from: "me"; text: string };

/** Finds the flow card of a flow (for its title and, once completed, its summary). */
async function findCard(flowRef: string, messageRef: string | null): Promise<Message | undefined> {
  const hit = (messageRef && cachedMessage(messageRef)) || cachedFlowCard(flowRef);
  if (hit) return hit;
  if (messageRef) {
    try {
      const m = await get<Message>(`/me/messages/${enc(messageRef)}`);
      rememberMessage(m);
      return m;
    } catch {
      /* fall through to the newest page */
    }
  }
  const page = await get<Page<Message>>("/me/messages?limit=200");
  page.data.forEach(rememberMessage);
  return page.data.find((m) => (m.flow as FlowCard | null)?.ref === flowRef);
}

export function FlowRun({ flowRef }: { flowRef: string }) {
  const { query } = useLocation();
  const messageRef = query.get("m");
  const [entries, setEntries] = useState<Entry[]>([]);
  const [state, setState] = useState<string>("loading");
  const [summary, setSummary] = useState<Record<string, unknown> | null>(null);
  const [card, setCard] = useState<Message | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [fields, setFields] = useState<Field[]>([]);
  const title = (card?.flow as FlowCard | undefined)?.title || "Form";
  useTitle(title);

  const apply = (p: FlowProgress, mine?: string) => {
    const steps = (p.steps ?? []) as Step[];
    for (const s of steps) if (s.type === "flow_screen") setFields((old) => [...old, ...s.screen.fields]);
    setEntries((old) => [...old, ...(mine ? [{ from: "me" as const, text: mine }] : []), ...steps.map((step) => ({ from: "bot" as const, step }))]);
    setState(p.state);
    if (p.state === "completed") {
      setSummary((p.summary as Record<string, unknown>) ?? null);
      if (card) rememberMessage({ ...card, flow: { ...(card.flow as FlowCard), state: "completed", summary: p.summary } });
    }
  };

  useEffect(() => {
    let live = true;
    (async () => {
      const c = await findCard(flowRef, messageRef).catch(() => undefined);
      if (!live) return;
      setCard(c);
      if (c) markRead(c);
      const fc = c?.flow as FlowCard | undefined;
      if (fc?.state === "completed") {
        setState("completed");
        setSummary(fc.summary ?? {});
        return;
      }
      try {
        const p = await post<FlowProgress>(`/me/flows/${enc(flowRef)}/start`);
        if (live) apply(p);
      } catch (e) {
        if (!live) return;
        if (e instanceof ApiError && e.status === 409) {
          setState("completed");
          setSummary(fc?.summary ?? null);
        } else {
          setError(e);
          setState("error");
        }
      }
    })();
    return () => {
      live = false;
    };
  }, [flowRef]);

  const on: StepHandlers = {
    select: async (id, label) => apply(await post<FlowProgress>(`/me/flows/${enc(flowRef)}/events`, { type: "select", id }), label),
    submit: async (screen, values) => apply(await post<FlowProgress>(`/me/flows/${enc(flowRef)}/submit`, { screen, values }), "Sent"),
    payment: async (id, status) =>
      apply(
        await post<FlowProgress>(`/me/flows/${enc(flowRef)}/events`, { type: "payment", id, status, reference: status === "confirmed" ? `WEB-${Date.now()}` : undefined }),
        status === "confirmed" ? "Paid" : "Cancelled",
      ),
  };

  const lastInteractive = entries.map((e, i) => (e.from === "bot" && interactive(e.step) ? i : -1)).reduce((a, b) => Math.max(a, b), -1);
  const completedShown = entries.some((e) => e.from === "bot" && e.step.type === "flow_completed");
  return (
    <section aria-labelledby="flow-h" class="flow">
      <p>
        <a href="/forms" class="back">← Forms</a>
      </p>
      <h1 id="flow-h">{title}</h1>
      <ErrorNote error={error} />
      {state === "loading" ? <Loading what="Opening the form" /> : null}
      <div class="transcript" aria-live="polite">
        {entries.map((e, i) =>
          e.from === "me" ? (
            <p key={i} class="bubble me">{e.text}</p>
          ) : (
            <StepView key={i} step={e.step} fields={fields} active={state !== "completed" && i === lastInteractive} on={on} />
          ),
        )}
      </div>
      {state === "completed" && !completedShown ? (
        <div class="completed card" role="status">
          <h2>Completed</h2>
          <p class="status-pill done">This form is completed and read only.</p>
          {summary ? <Summary summary={summary} fields={fields} /> : null}
        </div>
      ) : null}
      {state === "completed" && completedShown ? <p class="status-pill done">This form is completed and read only.</p> : null}
    </section>
  );
}
