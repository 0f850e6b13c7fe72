// The desk, for admins and owners: how conversations find an agent (manual, round robin, by capacity) and
// who takes them now, the labels agents put on conversations, the macros they apply, and the canned replies.
import { useEffect, useState } from "preact/hooks";
import { errorText } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { del, get, post, put, type AssignmentSettings, type BusinessHours, type CannedReply, type Label, type Macro, type MacroAction, type Member, type Page, type SlaTargets, type CsatSettings } from "./api";
import { when } from "../shared/format";
import { acting, useList, useTitle } from "./page";
import { Canned } from "./canned";

const MODES: [string, string][] = [
  ["manual", "Manual: agents take conversations or are given them"],
  ["round_robin", "Round robin: each new one to the next agent online"],
  ["capacity", "By capacity: each new one to the least busy agent online"],
];

export function Desk({ members }: { members: Member[] }) {
  useTitle("Desk");
  // The labels and canned replies a macro may use change on this page: the macro form reads them again.
  const [changed, setChanged] = useState(0);
  const changes = () => setChanged((n) => n + 1);
  return (
    <section class="page" aria-labelledby="desk-h">
      <h1 id="desk-h">Desk</h1>
      <p class="hint">How your team works conversations: who takes them, the labels and macros agents use, and canned replies.</p>
      <Assignment />
      <Hours />
      <Slas />
      <Ratings />
      <Labels onChange={changes} />
      <Macros members={members} changed={changed} />
      <Canned embedded onChange={changes} />
    </section>
  );
}

/** A settings object at `path`: fetched as its section opens and handed to `show` (the form's fields); `act`
 * saves a change and fetches it again. */
function useSettings<T>(path: string, show: (t: T) => void) {
  const [saved, setSaved] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const load = () =>
    get<T>(path).then(
      (t) => {
        setSaved(t);
        show(t);
      },
      (e) => setError(errorText(e)),
    );
  useEffect(() => void load(), []);
  return { saved, error, status, act: acting(load, setError, setStatus) };
}

/** A section of the page: its heading, what it is for, what the last change said, and its error. */
function Section({ id, title, hint, status, error, children }: { id: string; title: string; hint?: string; status: string; error: string | null; children: any }) {
  return (
    <section class="card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`}>{title}</h2>
      {hint ? <p class="hint">{hint}</p> : null}
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
      {children}
    </section>
  );
}

