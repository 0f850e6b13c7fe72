import { useEffect, useRef, useState } from "preact/hooks";
import { auth, post, type LoggedIn } from "../api";
import { ErrorNote, useTitle } from "../util";

export function Login({ done, flash }: { done: (r: LoggedIn) => Promise<void>; flash: string | null }) {
  useTitle("Log in");
  const [phone, setPhone] = useState("");
  const [code, setCode] = useState("");
  const [sent, setSent] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const codeRef = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (sent) codeRef.current?.focus();
  }, [sent]);
  const normal = () => phone.replace(/[\s()-]/g, "");

  async function start(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await post("/auth/otp/start", { phone: normal() });
      setSent(true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }
  async function verify(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const r = await post<LoggedIn>("/auth/otp/verify", { phone: normal(), code: code.trim(), device_uuid: auth.device(), platform: "web" });
      await done(r);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  }
  return (
    <main id="main" class="login">
      <div class="card">
        <img src="/icon.svg" alt="" width={56} height={56} />
        <h1>Log in to Hubbub</h1>
        {flash ? (
          <p class="notice" role="alert">
            {flash}
          </p>
        ) : null}
        {!sent ? (
          <form onSubmit={start}>
            <div class="field">
              <label for="phone">Phone number</label>
              <input id="phone" type="tel" autoComplete="tel" inputMode="tel" placeholder="+15551230000" required value={phone} onInput={(e) => setPhone((e.target as HTMLInputElement).value)} aria-describedby="phone-hint" />
              <p id="phone-hint" class="hint">
                With the country code, for example +31 6 1234 5678. We'll text you a code.
              </p>
            </div>
            <ErrorNote error={error} />
            <button type="submit" class="primary" disabled={busy || !phone.trim()}>
              {busy ? "Sending…" : "Send code"}
            </button>
          </form>
        ) : (
          <form onSubmit={verify}>
            <p>We sent a 6-digit code to {normal()}.</p>
            <div class="field">
              <label for="code">Code</label>
              <input id="code" ref={codeRef} autoComplete="one-time-code" inputMode="numeric" pattern="[0-9]*" maxLength={6} required value={code} onInput={(e) => setCode((e.target as HTMLInputElement).value)} />
            </div>
            <ErrorNote error={error} />
            <button type="submit" class="primary" disabled={busy || code.trim().length < 6}>
              {busy ? "Checking…" : "Log in"}
            </button>
            <button type="button" class="link" onClick={() => (setSent(false), setCode(""), setError(null))}>
              Use another number
            </button>
          </form>
        )}
      </div>
    </main>
  );
}
