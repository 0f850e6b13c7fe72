// Bot steps (flows and chats): messages, menus (button and list), screens (form, input, select) with the
// seven field types, payments and completion summaries. The server validates: a 422 puts each message next
// to its field and keeps every typed value.
import { useState } from "preact/hooks";
import { ApiError } from "./api";
import { errorText } from "../shared/format";

export interface Field {
  key: string;
  type: "text" | "phone" | "email" | "number" | "date" | "boolean" | "select" | string;
  label: string;
  required?: boolean;
  placeholder?: string | null;
  options?: { id: string; label: string }[] | null;
}
export interface Screen {
  id: string;
  title?: string | null;
  kind: "form" | "input" | "select" | string;
  fields: Field[];
}
export interface MenuItem {
  id: string;
  label: string;
  description?: string | null;
}
export type Step =
  | { type: "message"; text: string }
  | { type: "menu"; style: "button" | "list"; text?: string | null; sections: { title?: string | null; items: MenuItem[] }[] }
  | { type: "flow_screen"; screen: Screen }
  | { type: "payment"; payment: Payment }
  | { type: "flow_completed"; summary: Record<string, unknown> };

/** A payment step as the host sends it: the bot's request with the host's payment and its checkout. */
export interface Payment {
  id: string;
  ref: string;
  amount_minor: number;
  currency: string;
  description?: string | null;
  state: string;
  checkout_url?: string | null;
}

export type Values = Record<string, string | boolean>;

let uid = 0;

function toWire(fields: Field[], values: Values): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    const v = values[f.key];
    if (f.type === "boolean") {
      out[f.key] = v === true;
      continue;
    }
    const s = typeof v === "string" ? v.trim() : "";
    if (s === "") {
      if (f.required) out[f.key] = "";
      continue;
    }
    if (f.type === "number") {
      const n = Number(s);
      out[f.key] = Number.isFinite(n) ? n : s;
    } else out[f.key] = s;
  }
  return out;
}

