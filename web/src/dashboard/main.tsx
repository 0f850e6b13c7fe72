// The developer portal at /dashboard/: a developer signs up with their phone and a one-time code (e-mail
// optional) and gets their API key once, or signs in and gets a 12-hour session key (kept for this tab only,
// in sessionStorage); then their keys, usage against the daily quota, the approved template catalog with
// "send a test to my phone", their messages with states, and their webhook with a test.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import "../shared/styles.css";
import "../shared/console.css";
import { errorText, when } from "../shared/format";
import { Alert, Head, ShownOnce } from "../shared/ui";
import {
  del,
  get,
  onSignedOut,
  post,
  put,
  setBearer,
  type CatalogEntry,
  type DevKey,
  type DevSession,
  type DevUsage,
  type DevVerified,
  type Developer,
  type Page,
  type TestOutcome,
  type ThreadMessage,
  type WebhookSettings,
} from "./api";

const KEY = "hubbub.dev.session";
const ME = "hubbub.dev.me";
setBearer(() => sessionStorage.getItem(KEY));

/** Sign up (verify: the API key, shown once) or sign in (a session key for this tab). */
function SignIn({ onIn }: { onIn: (me: Developer, apiKey: string | null) => void }) {
  const [mode, setMode] = useState<"in" | "up">("in");
  const [phone, setPhone] = useState("");
  const [email, setEmail] = useState("");
  const [code, setCode] = useState("");
  const [sent, setSent] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  const run = async (what: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await what();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="console-signin card">
      <h1 tabIndex={-1} ref={heading}>
        Hubbub for developers
      </h1>
      <p class="muted">Send the platform's approved templates from your own code, with a daily quota.</p>
      <div class="tabs" role="group" aria-label="Sign in or sign up">
        <button type="button" aria-pressed={mode === "in"} onClick={() => (setMode("in"), setSent(false))}>
          Sign in
        </button>
        <button type="button" aria-pressed={mode === "up"} onClick={() => (setMode("up"), setSent(false))}>
          Sign up
        </button>
      </div>
      {!sent ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            run(async () => {
              const body: Record<string, string> = { phone: phone.trim() };
              if (mode === "up" && email.trim()) body.email = email.trim();
              await post("/dev/signup", body);
              setSent(true);
            });
          }}
        >
          <label for="phone">Phone number</label>
          <input id="phone" type="tel" autocomplete="tel" placeholder="+15551234567" value={phone} onInput={(e) => setPhone(e.currentTarget.value)} required />
          {mode === "up" ? (
            <>
              <label for="email">E-mail (optional)</label>
              <input id="email" type="email" autocomplete="email" value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
            </>
          ) : null}
          <button class="primary" disabled={busy}>
            Send code
          </button>
        </form>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            run(async () => {
              const body = { phone: phone.trim(), code: code.trim() };
              if (mode === "up") {
                const v = await post<DevVerified>("/dev/verify", body);
                // The API key is shown once and never stored; the tab keeps the sign-up's 12-hour session key
                // (as a sign-in does), so that a reload leaves the developer signed in.
                sessionStorage.setItem(KEY, v.session_key);
                sessionStorage.setItem(ME, JSON.stringify(v.developer));
                onIn(v.developer, v.api_key);
              } else {
                const s = await post<DevSession>("/dev/session", body);
                sessionStorage.setItem(KEY, s.api_key);
                sessionStorage.setItem(ME, JSON.stringify(s.developer));
                onIn(s.developer, null);
              }
            });
          }}
        >
          <p class="hint">We sent a code to {phone}.</p>
          <label for="code">Code</label>
          <input id="code" inputMode="numeric" autocomplete="one-time-code" value={code} onInput={(e) => setCode(e.currentTarget.value)} required />
          <button class="primary" disabled={busy}>
            {mode === "up" ? "Verify and get my API key" : "Sign in"}
          </button>
        </form>
      )}
      <Alert text={error} />
    </main>
  );
}

