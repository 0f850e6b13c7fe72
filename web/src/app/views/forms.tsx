// Forms: the open flow invitations, and a flow run step by step from the bot's JSON steps.
import { useEffect, useState } from "preact/hooks";
import { ApiError, enc, get, post, type FlowProgress, type FlowState, type OpenForm, type Page } from "../api";
import { interactive, StepView, Summary, type Field, type Step, type StepHandlers } from "../steps";
import { useLive } from "../live";
import { ErrorNote, Loading, useAsync, useTitle } from "../util";
import { when } from "../../shared/format";
import { cachedFlowCard, markReadRef, rememberMessage } from "./inbox";

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
              {f.bot} · invited {when(f.invited_at, "short")} · <span class="status-pill">{f.state === "in_progress" ? "in progress" : "new"}</span>
            </p>
          </li>
        ))}
      </ul>
    </section>
  );
}

type Entry = { from: "bot"; step: Step } | { from: "me"; text: string };

/** The flow whose payment the user left to pay (the checkout brings them back to `/forms/{ref}`). */
const paying = (flowRef: string) => `hubbub.paying.flow.${flowRef}`;

export function FlowRun({ flowRef }: { flowRef: string }) {
  const [entries, setEntries] = useState<Entry[]>([]);
  const [state, setState] = useState<string>("loading");
  const [summary, setSummary] = useState<Record<string, unknown> | null>(null);
  const [card, setCard] = useState<FlowState | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [fields, setFields] = useState<Field[]>([]);
  const title = card ? card.title || card.flow : "Form";
  useTitle(title);

  const apply = (p: FlowProgress, mine?: string) => {
    const steps = (p.steps ?? []) as Step[];
    for (const s of steps) if (s.type === "flow_screen") setFields((old) => [...old, ...s.screen.fields]);
    setEntries((old) => [...old, ...(mine ? [{ from: "me" as const, text: mine }] : []), ...steps.map((step) => ({ from: "bot" as const, step }))]);
    setState(p.state);
    if (p.state === "completed") {
      setSummary((p.summary as Record<string, unknown>) ?? null);
      // The inbox's card of this flow (if loaded) becomes read only without waiting for its next poll.
      const m = cachedFlowCard(flowRef);
      if (m?.flow) rememberMessage({ ...m, flow: { ...m.flow, state: "completed", summary: p.summary } });
    }
  };

  useEffect(() => {
    let live = true;
    (async () => {
      try {
        // Where the flow stands decides what to show: a completed one is its read-only summary.
        const c = await get<FlowState>(`/me/flows/${enc(flowRef)}`);
        if (!live) return;
        setCard(c);
        if (c.message_ref) markReadRef(c.message_ref);
        if (sessionStorage.getItem(paying(flowRef))) {
          // Back from the checkout: the bot's answer to the payment arrives as the flow's new steps.
          if (c.state !== "completed") {
            setState("waiting");
            return;
          }
          sessionStorage.removeItem(paying(flowRef));
          const p = await get<FlowProgress>(`/me/flows/${enc(flowRef)}/steps`);
          if (!live) return;
          if (p.steps?.length) {
            apply(p);
            return;
          }
        }
        if (c.state !== "completed") {
          try {
            const p = await post<FlowProgress>(`/me/flows/${enc(flowRef)}/start`);
            if (live) apply(p);
            return;
          } catch (e) {
            // Completed meanwhile (on another device): show it as it now stands.
            if (!(e instanceof ApiError && e.status === 409)) throw e;
          }
        }
        sessionStorage.removeItem(paying(flowRef));
        const done = c.state === "completed" ? c : await get<FlowState>(`/me/flows/${enc(flowRef)}`);
        if (!live) return;
        setCard(done);
        setSummary((done.summary as Record<string, unknown> | null | undefined) ?? null);
        setState("completed");
      } catch (e) {
        if (!live) return;
        setError(e instanceof ApiError && e.status === 404 ? new Error("This form was not found: it may belong to another account.") : e);
        setState("error");
      }
    })();
    return () => {
      live = false;
    };
  }, [flowRef]);

  const on: StepHandlers = {
    select: async (id, label) => apply(await post<FlowProgress>(`/me/flows/${enc(flowRef)}/events`, { type: "select", id }), label),
    submit: async (screen, values) => apply(await post<FlowProgress>(`/me/flows/${enc(flowRef)}/submit`, { screen, values }), "Sent"),
    paying: (p) => sessionStorage.setItem(paying(flowRef), p.ref),
  };

  const lastInteractive = entries.map((e, i) => (e.from === "bot" && interactive(e.step) ? i : -1)).reduce((a, b) => Math.max(a, b), -1);
  const awaitingPayment = state === "waiting" || (state === "in_progress" && lastInteractive >= 0 && entries[lastInteractive].from === "bot" && (entries[lastInteractive] as { step: Step }).step.type === "payment");
  // While a payment is open, the bot's answer to its outcome comes from the provider: fetched once on opening
  // (it may have come while the user was at the checkout) and whenever the stream says the flow has news.
  const fetchOutcome = async () => {
    if (!awaitingPayment) return;
    const p = await get<FlowProgress>(`/me/flows/${enc(flowRef)}/steps`);
    if (p.steps?.length || p.state === "completed") {
      sessionStorage.removeItem(paying(flowRef));
      apply(p);
    }
  };
  useEffect(() => {
    fetchOutcome().catch(() => {});
  }, [awaitingPayment, flowRef]);
  useLive(["flow.updated"], (f: { ref: string }) => {
    if (f.ref === flowRef) fetchOutcome().catch(() => {});
  }, [awaitingPayment, flowRef]);
  const completedShown = entries.some((e) => e.from === "bot" && e.step.type === "flow_completed");
  return (
    <section aria-labelledby="flow-h" class="flow">
      <p>
        <a href="/forms" class="back">← Forms</a>
      </p>
      <h1 id="flow-h">{title}</h1>
      <ErrorNote error={error} />
      {state === "loading" ? <Loading what="Opening the form" /> : null}
      {state === "waiting" ? <Loading what="Waiting for the payment" /> : null}
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