export function ScreenForm({
  screen,
  submit,
  disabled,
}: {
  screen: Screen;
  submit: (values: Record<string, unknown>) => Promise<void>;
  disabled?: boolean;
}) {
  const [values, setValues] = useState<Values>({});
  const [fieldErrors, setFieldErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [id] = useState(() => `s${++uid}`);
  const set = (k: string, v: string | boolean) => setValues((old) => ({ ...old, [k]: v }));

  async function onSubmit(e: Event) {
    e.preventDefault();
    if (busy || disabled) return;
    setBusy(true);
    setError(null);
    try {
      await submit(toWire(screen.fields, values));
      setFieldErrors({});
    } catch (err) {
      setError(err);
      if (err instanceof ApiError && err.fields) setFieldErrors(err.fields);
      else if (err instanceof ApiError && err.field && screen.fields.some((f) => f.key === err.field)) setFieldErrors({ [err.field]: err.message });
      else setFieldErrors({});
      // Focus the first invalid field so keyboard and screen-reader users land on it.
      setTimeout(() => (document.querySelector(`#${id} [aria-invalid="true"]`) as HTMLElement | null)?.focus(), 0);
    } finally {
      setBusy(false);
    }
  }

  const radios = screen.kind === "select";
  return (
    <form id={id} class="screen card" onSubmit={onSubmit} noValidate aria-labelledby={`${id}-t`}>
      <h2 id={`${id}-t`}>{screen.title || "Form"}</h2>
      {error ? (
        <p class="error" role="alert">
          {error instanceof ApiError && error.code === "validation" && Object.keys(fieldErrors).length
            ? "Some answers need fixing: see the messages below."
            : errorText(error, { own: true })}
        </p>
      ) : null}
      {screen.fields.map((f) => (
        <FieldInput key={f.key} form={id} field={f} value={values[f.key]} error={fieldErrors[f.key]} onInput={(v) => set(f.key, v)} radios={radios} disabled={disabled} />
      ))}
      <button type="submit" class="primary" disabled={busy || disabled}>
        {busy ? "Sending…" : "Submit"}
      </button>
    </form>
  );
}

const INPUT_TYPE: Record<string, string> = { text: "text", phone: "tel", email: "email", number: "number", date: "date" };

function FieldInput({
  form,
  field: f,
  value,
  error,
  onInput,
  radios,
  disabled,
}: {
  form: string;
  field: Field;
  value: string | boolean | undefined;
  error?: string;
  onInput: (v: string | boolean) => void;
  radios: boolean;
  disabled?: boolean;
}) {
  const id = `${form}-${f.key}`;
  const errId = `${id}-err`;
  const aria = { "aria-invalid": error ? ("true" as const) : undefined, "aria-describedby": error ? errId : undefined };
  const label = (
    <>
      {f.label}
      {f.required ? <span class="req"> (required)</span> : null}
    </>
  );
  const err = error ? (
    <p id={errId} class="field-error">
      {error}
    </p>
  ) : null;
  if (f.type === "boolean") {
    return (
      <div class={"field check" + (error ? " invalid" : "")}>
        <input id={id} name={f.key} type="checkbox" checked={value === true} onChange={(e) => onInput((e.target as HTMLInputElement).checked)} disabled={disabled} {...aria} />
        <label for={id}>{label}</label>
        {err}
      </div>
    );
  }
  if (f.type === "select" && radios) {
    return (
      <fieldset class={"field" + (error ? " invalid" : "")} {...aria}>
        <legend>{label}</legend>
        {(f.options ?? []).map((o) => (
          <label class="radio" key={o.id}>
            <input type="radio" name={`${id}`} value={o.id} checked={value === o.id} onChange={() => onInput(o.id)} disabled={disabled} /> {o.label}
          </label>
        ))}
        {err}
      </fieldset>
    );
  }
  if (f.type === "select") {
    return (
      <div class={"field" + (error ? " invalid" : "")}>
        <label for={id}>{label}</label>
        <select id={id} name={f.key} value={(value as string) ?? ""} onChange={(e) => onInput((e.target as HTMLSelectElement).value)} disabled={disabled} {...aria}>
          <option value="">Choose…</option>
          {(f.options ?? []).map((o) => (
            <option key={o.id} value={o.id}>
              {o.label}
            </option>
          ))}
        </select>
        {err}
      </div>
    );
  }
  const type = INPUT_TYPE[f.type] ?? "text";
  return (
    <div class={"field" + (error ? " invalid" : "")}>
      <label for={id}>{label}</label>
      <input
        id={id}
        name={f.key}
        type={type}
        inputMode={type === "number" ? "decimal" : undefined}
        autoComplete={type === "email" ? "email" : type === "tel" ? "tel" : undefined}
        placeholder={f.placeholder ?? undefined}
        value={(value as string) ?? ""}
        onInput={(e) => onInput((e.target as HTMLInputElement).value)}
        disabled={disabled}
        {...aria}
      />
      {err}
    </div>
  );
}

export function Summary({ summary, fields }: { summary: Record<string, unknown>; fields?: Field[] }) {
  const label = (k: string) => fields?.find((f) => f.key === k)?.label ?? k.replace(/_/g, " ");
  const show = (k: string, v: unknown) => {
    if (v === true) return "Yes";
    if (v === false) return "No";
    if (v === null || v === undefined || v === "") return "—";
    const opt = fields?.find((f) => f.key === k)?.options?.find((o) => o.id === v);
    if (opt) return opt.label;
    return typeof v === "object" ? JSON.stringify(v) : String(v);
  };
  return (
    <dl class="summary">
      {Object.entries(summary).map(([k, v]) => (
        <div key={k}>
          <dt>{label(k)}</dt>
          <dd>{show(k, v)}</dd>
        </div>
      ))}
    </dl>
  );
}

export function money(minor: number, currency: string): string {
  try {
    const format = new Intl.NumberFormat(undefined, { style: "currency", currency });
    // Minor units of the currency: cents for EUR, none for JPY, three places for BHD.
    return format.format(minor / 10 ** (format.resolvedOptions().maximumFractionDigits ?? 2));
  } catch {
    return `${(minor / 100).toFixed(2)} ${currency}`;
  }
}

export interface StepHandlers {
  select: (id: string, label: string) => Promise<void>;
  submit: (screen: string, values: Record<string, unknown>) => Promise<void>;
  /** The user leaves for the payment's checkout (the outcome reaches the bot from the provider). */
  paying: (payment: Payment) => void;
}

/** One bot step. `active` is false for steps the conversation has moved past. */
export function StepView({ step, active, on, fields }: { step: Step; active: boolean; on: StepHandlers; fields?: Field[] }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async (f: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await f();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  switch (step.type) {
    case "message":
      return <p class="bubble bot">{step.text}</p>;
    case "menu":
      return (
        <div class={"menu card menu-" + step.style} role="group" aria-label={step.text || "Menu"}>
          {step.text ? <p>{step.text}</p> : null}
          {step.sections.map((s, i) => (
            <div key={i} class="section">
              {s.title ? <p class="section-title">{s.title}</p> : null}
              <ul class={step.style === "list" ? "list-items" : "buttons"}>
                {s.items.map((it) => (
                  <li key={it.id}>
                    <button type="button" disabled={!active || busy} onClick={() => run(() => on.select(it.id, it.label))}>
                      <span class="label">{it.label}</span>
                      {it.description ? <span class="desc">{it.description}</span> : null}
                    </button>
                  </li>
                ))}
              </ul>
            </div>
          ))}
          {error ? <p class="error" role="alert">{errorText(error, { own: true })}</p> : null}
        </div>
      );
    case "flow_screen":
      return <ScreenForm screen={step.screen} disabled={!active} submit={(values) => on.submit(step.screen.id, values)} />;
    case "payment": {
      const p = step.payment;
      return (
        <div class="payment card" role="group" aria-label="Payment">
          <h2>Payment</h2>
          <p class="amount">{money(p.amount_minor, p.currency)}</p>
          {p.description ? <p>{p.description}</p> : null}
          {active && p.checkout_url ? (
            <div class="row">
              <a class="button primary" href={p.checkout_url} data-external onClick={() => on.paying(p)}>
                Pay {money(p.amount_minor, p.currency)}
              </a>
            </div>
          ) : null}
          {error ? <p class="error" role="alert">{errorText(error, { own: true })}</p> : null}
        </div>
      );
    }
    case "flow_completed":
      return (
        <div class="completed card" role="status">
          <h2>Completed</h2>
          <Summary summary={step.summary ?? {}} fields={fields} />
        </div>
      );
    default:
      return null;
  }
}

export const interactive = (s: Step) => s.type === "menu" || s.type === "flow_screen" || s.type === "payment";
