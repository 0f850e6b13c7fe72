import { useState } from "preact/hooks";
import { when } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { del, post, type PasskeyChallenge, type PasskeyRecord } from "./api";
import { useList } from "./page";
import { createPasskey, passkeysAvailable } from "./webauthn";

/** The signed-in member's passkeys: add one (this device's screen lock or a security key), see when each was
 * last used, remove one. */
export function Passkeys() {
  const { list: keys, error, status, act } = useList<PasskeyRecord>("Passkeys", "/members/me/passkeys");
  const [name, setName] = useState("");
  const add = () =>
    act(async () => {
      const challenge = await post<PasskeyChallenge>("/members/me/passkeys/challenges", {});
      const credential = await createPasskey(challenge.options);
      const body: Record<string, unknown> = { ceremony: challenge.ceremony, credential };
      if (name.trim()) body.name = name.trim();
      const made = await post<PasskeyRecord>("/members/me/passkeys", body);
      setName("");
      return `Passkey “${made.name}” added: next time, sign in with it.`;
    });
  return (
    <section class="page" aria-labelledby="passkeys-h">
      <h1 id="passkeys-h">Passkeys</h1>
      <p class="hint">A passkey signs you in with this device's screen lock or a security key, instead of a code sent to your phone.</p>
      <Alert text={error} />
      {passkeysAvailable() ? (
        <form
          class="card invite"
          onSubmit={(e) => {
            e.preventDefault();
            add();
          }}
        >
          <label for="passkey-name">Name (optional)</label>
          <input id="passkey-name" placeholder="Work laptop" maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          <button class="primary">Add a passkey</button>
        </form>
      ) : (
        <p class="hint">This browser cannot use passkeys.</p>
      )}
      <p role="status" class="hint">
        {status}
      </p>
      <table>
        <caption class="sr-only">Your passkeys</caption>
        <Head cols={["Name", "Added", "Last used"]} actions />
        <tbody>
          {keys.map((k) => (
            <tr>
              <td>{k.name}</td>
              <td>{when(k.created_at)}</td>
              <td>{k.last_used_at ? when(k.last_used_at) : "never"}</td>
              <td>
                <button type="button" onClick={() => act(() => del(`/members/me/passkeys/${k.id}`), `Passkey “${k.name}” removed.`)}>
                  Remove {k.name}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {keys.length === 0 ? <p class="muted">No passkey yet.</p> : null}
    </section>
  );
}
