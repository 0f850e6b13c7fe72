// Accounts: link a phone to the partner (with its custom field values, and an SMS invitation to claim it),
// look a linked account up, and define the partner's custom account fields.
import { useState } from "preact/hooks";
import { errorText } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { ApiError, del, enc, get, patch, post, type Account, type AccountField, type Linked } from "./api";
import { useList } from "./page";

const TYPES = ["char", "text", "number", "date", "selection", "boolean", "email", "phone"] as const;

export function Accounts() {
  const { list: fields, error, setError, status, act } = useList<AccountField>("Accounts", "/settings/account-fields");
  return (
    <section class="page" aria-labelledby="accounts-h">
      <h1 id="accounts-h">Accounts</h1>
      <p class="sr-only" role="status">
        {status}
      </p>
      <Alert text={error} />
      <LinkForm fields={fields} />
      <Lookup />
      <h2>Custom account fields</h2>
      <p class="hint">What you keep about each linked user. The user sees these values in their app.</p>
      {fields.length ? (
        <table>
          <caption class="sr-only">Custom account fields</caption>
          <Head cols={["Key", "Label", "Type", "Required", "Choices"]} actions />
          <tbody>
            {fields.map((f) => (
              <tr>
                <td class="mono">{f.key}</td>
                <td>{f.label}</td>
                <td>{f.type}</td>
                <td>{f.required ? "yes" : "no"}</td>
                <td>{(f.options ?? []).map((o) => o.label).join(", ")}</td>
                <td>
                  <button type="button" onClick={() => act(() => patch(`/settings/account-fields/${f.id}`, { required: !f.required }), `${f.key} is ${f.required ? "optional" : "required"} now.`)}>
                    {f.required ? "Make optional" : "Make required"}
                    <span class="sr-only"> {f.key}</span>
                  </button>{" "}
                  <button type="button" onClick={() => confirm(`Delete the field ${f.key}? Its stored values are kept but no longer shown.`) && act(() => del(`/settings/account-fields/${f.id}`), `${f.key} deleted.`)}>
                    Delete<span class="sr-only"> {f.key}</span>
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p class="muted">No custom fields yet.</p>
      )}
      <NewField onMade={(text) => act(async () => text)} onError={setError} />
    </section>
  );
}

/** Link a phone: display name, the custom fields' values (each checked by the server), and the invitation. */
function LinkForm({ fields }: { fields: AccountField[] }) {
  const [phone, setPhone] = useState("");
  const [name, setName] = useState("");
  const [values, setValues] = useState<Record<string, string>>({});
  const [invite, setInvite] = useState(true);
  const [done, setDone] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [fieldErrors, setFieldErrors] = useState<Record<string, string>>({});
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setDone(null);
    setFieldErrors({});
    const sent: Record<string, string> = {};
    for (const [k, v] of Object.entries(values)) if (v.trim()) sent[k] = v.trim();
    try {
      const r = await post<Linked>("/accounts/link", { phone: phone.trim(), display_name: name.trim() || null, fields: sent, invite });
      setDone(`${r.account.phone} is linked (${r.account.state})${r.invited ? "; the invitation SMS went out" : invite ? "; no invitation was sent (the account is claimed already, or the SMS failed)" : ""}.`);
      setPhone("");
      setName("");
      setValues({});
    } catch (err) {
      if (err instanceof ApiError) setFieldErrors(err.fields ?? {});
      setError(errorText(err));
    }
  };
  return (
    <form class="card invite" onSubmit={submit} aria-labelledby="link-h">
      <h2 id="link-h">Link a user</h2>
      <label for="link-phone">Phone</label>
      <input id="link-phone" type="tel" placeholder="+15551230000" value={phone} onInput={(e) => setPhone(e.currentTarget.value)} aria-invalid={fieldErrors.phone ? true : undefined} required />
      <label for="link-name">Display name (optional)</label>
      <input id="link-name" value={name} onInput={(e) => setName(e.currentTarget.value)} maxLength={200} />
      {fields.length ? (
        <fieldset class="field-values">
          <legend>Custom fields</legend>
          {fields.map((f) => {
            const id = `link-field-${f.key}`;
            const problem = fieldErrors[`fields.${f.key}`];
            const set = (v: string) => setValues({ ...values, [f.key]: v });
            return (
              <>
                <label for={id}>
                  {f.label}
                  {f.required ? " (required)" : ""}
                </label>
                {f.type === "selection" ? (
                  <select id={id} value={values[f.key] ?? ""} onChange={(e) => set(e.currentTarget.value)} aria-invalid={problem ? true : undefined}>
                    <option value="">—</option>
                    {(f.options ?? []).map((o) => (
                      <option value={o.id}>{o.label}</option>
                    ))}
                  </select>
                ) : f.type === "boolean" ? (
                  <select id={id} value={values[f.key] ?? ""} onChange={(e) => set(e.currentTarget.value)} aria-invalid={problem ? true : undefined}>
                    <option value="">—</option>
                    <option value="yes">Yes</option>
                    <option value="no">No</option>
                  </select>
                ) : (
                  <input
                    id={id}
                    type={f.type === "date" ? "date" : f.type === "email" ? "email" : f.type === "phone" ? "tel" : "text"}
                    inputMode={f.type === "number" ? "decimal" : undefined}
                    value={values[f.key] ?? ""}
                    onInput={(e) => set(e.currentTarget.value)}
                    aria-invalid={problem ? true : undefined}
                  />
                )}
                {problem ? <p class="error">{problem}</p> : null}
              </>
            );
          })}
        </fieldset>
      ) : null}
      <label>
        <input type="checkbox" checked={invite} onChange={(e) => setInvite(e.currentTarget.checked)} /> Send an SMS inviting them to claim their account
      </label>
      <button class="primary">Link</button>
      <Alert text={error} />
      {done ? <p role="status">{done}</p> : null}
    </form>
  );
}

/** One linked account, by phone. */
function Lookup() {
  const [phone, setPhone] = useState("");
  const [account, setAccount] = useState<Account | null>(null);
  const [error, setError] = useState<string | null>(null);
  return (
    <form
      class="card filters"
      role="search"
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        setAccount(null);
        try {
          setAccount(await get<Account>(`/accounts/${enc(phone.trim())}`));
        } catch (err) {
          setError(errorText(err));
        }
      }}
    >
      <div class="field">
        <label for="lookup-phone">Find a linked user by phone</label>
        <input id="lookup-phone" type="tel" value={phone} onInput={(e) => setPhone(e.currentTarget.value)} required />
      </div>
      <button>Find</button>
      <Alert text={error} />
      {account ? (
        <dl class="contact" aria-label={`Account ${account.phone}`}>
          <dt>Phone</dt>
          <dd>{account.phone}</dd>
          <dt>Name</dt>
          <dd>{account.display_name ?? "—"}</dd>
          <dt>Account</dt>
          <dd>{account.state}</dd>
          {Object.entries((account.fields ?? {}) as Record<string, unknown>).map(([k, v]) => (
            <>
              <dt>{k}</dt>
              <dd>{String(v)}</dd>
            </>
          ))}
        </dl>
      ) : null}
    </form>
  );
}