function Assignment() {
  const [mode, setMode] = useState("manual");
  const [capacity, setCapacity] = useState("10");
  const { saved: settings, error, status, act } = useSettings<AssignmentSettings>("/settings/assignment", (s) => {
    setMode(s.mode);
    setCapacity(String(s.default_capacity));
  });
  return (
    <Section id="assignment" title="Assignment" status={status} error={error}>
      {settings === null ? (
        <p class="muted">Loading…</p>
      ) : (
        <>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              act(() => put("/settings/assignment", { mode, default_capacity: Number(capacity) }), "Assignment saved.");
            }}
          >
            <fieldset>
              <legend>New and reopened conversations</legend>
              {MODES.map(([value, label]) => (
                <label class="check">
                  <input type="radio" name="assignment-mode" value={value} checked={mode === value} onChange={() => setMode(value)} /> {label}
                </label>
              ))}
            </fieldset>
            <label for="default-capacity">Conversations an agent has at most (unless set for them on Members)</label>
            <input id="default-capacity" type="number" min={1} max={1000} required value={capacity} onInput={(e) => setCapacity(e.currentTarget.value)} />
            <button class="primary">Save assignment</button>
          </form>
          <p class="meta">
            {settings.queued === 1 ? "1 open conversation waits" : `${settings.queued} open conversations wait`} for an agent.
          </p>
          <table>
            <caption class="sr-only">Your team as assignment sees it</caption>
            <Head cols={["Agent", "Status", "Open conversations", "At most", "Rating"]} />
            <tbody>
              {settings.agents.map((a) => (
                <tr>
                  <td>{a.name ?? `member ${a.member_id}`}</td>
                  <td>
                    <span class={`presence presence-${a.status}`}>{a.status}</span>
                  </td>
                  <td>{a.open_conversations}</td>
                  <td>{a.capacity ?? settings.default_capacity}</td>
                  <td>{a.csat_average != null ? `${a.csat_average.toFixed(1)} / 5 (${a.csat_count})` : "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </Section>
  );
}

const WEEK: [string, string][] = [
  ["mon", "Monday"],
  ["tue", "Tuesday"],
  ["wed", "Wednesday"],
  ["thu", "Thursday"],
  ["fri", "Friday"],
  ["sat", "Saturday"],
  ["sun", "Sunday"],
];

type Day = keyof BusinessHours["hours"];

/** A day's intervals as typed: `09:00-12:00, 13:00-17:00` (empty: closed). */
const dayText = (intervals: { start: string; end: string }[]) => intervals.map((i) => `${i.start}-${i.end}`).join(", ");
const dayIntervals = (text: string) =>
  text
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const [start, end] = part.split(/\s*[-–]\s*/);
      return { start: start ?? "", end: end ?? "" };
    });

/** The partner's business hours: its time zone, each day's hours, holidays, and the automatic reply. */
function Hours() {
  const [enabled, setEnabled] = useState(false);
  const [zone, setZone] = useState(Intl.DateTimeFormat().resolvedOptions().timeZone);
  const [days, setDays] = useState<Record<string, string>>({});
  const [holidays, setHolidays] = useState("");
  const [away, setAway] = useState("");
  const { saved, error, status, act } = useSettings<BusinessHours>("/settings/business-hours", (h) => {
    setEnabled(h.enabled);
    if (h.time_zone) setZone(h.time_zone);
    setDays(Object.fromEntries(WEEK.map(([d]) => [d, h.enabled ? dayText(h.hours[d as Day] as { start: string; end: string }[]) : d === "sat" || d === "sun" ? "" : "09:00-17:00"])));
    setHolidays(h.holidays.join("\n"));
    setAway(h.away_message ?? "");
  });
  return (
    <Section id="hours" title="Business hours" hint="Outside them, a person who writes gets your automatic reply once, with when you are back; SLAs count only these hours." status={status} error={error}>
      {saved === null ? (
        <p class="muted">Loading…</p>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            const hours = Object.fromEntries(WEEK.map(([d]) => [d, dayIntervals(days[d] ?? "")]));
            const body = {
              enabled,
              time_zone: zone.trim(),
              hours,
              holidays: holidays.split(/\s+/).filter(Boolean),
              away_message: away.trim() ? away.trim() : null,
            };
            act(() => put("/settings/business-hours", body), "Business hours saved.");
          }}
        >
          <label class="check">
            <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} /> Keep business hours (off: always in)
          </label>
          {enabled ? (
            <>
              <label for="hours-zone">Time zone</label>
              <input id="hours-zone" value={zone} list="zones" onInput={(e) => setZone(e.currentTarget.value)} required />
              <datalist id="zones">
                {(Intl as unknown as { supportedValuesOf?: (k: string) => string[] }).supportedValuesOf?.("timeZone").map((z) => <option value={z} />)}
              </datalist>
              <fieldset>
                <legend>Hours (e.g. 09:00-12:00, 13:00-17:00; empty: closed)</legend>
                {WEEK.map(([d, name]) => (
                  <div class="field">
                    <label for={`hours-${d}`}>{name}</label>
                    <input id={`hours-${d}`} value={days[d] ?? ""} onInput={(e) => setDays((old) => ({ ...old, [d]: e.currentTarget.value }))} />
                  </div>
                ))}
              </fieldset>
              <label for="hours-holidays">Holidays (YYYY-MM-DD, one a line)</label>
              <textarea id="hours-holidays" rows={2} value={holidays} onInput={(e) => setHolidays(e.currentTarget.value)} />
            </>
          ) : null}
          <label for="hours-away">Automatic reply outside business hours (empty: none)</label>
          <textarea id="hours-away" rows={2} maxLength={1000} value={away} onInput={(e) => setAway(e.currentTarget.value)} />
          <button class="primary">Save business hours</button>
          {saved.enabled ? (
            <p class="meta">{saved.open_now ? "Your team is in now." : `Your team is out now; back ${saved.next_open_at ? when(saved.next_open_at) : "—"}.`}</p>
          ) : null}
        </form>
      )}
    </Section>
  );
}

