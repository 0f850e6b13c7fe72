// The desk, for admins and owners: how conversations find an agent (manual, round robin, by capacity) and
// who takes them now, the labels agents put on conversations, the macros they apply, and the canned replies.
import { useEffect, useState } from "preact/hooks";
import { errorText } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { del, get, post, put, type AssignmentSettings, type CannedReply, type Label, type Macro, type MacroAction, type Member, type Page } from "./api";
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
      <Labels onChange={changes} />
      <Macros members={members} changed={changed} />
      <Canned embedded onChange={changes} />
    </section>
  );
}

function Assignment() {
  const [settings, setSettings] = useState<AssignmentSettings | null>(null);
  const [mode, setMode] = useState("manual");
  const [capacity, setCapacity] = useState("10");
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const load = () =>
    get<AssignmentSettings>("/settings/assignment").then(
      (s) => {
        setSettings(s);
        setMode(s.mode);
        setCapacity(String(s.default_capacity));
      },
      (e) => setError(errorText(e)),
    );
  useEffect(() => void load(), []);
  const act = acting(load, setError, setStatus);
  return (
    <section class="card" aria-labelledby="assignment-h">
      <h2 id="assignment-h">Assignment</h2>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
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
            <Head cols={["Agent", "Status", "Open conversations", "At most"]} />
            <tbody>
              {settings.agents.map((a) => (
                <tr>
                  <td>{a.name ?? `member ${a.member_id}`}</td>
                  <td>
                    <span class={`presence presence-${a.status}`}>{a.status}</span>
                  </td>
                  <td>{a.open_conversations}</td>
                  <td>{a.capacity ?? settings.default_capacity}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}

function Labels({ onChange }: { onChange: () => void }) {
  const { list, error, status, act } = useList<Label>("Desk", "/labels");
  useEffect(onChange, [list]);
  const [name, setName] = useState("");
  const [color, setColor] = useState("#2563eb");
  return (
    <section class="card" aria-labelledby="labels-h">
      <h2 id="labels-h">Labels</h2>
      <p class="hint">Agents put them on conversations and filter the list by them. The person never sees them.</p>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
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
    </section>
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
    <section class="card" aria-labelledby="macros-h">
      <h2 id="macros-h">Macros</h2>
      <p class="hint">Several actions an agent applies to a conversation at once, from the conversation’s “Apply a macro”.</p>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
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
    </section>
  );
}