/** Define a field: key, label, type, required, and for a selection its choices (one per line). */
function NewField({ onMade, onError }: { onMade: (status: string) => void; onError: (e: string | null) => void }) {
  const [key, setKey] = useState("");
  const [label, setLabel] = useState("");
  const [type, setType] = useState<string>("char");
  const [required, setRequired] = useState(false);
  const [choices, setChoices] = useState("");
  return (
    <form
      class="card invite"
      aria-labelledby="field-h"
      onSubmit={async (e) => {
        e.preventDefault();
        onError(null);
        const options =
          type === "selection"
            ? choices
                .split("\n")
                .map((l) => l.trim())
                .filter(Boolean)
                .map((l) => ({ id: l.toLowerCase().replace(/[^a-z0-9_-]+/g, "-").replace(/^-+|-+$/g, "") || l, label: l }))
            : null;
        try {
          await post("/settings/account-fields", { key: key.trim(), label: label.trim(), type, required, options });
          setKey("");
          setLabel("");
          setChoices("");
          onMade(`The field ${key.trim()} was added.`);
        } catch (err) {
          onError(errorText(err));
        }
      }}
    >
      <h2 id="field-h">New field</h2>
      <label for="field-key">Key (a-z, 0-9, - and _)</label>
      <input id="field-key" value={key} pattern="[a-z0-9][a-z0-9_\-]{0,63}" onInput={(e) => setKey(e.currentTarget.value)} required />
      <label for="field-label">Label</label>
      <input id="field-label" value={label} onInput={(e) => setLabel(e.currentTarget.value)} required />
      <label for="field-type">Type</label>
      <select id="field-type" value={type} onChange={(e) => setType(e.currentTarget.value)}>
        {TYPES.map((t) => (
          <option value={t}>{t}</option>
        ))}
      </select>
      {type === "selection" ? (
        <>
          <label for="field-choices">Choices, one per line</label>
          <textarea id="field-choices" rows={3} value={choices} onInput={(e) => setChoices(e.currentTarget.value)} required />
        </>
      ) : null}
      <label>
        <input type="checkbox" checked={required} onChange={(e) => setRequired(e.currentTarget.checked)} /> Required when linking
      </label>
      <button class="primary">Add field</button>
    </form>
  );
}
