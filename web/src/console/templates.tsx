import { useState } from "preact/hooks";
import { Alert, Head } from "../shared/ui";
import { post, type Template } from "./api";
import { useList } from "./page";

/** Templates: their status and the review's decision; create a draft, submit it for review. */
export function Templates() {
  const { list, error, status, act } = useList<Template>("Templates", "/templates?limit=100");
  const [code, setCode] = useState("");
  const [channel, setChannel] = useState("inapp");
  const [category, setCategory] = useState("utility");
  const [lang, setLang] = useState("en");
  const [body, setBody] = useState("");
  return (
    <section class="page" aria-labelledby="templates-h">
      <h1 id="templates-h">Templates</h1>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
      <form
        class="card"
        onSubmit={(e) => {
          e.preventDefault();
          act(async () => {
            const made = await post<Template>("/templates", { code: code.trim(), channel, category, lang: lang.trim(), body });
            setCode("");
            setBody("");
            return `Template ${made.code} saved as a draft.`;
          });
        }}
      >
        <h2>New template</h2>
        <label for="template-code">Code</label>
        <input id="template-code" value={code} placeholder="order_shipped" onInput={(e) => setCode(e.currentTarget.value)} required />
        <label for="template-channel">Channel</label>
        <select id="template-channel" value={channel} onChange={(e) => setChannel(e.currentTarget.value)}>
          <option value="inapp">In the app</option>
          <option value="whatsapp">WhatsApp</option>
          <option value="sms">SMS</option>
        </select>
        <label for="template-category">Category</label>
        <select id="template-category" value={category} onChange={(e) => setCategory(e.currentTarget.value)}>
          <option value="utility">Utility</option>
          <option value="marketing">Marketing</option>
          <option value="authentication">Authentication</option>
        </select>
        <label for="template-lang">Language</label>
        <input id="template-lang" value={lang} onInput={(e) => setLang(e.currentTarget.value)} />
        <label for="template-body">Text</label>
        <textarea id="template-body" rows={3} value={body} placeholder="Hi {{name}}, your order has shipped." onInput={(e) => setBody(e.currentTarget.value)} required />
        <button class="primary">Save draft</button>
      </form>
      {list.length === 0 ? (
        <p class="muted">No templates yet.</p>
      ) : (
        <table>
          <Head cols={["Code", "Channel", "Language", "Status", "Text", "Decision"]} actions />
          <tbody>
            {list.map((t) => (
              <tr>
                <td class="mono">{t.code}</td>
                <td>{t.channel}</td>
                <td>{t.lang}</td>
                <td>
                  <span class="status-pill">{t.status}</span>
                </td>
                <td class="pre">{t.body}</td>
                <td>{t.rejection_reason ? `Rejected: ${t.rejection_reason}` : t.status === "approved" ? "Approved" : "—"}</td>
                <td>
                  {t.status === "draft" || t.status === "rejected" ? (
                    <button type="button" onClick={() => act(() => post(`/templates/${t.template_id}/submit`), `${t.code} submitted for review.`)}>
                      Submit<span class="sr-only"> {t.code}</span>
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
