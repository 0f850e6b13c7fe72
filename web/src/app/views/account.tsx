import { useEffect, useState } from "preact/hooks";
import { auth, del, get, post, request, type Account, type PersonExport } from "../api";
import { encode } from "../../shared/e2e";
import { deviceKey } from "../keystore";
import { pushState, turnOffPush, turnOnPush, type PushState } from "../push";
import { ErrorNote, Loading, useAsync, useTitle } from "../util";

export function AccountView({ logout }: { logout: () => void }) {
  useTitle("Account");
  const { data, error } = useAsync(() => get<Account>("/me/account"), []);
  const [fingerprint, setFingerprint] = useState("");
  useEffect(() => {
    deviceKey().then((k) => setFingerprint(encode(k.publicRaw)), () => setFingerprint("unavailable"));
  }, []);
  return (
    <section aria-labelledby="acct-h">
      <h1 id="acct-h">Account</h1>
      <ErrorNote error={error} />
      {!data && !error ? <Loading /> : null}
      {data ? (
        <div class="card">
          <dl class="summary">
            <div>
              <dt>Phone</dt>
              <dd>{data.phone}</dd>
            </div>
            {data.display_name ? (
              <div>
                <dt>Name</dt>
                <dd>{data.display_name}</dd>
              </div>
            ) : null}
            <div>
              <dt>Account</dt>
              <dd>{data.state}</dd>
            </div>
          </dl>
          <h2>Linked partners</h2>
          {data.partners.length ? (
            <ul class="plain partners">
              {data.partners.map((p) => (
                <li key={p.code}>
                  <div role="group" aria-labelledby={`partner-${p.code}`}>
                    <h3 id={`partner-${p.code}`}>
                      {p.name} <span class="meta">({p.code})</span>
                    </h3>
                    {p.fields?.length ? (
                      <dl class="summary">
                        {p.fields.map((f) => (
                          <div key={f.key}>
                            <dt>{f.label}</dt>
                            <dd>{f.text || "—"}</dd>
                          </div>
                        ))}
                      </dl>
                    ) : (
                      <p class="muted">No details kept.</p>
                    )}
                  </div>
                </li>
              ))}
            </ul>
          ) : (
            <p class="muted">No partner has linked your account yet.</p>
          )}
        </div>
      ) : null}
      <Notifications />
      <div class="card">
        <h2>This device</h2>
        <dl class="summary">
          <div>
            <dt>Device</dt>
            <dd class="mono">{auth.device()}</dd>
          </div>
          <div>
            <dt>Encryption key</dt>
            <dd class="mono">{fingerprint || "…"}</dd>
          </div>
        </dl>
      </div>
      <div class="row">
        <button type="button" class="danger" onClick={logout}>
          Log out
        </button>
        <button type="button" class="danger" onClick={() => signOutEverywhere(logout)}>
          Sign out everywhere
        </button>
      </div>
      <p class="muted">Sign out everywhere ends every session of your account, on every device and browser.</p>
      <ExportData />
      {data ? <EraseAccount phone={data.phone} logout={logout} /> : null}
    </section>
  );
}

/**
 * Taking one's data out: the server prepares a zip of every record about the person and their files; the
 * page follows it until it is ready, then offers its download link (good for 24 hours).
 */
function ExportData() {
  const [job, setJob] = useState<PersonExport | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (job?.state !== "preparing") return;
    const timer = setTimeout(() => {
      get<PersonExport>(`/me/export/${job.export_id}`).then(setJob, setError);
    }, 1000);
    return () => clearTimeout(timer);
  }, [job]);
  async function start() {
    setError(null);
    try {
      setJob(await post<PersonExport>("/me/export", {}));
    } catch (e) {
      setError(e);
    }
  }
  return (
    <div class="card" role="group" aria-labelledby="export-h">
      <h2 id="export-h">Export my data</h2>
      <p class="muted">
        A zip of everything kept about you — every partner's messages and conversations with you, your bot sessions,
        payments, preferences and devices, and your files. Encrypted messages stay as the service holds them.
      </p>
      <ErrorNote error={error} />
      {job?.state === "ready" && job.download_url ? (
        <p role="status">
          Your export is ready ({Math.max(1, Math.round((job.size ?? 0) / 1024))} KB).{" "}
          <a class="button" href={job.download_url} download>
            Download my data
          </a>{" "}
          <span class="muted">The link works until {job.expires_at} UTC.</span>
        </p>
      ) : job?.state === "preparing" ? (
        <p role="status">Preparing your export…</p>
      ) : (
        <>
          {job?.state === "failed" ? <p role="status">{job.error ?? "The export failed."}</p> : null}
          <button type="button" onClick={start}>
            Export my data
          </button>
        </>
      )}
    </div>
  );
}