/** Whether people are asked to rate a conversation when it is closed, and the question. */
function Ratings() {
  const [enabled, setEnabled] = useState(false);
  const [question, setQuestion] = useState("");
  const { saved, error, status, act } = useSettings<CsatSettings>("/settings/csat", (c) => {
    setEnabled(c.enabled ?? false);
    setQuestion(c.question ?? "");
  });
  // The form appears once the saved settings are in: a box ticked before they came would be unticked by them.
  return (
    <Section id="ratings" title="Ratings" hint="When an agent closes a conversation they answered, the person rates it 1 to 5: buttons in the app, a list on WhatsApp, a number by SMS." status={status} error={error}>
      {saved === null ? (
        <p class="muted">Loading…</p>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            act(() => put("/settings/csat", { enabled, question: question.trim() || null }), "Ratings saved.");
          }}
        >
          <label class="check">
            <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} /> Ask people to rate closed conversations
          </label>
          <label for="csat-question">Question (empty: “How did we do? …”)</label>
          <input id="csat-question" maxLength={500} value={question} onInput={(e) => setQuestion(e.currentTarget.value)} />
          <button class="primary">Save ratings</button>
        </form>
      )}
    </Section>
  );
}

/** The SLA targets, in minutes of business time. */
function Slas() {
  const [first, setFirst] = useState("");
  const [next, setNext] = useState("");
  const minutes = (s: number | null | undefined) => (s ? String(Math.round((s / 60) * 100) / 100) : "");
  const { saved, error, status, act } = useSettings<SlaTargets>("/settings/slas", (t) => {
    setFirst(minutes(t.first_response_s));
    setNext(minutes(t.next_response_s));
  });
  const seconds = (m: string) => (m.trim() === "" ? null : Math.round(Number(m) * 60));
  return (
    <Section id="slas" title="SLAs" hint="How soon an agent answers, in business hours. A conversation past it shows “SLA breached”, and a webhook goes." status={status} error={error}>
      {saved === null ? (
        <p class="muted">Loading…</p>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            act(() => put("/settings/slas", { first_response_s: seconds(first), next_response_s: seconds(next) }), "SLAs saved.");
          }}
        >
          <label for="sla-first">First answer within (minutes; empty: none)</label>
          <input id="sla-first" type="number" min={0} step="any" value={first} onInput={(e) => setFirst(e.currentTarget.value)} />
          <label for="sla-next">Next answer within (minutes; empty: none)</label>
          <input id="sla-next" type="number" min={0} step="any" value={next} onInput={(e) => setNext(e.currentTarget.value)} />
          <button class="primary">Save SLAs</button>
        </form>
      )}
    </Section>
  );
}

function Labels({ onChange }: { onChange: () => void }) {
  const { list, error, status, act } = useList<Label>("Desk", "/labels");
  useEffect(onChange, [list]);
  const [name, setName] = useState("");
  const [color, setColor] = useState("#2563eb");
  return (
    <Section id="labels" title="Labels" hint="Agents put them on conversations and filter the list by them. The person never sees them." status={status} error={error}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          act(async () => {
            const made = await post<Label>("/labels", { name: name.trim(), color });
            setName("");
            return `Label ${made.name} added.`;
          });
        }}
      >
        <label for="label-name">Name</label>
        <input id="label-name" value={name} maxLength={50} placeholder="billing" onInput={(e) => setName(e.currentTarget.value)} required />
        <label for="label-color">Colour</label>
        <input id="label-color" type="color" value={color} onInput={(e) => setColor(e.currentTarget.value)} />
        <button class="primary">Add label</button>
      </form>
      {list.length === 0 ? (
        <p class="muted">No labels yet.</p>
      ) : (
        <ul class="plain labels">
          {list.map((l) => (
            <li>
              <span class="label-chip" style={{ borderColor: l.color }}>
                {l.name}
              </span>{" "}
              <span class="meta">{l.conversations === 1 ? "1 conversation" : `${l.conversations} conversations`}</span>{" "}
              <button type="button" onClick={() => confirm(`Delete the label ${l.name}? Conversations lose it.`) && act(() => del(`/labels/${l.id}`), `Label ${l.name} deleted.`)}>
                Delete<span class="sr-only"> label {l.name}</span>
              </button>
            </li>
          ))}
        </ul>
      )}
    </Section>
  );
}

/** What a macro does, in words. */
export function describe(actions: MacroAction[], members: Member[], canned: CannedReply[]): string {
  return actions
    .map((a) => {
      switch (a.type) {
        case "reply":
          return a.canned_reply_id ? `reply /${canned.find((c) => c.id === a.canned_reply_id)?.shortcut ?? a.canned_reply_id}` : `reply “${(a.body ?? "").slice(0, 40)}”`;
        case "add_labels":
          return `label ${a.labels.join(", ")}`;
        case "assign":
          return a.assignee === "me" ? "assign to whoever applies it" : a.assignee === "none" ? "unassign" : `assign to ${members.find((m) => String(m.id) === a.assignee)?.name ?? `member ${a.assignee}`}`;
        case "note":
          return "add a note";
        case "close":
          return "close";
      }
    })
    .join(" · ");
}

