import { useState } from "preact/hooks";
import { when } from "../shared/format";
import { Alert, Head, ShownOnce } from "../shared/ui";
import { del, post, type ApiKey, type ApiKeyCreated } from "./api";
import { useList } from "./page";

/** The partner's API keys: several at once, so one is replaced without downtime. */
export function Keys() {
  const { list: keys, error, act } = useList<ApiKey>("API keys", "/api-keys");
  const [name, setName] = useState("");
  const [made, setMade] = useState<ApiKeyCreated | null>(null);
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
