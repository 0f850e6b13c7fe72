import { useEffect, useState } from "preact/hooks";
import { Alert, Head, ShownOnce, acting, errorText, when } from "../pages/ui";
import { del, get, post, type Page, type ApiKey, type ApiKeyCreated } from "../pages/api";

/** The partner's API keys: several at once, so one is replaced without downtime. */
export function Keys() {
  const [keys, setKeys] = useState<ApiKey[]>([]);
  const [name, setName] = useState("");
  const [made, setMade] = useState<ApiKeyCreated | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => get<Page<ApiKey>>("/api-keys").then((p) => setKeys(p.data), (e) => setError(errorText(e)));
  useEffect(() => {
    load();
    document.title = "API keys · Hubbub console";
  }, []);
  const act = acting(load, setError);
  return (
    <section class="page" aria-labelledby="keys-h">
      <h1 id="keys-h">API keys</h1>
      <p class="hint">To replace a key without downtime: create a new one, move your services to it, then revoke the old one.</p>
      <p class="hint">A key may do what you may: it acts with your role, and stops working if you leave the team.</p>
      <Alert text={error} />
      <form
        class="card invite"
        onSubmit={(e) => {
          e.preventDefault();
          act(async () => {
            setMade(await post<ApiKeyCreated>("/api-keys", { name: name.trim() }));
            setName("");
          });
        }}
      >
        <label for="key-name">What the new key is for</label>
        <input id="key-name" value={name} onInput={(e) => setName(e.currentTarget.value)} required />
        <button class="primary">Create key</button>
        {made ? (
          <div role="status">
            <p>Store it now: it is shown this once.</p>
            <ShownOnce label="API key" value={made.api_key} />
          </div>
        ) : null}
      </form>
      <table>
        <caption class="sr-only">The partner's API keys</caption>
        <Head cols={["Name", "Prefix", "Acts as", "Created", "Last used", "Revoked"]} actions />
        <tbody>
          {keys.map((k) => (
            <tr>
              <td>{k.name}</td>
              <td class="mono">{k.prefix}</td>
              <td>{k.role}</td>
              <td>{when(k.created_at)}</td>
              <td>{k.last_used_at ? when(k.last_used_at) : "never"}</td>
              <td>{k.revoked_at ? when(k.revoked_at) : ""}</td>
              <td>
                {k.revoked_at ? null : (
                  <button type="button" onClick={() => act(() => del(`/api-keys/${k.id}`))}>
                    Revoke {k.name}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