function Macros({ members, changed }: { members: Member[]; changed: number }) {
  const { list, error, status, act } = useList<Macro>("Desk", "/macros");
  const [labels, setLabels] = useState<Label[]>([]);
  const [canned, setCanned] = useState<CannedReply[]>([]);
  const [name, setName] = useState("");
  const [reply, setReply] = useState("");
  const [cannedId, setCannedId] = useState("");
  const [picked, setPicked] = useState<string[]>([]);
  const [note, setNote] = useState("");
  const [assign, setAssign] = useState("");
  const [close, setClose] = useState(false);
  useEffect(() => {
    get<Page<Label>>("/labels").then((p) => setLabels(p.data), () => undefined);
    get<Page<CannedReply>>("/canned-replies").then((p) => setCanned(p.data), () => undefined);
  }, [list, changed]);
  const reset = () => {
    setName("");
    setReply("");
    setCannedId("");
    setPicked([]);
    setNote("");
    setAssign("");
    setClose(false);
  };
  return (
    <Section id="macros" title="Macros" hint="Several actions an agent applies to a conversation at once, from the conversation’s “Apply a macro”." status={status} error={error}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const actions: MacroAction[] = [];
          if (cannedId) actions.push({ type: "reply", canned_reply_id: Number(cannedId) });
          else if (reply.trim()) actions.push({ type: "reply", body: reply });
          if (picked.length) actions.push({ type: "add_labels", labels: picked });
          if (note.trim()) actions.push({ type: "note", body: note });
          if (assign) actions.push({ type: "assign", assignee: assign });
          if (close) actions.push({ type: "close" });
          act(async () => {
            await post("/macros", { name: name.trim(), actions });
            reset();
            return `Macro ${name.trim()} added.`;
          });
        }}
      >
        <label for="macro-name">Name</label>
        <input id="macro-name" value={name} maxLength={80} placeholder="Refund and close" onInput={(e) => setName(e.currentTarget.value)} required />
        <label for="macro-reply">Reply with</label>
        <textarea id="macro-reply" rows={2} value={reply} disabled={!!cannedId} onInput={(e) => setReply(e.currentTarget.value)} />
        {canned.length ? (
          <>
            <label for="macro-canned">…or a canned reply</label>
            <select id="macro-canned" value={cannedId} onChange={(e) => setCannedId(e.currentTarget.value)}>
              <option value="">None</option>
              {canned.map((c) => (
                <option value={String(c.id)}>/{c.shortcut}</option>
              ))}
            </select>
          </>
        ) : null}
        {labels.length ? (
          <fieldset>
            <legend>Add labels</legend>
            {labels.map((l) => (
              <label class="check">
                <input
                  type="checkbox"
                  checked={picked.includes(l.name)}
                  onChange={(e) => setPicked((p) => (e.currentTarget.checked ? [...p, l.name] : p.filter((x) => x !== l.name)))}
                />{" "}
                {l.name}
              </label>
            ))}
          </fieldset>
        ) : null}
        <label for="macro-note">Internal note</label>
        <textarea id="macro-note" rows={2} value={note} onInput={(e) => setNote(e.currentTarget.value)} />
        <label for="macro-assign">Assign</label>
        <select id="macro-assign" value={assign} onChange={(e) => setAssign(e.currentTarget.value)}>
          <option value="">Leave as it is</option>
          <option value="me">To whoever applies it</option>
          <option value="none">Unassign</option>
          {members.map((m) => (
            <option value={String(m.id)}>{m.name || m.phone}</option>
          ))}
        </select>
        <label class="check">
          <input type="checkbox" checked={close} onChange={(e) => setClose(e.currentTarget.checked)} /> Close the conversation
        </label>
        <button class="primary">Add macro</button>
      </form>
      {list.length === 0 ? (
        <p class="muted">No macros yet.</p>
      ) : (
        <table>
          <Head cols={["Macro", "What it does"]} actions />
          <tbody>
            {list.map((m) => (
              <tr>
                <td>{m.name}</td>
                <td>{describe(m.actions, members, canned)}</td>
                <td>
                  <button type="button" onClick={() => confirm(`Delete the macro ${m.name}?`) && act(() => del(`/macros/${m.id}`), `Macro ${m.name} deleted.`)}>
                    Delete<span class="sr-only"> macro {m.name}</span>
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}
