import { useEffect, useState } from "preact/hooks";
import { when } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { del, post, put, type CannedReply } from "./api";
import { useList } from "./page";

/** The partner's canned replies: kept here by admins and owners, picked by agents in a thread's reply box
 * (and by macros). A section of the Desk page (`embedded`), or a page of its own. */
export function Canned({ embedded = false, onChange }: { embedded?: boolean; onChange?: () => void }) {
  const { list, error, status, act } = useList<CannedReply>("Canned replies", "/canned-replies");
  useEffect(() => onChange?.(), [list]);
  const [editing, setEditing] = useState<CannedReply | null>(null);
  const [shortcut, setShortcut] = useState("");
  const [body, setBody] = useState("");
  const edit = (r: CannedReply | null) => {
    setEditing(r);
    setShortcut(r?.shortcut ?? "");
    setBody(r?.body ?? "");
  };
  return (
    <section class={embedded ? "card" : "page"} aria-labelledby="canned-h">
      {embedded ? <h2 id="canned-h">Canned replies</h2> : <h1 id="canned-h">Canned replies</h1>}
      <p class="hint">Answers your agents send often. In a conversation, they insert one from the reply box.</p>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
      <form
        class="card"
        onSubmit={(e) => {
          e.preventDefault();
          const was = editing;
          act(async () => {
            const sent = { shortcut: shortcut.trim(), body };
            if (was) await put(`/canned-replies/${was.id}`, sent);
            else await post("/canned-replies", sent);
            edit(null);
            return was ? `/${sent.shortcut} saved.` : `/${sent.shortcut} added.`;
          });
        }}
      >
        {embedded ? <h3>{editing ? `Edit /${editing.shortcut}` : "New canned reply"}</h3> : <h2>{editing ? `Edit /${editing.shortcut}` : "New canned reply"}</h2>}
        <label for="canned-shortcut">Shortcut</label>
        <input id="canned-shortcut" value={shortcut} pattern="[a-z0-9_\-]{1,32}" placeholder="refund" onInput={(e) => setShortcut(e.currentTarget.value)} required />
        <p class="hint">Lower-case letters, digits, - and _.</p>
        <label for="canned-body">Text</label>
        <textarea id="canned-body" rows={3} value={body} onInput={(e) => setBody(e.currentTarget.value)} required />
        <button class="primary">{editing ? "Save" : "Add canned reply"}</button>
        {editing ? (
          <button type="button" onClick={() => edit(null)}>
            Cancel
          </button>
        ) : null}
      </form>
      {list.length === 0 ? (
        <p class="muted">No canned replies yet.</p>
      ) : (
        <table>
          <Head cols={["Shortcut", "Text", "Changed"]} actions />
          <tbody>
            {list.map((r) => (
              <tr>
                <td class="mono">/{r.shortcut}</td>
                <td class="pre">{r.body}</td>
                <td>{when(r.updated_at)}</td>
                <td>
                  <button type="button" onClick={() => edit(r)}>
                    Edit<span class="sr-only"> /{r.shortcut}</span>
                  </button>
                  <button type="button" onClick={() => confirm(`Delete /${r.shortcut}?`) && act(() => del(`/canned-replies/${r.id}`), `/${r.shortcut} deleted.`)}>
                    Delete<span class="sr-only"> /{r.shortcut}</span>
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