/**
 * Erasing the account: a fresh code by SMS, then everything of the person's goes (every partner's messages
 * and conversations with them, their devices, preferences and bot sessions) and every session ends.
 */
function EraseAccount({ phone, logout }: { phone: string; logout: () => void }) {
  const [sent, setSent] = useState(false);
  const [code, setCode] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  async function sendCode() {
    setBusy(true);
    setError(null);
    try {
      await post("/auth/otp/start", { phone });
      setSent(true);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  }
  async function erase(e: Event) {
    e.preventDefault();
    if (!confirm("Erase your account and everything in it? This cannot be undone.")) return;
    setBusy(true);
    setError(null);
    try {
      await request("DELETE", "/me/account", { code: code.trim() });
      logout();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  }
  return (
    <div class="card" role="group" aria-labelledby="erase-h">
      <h2 id="erase-h">Erase my account</h2>
      <p class="muted">
        Every message, conversation, form and bot session of yours goes, for every partner, with your devices and
        preferences; each partner is told that you left, without your number. Payments keep their amount for the
        partner's books, without your number. This cannot be undone.
      </p>
      <ErrorNote error={error} />
      {sent ? (
        <form onSubmit={erase}>
          <div class="field">
            <label for="erase-code">The code we sent by SMS</label>
            <input
              id="erase-code"
              inputMode="numeric"
              autocomplete="one-time-code"
              pattern="[0-9]{6}"
              required
              value={code}
              onInput={(e) => setCode(e.currentTarget.value)}
            />
          </div>
          <button type="submit" class="danger" disabled={busy}>
            Erase everything
          </button>
        </form>
      ) : (
        <button type="button" class="danger" disabled={busy} onClick={sendCode}>
          Send me a code to erase my account
        </button>
      )}
    </div>
  );
}

/** Ends every session of the account (this one too), then returns to the login screen. */
async function signOutEverywhere(logout: () => void) {
  if (!confirm("Sign out on every device and browser?")) return;
  try {
    await del<void>("/me/tokens");
  } finally {
    logout();
  }
}

const PUSH_TEXT: Record<PushState, string> = {
  on: "On: this device shows a notification when a message arrives while Hubbub is closed.",
  off: "Off: messages wait in the app until you open it.",
  blocked: "Blocked: this browser's settings do not let Hubbub show notifications.",
  unsupported: "This browser cannot show notifications for Hubbub.",
};

function Notifications() {
  const [state, setState] = useState<PushState | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    pushState().then(setState, () => setState("unsupported"));
  }, []);
  const change = async (on: boolean) => {
    setBusy(true);
    setError(null);
    try {
      setState(await (on ? turnOnPush() : turnOffPush()));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="card" aria-labelledby="notif-h">
      <h2 id="notif-h">Notifications</h2>
      {state ? (
        <p role="status" data-push={state}>
          {PUSH_TEXT[state]}
        </p>
      ) : (
        <Loading />
      )}
      <ErrorNote error={error} />
      {state === "off" ? (
        <button type="button" class="primary" disabled={busy} onClick={() => change(true)}>
          Turn on notifications
        </button>
      ) : null}
      {state === "on" ? (
        <button type="button" disabled={busy} onClick={() => change(false)}>
          Turn off notifications
        </button>
      ) : null}
    </div>
  );
}