function Dashboard({ me, apiKey, onOut }: { me: Developer; apiKey: string | null; onOut: () => void }) {
  const [keys, setKeys] = useState<DevKey[]>([]);
  const [usage, setUsage] = useState<DevUsage | null>(null);
  const [catalog, setCatalog] = useState<CatalogEntry[]>([]);
  const [messages, setMessages] = useState<ThreadMessage[]>([]);
  const [error, setError] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  const load = () =>
    Promise.all([
      get<Page<DevKey>>("/dev/keys").then((p) => setKeys(p.data)),
      get<DevUsage>("/dev/usage").then(setUsage),
      get<Page<ThreadMessage>>("/dev/messages?limit=20").then((p) => setMessages(p.data)),
    ]).catch((e) => setError(errorText(e)));
  useEffect(() => {
    document.title = "Dashboard · Hubbub for developers";
    heading.current?.focus();
    get<Page<CatalogEntry>>("/dev/templates").then((p) => setCatalog(p.data), (e) => setError(errorText(e)));
    load();
    // Message states move on their own (delivered, read): the log follows them.
    const timer = setInterval(() => document.visibilityState === "visible" && load(), 5000);
    return () => clearInterval(timer);
  }, []);
  const signOut = async () => {
    const mine = sessionStorage.getItem(KEY);
    if (mine) await del(`/dev/keys/${mine.slice(0, 15)}`).catch(() => undefined);
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(ME);
    onOut();
  };
  return (
    <div class="console">
      <header class="console-top">
        <strong>Hubbub for developers</strong>
        <span class="meta" style={{ flex: 1 }}>
          {me.phone}
          {me.email ? ` · ${me.email}` : ""}
        </span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main id="main" class="dash">
        <h1 tabIndex={-1} ref={heading}>
          Dashboard
        </h1>
        <Alert text={error} />
        {apiKey ? (
          <section class="card" aria-labelledby="key-h">
            <h2 id="key-h">Your API key</h2>
            <p>Store it now in a secret store: it is shown this once. Send it as <code>Authorization: Bearer …</code>.</p>
            <ShownOnce label="API key" value={apiKey} />
            <Example apiKey={apiKey} phone={me.phone} template={catalog[0] ?? null} />
          </section>
        ) : null}
        {usage ? (
          <section class="card" aria-labelledby="usage-h">
            <h2 id="usage-h">Usage</h2>
            <p>
              <strong>
                {usage.sent_today} of {usage.daily_quota}
              </strong>{" "}
              messages today; the count starts again at {when(usage.resets_at)}.
            </p>
            <progress max={usage.daily_quota} value={usage.sent_today} aria-label="Messages sent today against the daily quota" />
          </section>
        ) : null}
        <Catalog catalog={catalog} phone={me.phone} onSent={load} />
        <section class="card" aria-labelledby="messages-h">
          <h2 id="messages-h">Messages</h2>
          {messages.length === 0 ? (
            <p class="muted">No messages yet: send a test from the catalog.</p>
          ) : (
            <table class="page-table">
              <caption class="sr-only">Your latest messages</caption>
              <Head cols={["Sent", "To", "Template", "Text", "State"]} />
              <tbody>
                {messages.map((m) => (
                  <tr>
                    <td>{when(m.created_at)}</td>
                    <td>{m.phone}</td>
                    <td>{m.template_code}</td>
                    <td>{m.rendered_body ?? m.body}</td>
                    <td>{m.state}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </section>
        <Webhook />
        <section class="card" aria-labelledby="keys-h">
          <h2 id="keys-h">Keys</h2>
          <table class="page-table">
            <caption class="sr-only">Your keys, by prefix</caption>
            <Head cols={["Prefix", "Kind", "Created", "Ends"]} actions />
            <tbody>
              {keys.map((k) => (
                <tr>
                  <td class="mono">{k.prefix}</td>
                  <td>{k.kind}</td>
                  <td>{when(k.created_at)}</td>
                  <td>{k.revoked_at ? `revoked ${when(k.revoked_at)}` : k.expires_at ? when(k.expires_at) : "never"}</td>
                  <td>
                    {k.active ? (
                      <button type="button" onClick={() => del(`/dev/keys/${k.prefix}`).then(load, (e) => setError(errorText(e)))}>
                        Revoke {k.prefix}
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      </main>
    </div>
  );
}

/** A first request with the new key, ready to paste into a terminal: a test of the first approved template
 * (placeholders for its variables) to the developer's own phone. */
function Example({ apiKey, phone, template }: { apiKey: string; phone: string; template: CatalogEntry | null }) {
  const body = template
    ? {
        phone,
        template_code: template.code,
        lang: template.lang,
        vars: Object.fromEntries(template.variables.map((v) => [v, `<${v}>`])),
        idempotency_key: "first-test-1",
      }
    : { phone, template_code: "<an approved template's code>", lang: "en", vars: {}, idempotency_key: "first-test-1" };
  const command = [
    `curl ${location.origin}/api/v1/dev/messages \\`,
    `  -H "Authorization: Bearer ${apiKey}" \\`,
    `  -H "Content-Type: application/json" \\`,
    `  -d '${JSON.stringify(body).replace(/'/g, "'\\''")}'`,
  ].join("\n");
  return (
    <>
      <h3>Your first request</h3>
      <p class="hint">
        Sends {template ? <code>{template.code}</code> : "an approved template"} to your phone; the answer's <code>message_id</code> shows in
        Messages below, with its state.
      </p>
      <pre class="mono example-request" tabIndex={0} aria-label="An example request with your API key">
        {command}
      </pre>
    </>
  );
}

function Catalog({ catalog, phone, onSent }: { catalog: CatalogEntry[]; phone: string; onSent: () => void }) {
  return (
    <section class="card" aria-labelledby="catalog-h">
      <h2 id="catalog-h">Approved templates</h2>
      {catalog.length === 0 ? <p class="muted">No template is approved yet.</p> : null}
      <ul class="plain catalog">
        {catalog.map((t) => (
          <li>
            <TemplateCard t={t} phone={phone} onSent={onSent} />
          </li>
        ))}
      </ul>
    </section>
  );
}

function TemplateCard({ t, phone, onSent }: { t: CatalogEntry; phone: string; onSent: () => void }) {
  const [vars, setVars] = useState<Record<string, string>>({});
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  return (
    <form
      class="template"
      aria-label={`Template ${t.code}`}
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        setStatus(null);
        try {
          await post("/dev/messages", { phone, template_code: t.code, lang: t.lang, vars, idempotency_key: crypto.randomUUID() });
          setStatus(`Sent to ${phone}.`);
          onSent();
        } catch (err) {
          setError(errorText(err));
        }
      }}
    >
      <h3>
        {t.code} <span class="meta">({t.lang})</span>
      </h3>
      <p class="mono">{t.body}</p>
      {t.variables.map((v) => (
        <>
          <label for={`${t.code}-${v}`}>{v}</label>
          <input id={`${t.code}-${v}`} value={vars[v] ?? ""} onInput={(e) => setVars({ ...vars, [v]: e.currentTarget.value })} required />
        </>
      ))}
      <button class="primary">Send a test to my phone</button>
      {status ? <p role="status">{status}</p> : null}
      <Alert text={error} />
    </form>
  );
}

function Webhook() {
  const [url, setUrl] = useState("");
  const [secret, setSecret] = useState<string | null>(null);
  const [outcome, setOutcome] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  return (
    <section class="card" aria-labelledby="webhook-h">
      <h2 id="webhook-h">Webhook</h2>
      <p class="hint">Your messages' message.status events, signed with your secret (X-Service-Signature).</p>
      <form
        class="reply"
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          try {
            const s = await put<WebhookSettings>("/dev/settings", { webhook_url: url.trim() || null });
            setSecret(s.webhook_secret ?? null);
            setOutcome(s.webhook_url ? "Saved." : "Removed.");
          } catch (err) {
            setError(errorText(err));
          }
        }}
      >
        <label for="webhook-url">Endpoint URL</label>
        <input id="webhook-url" type="url" placeholder="https://example.com/hubbub" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
        <button>Save webhook</button>
      </form>
      {secret ? (
        <>
          <p>The signing secret, shown once:</p>
          <ShownOnce label="Webhook signing secret" value={secret} />
        </>
      ) : null}
      <button
        type="button"
        onClick={async () => {
          setError(null);
          try {
            const r = await post<TestOutcome>("/dev/webhooks/test");
            setOutcome(r.ok ? `Test event delivered (HTTP ${r.status}).` : `Test event not delivered: ${r.error ?? `HTTP ${r.status}`}.`);
          } catch (err) {
            setError(errorText(err));
          }
        }}
      >
        Send a test event
      </button>
      {outcome ? <p role="status">{outcome}</p> : null}
      <Alert text={error} />
    </section>
  );
}

function Portal() {
  const stored = sessionStorage.getItem(ME);
  const [me, setMe] = useState<Developer | null>(stored && sessionStorage.getItem(KEY) ? (JSON.parse(stored) as Developer) : null);
  const [apiKey, setApiKey] = useState<string | null>(null);
  const [flash, setFlash] = useState<string | null>(null);
  useEffect(
    () =>
      onSignedOut(() => {
        sessionStorage.removeItem(KEY);
        sessionStorage.removeItem(ME);
        setApiKey(null);
        setMe(null);
        setFlash("Your session has ended. Please sign in again.");
      }),
    [],
  );
  if (!me)
    return (
      <>
        {flash ? (
          <p class="flash" role="alert">
            {flash}
          </p>
        ) : null}
        <SignIn
          onIn={(developer, key) => {
            setApiKey(key);
            setFlash(null);
            setMe(developer);
          }}
        />
      </>
    );
  return (
    <Dashboard
      me={me}
      apiKey={apiKey}
      onOut={() => {
        setApiKey(null);
        setMe(null);
      }}
    />
  );
}

render(<Portal />, document.getElementById("dashboard")!);
