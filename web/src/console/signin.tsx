// Signing in: a phone and a one-time code (the first time with the invitation link an owner gave), or a
// passkey the member added after signing in with a code.
import { useEffect, useRef, useState } from "preact/hooks";
import { errorText } from "../shared/format";
import { Alert } from "../shared/ui";
import { ApiError, post, type MemberSession, type PasskeyChallenge } from "./api";
import { passkeysAvailable, signWithPasskey } from "./webauthn";

export function SignIn({ onSignedIn }: { onSignedIn: (s: MemberSession) => void }) {
  const invitation = location.hash.startsWith("#inv_") ? location.hash.slice(1) : null;
  const [phone, setPhone] = useState("");
  const [code, setCode] = useState("");
  const [partner, setPartner] = useState("");
  const [name, setName] = useState("");
  const [askPartner, setAskPartner] = useState(false);
  const [sent, setSent] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);

  const send = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await post("/auth/otp/start", { phone: phone.trim() });
      setSent(true);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  /** Signs in with what `how` gets from the server; `refused` words a refusal its own way. */
  const attempt = async (how: () => Promise<MemberSession>, refused?: (err: unknown) => string | null) => {
    setBusy(true);
    setError(null);
    try {
      const session = await how();
      history.replaceState(null, "", "/console/");
      onSignedIn(session);
    } catch (err) {
      if (err instanceof ApiError && err.field === "partner") setAskPartner(true);
      setError(refused?.(err) ?? errorText(err));
    } finally {
      setBusy(false);
    }
  };
  const signIn = (e: Event) => {
    e.preventDefault();
    const body: Record<string, string> = { phone: phone.trim(), code: code.trim() };
    if (invitation) body.invitation = invitation;
    if (invitation && name.trim()) body.name = name.trim();
    if (partner.trim()) body.partner = partner.trim();
    return attempt(() => post<MemberSession>("/members/sessions", body));
  };
  const withPasskey = () => {
    const body: Record<string, string> = { phone: phone.trim() };
    if (partner.trim()) body.partner = partner.trim();
    return attempt(
      async () => {
        const challenge = await post<PasskeyChallenge>("/members/passkey-challenges", body);
        const credential = await signWithPasskey(challenge.options);
        return post<MemberSession>("/members/sessions/passkey", { ceremony: challenge.ceremony, credential });
      },
      (err) => (err instanceof ApiError && err.status === 404 ? "No passkey is registered for this phone: sign in with a code, then add one under Passkeys." : null),
    );
  };
  const partnerField = askPartner ? (
    <>
      <label for="partner">Partner code</label>
      <input id="partner" value={partner} onInput={(e) => setPartner(e.currentTarget.value)} required />
    </>
  ) : null;
  return (
    <main class="console-signin card">
      <h1 tabIndex={-1} ref={heading}>
        Hubbub console
      </h1>
      <p class="muted">{invitation ? "You were invited to a partner's console. Sign in with your phone to accept." : "Sign in with your phone."}</p>
      {!sent ? (
        <form onSubmit={send}>
          <label for="phone">Phone number</label>
          <input id="phone" type="tel" autocomplete="tel webauthn" placeholder="+15551234567" value={phone} onInput={(e) => setPhone(e.currentTarget.value)} required />
          {partnerField}
          <button class="primary" disabled={busy}>
            Send code
          </button>
          {!invitation && passkeysAvailable() ? (
            <button
              type="button"
              disabled={busy}
              onClick={(e) => {
                const form = e.currentTarget.form!;
                if (form.reportValidity()) void withPasskey();
              }}
            >
              Sign in with a passkey
            </button>
          ) : null}
        </form>
      ) : (
        <form onSubmit={signIn}>
          <p class="hint">We sent a code to {phone}.</p>
          <label for="code">Code</label>
          <input id="code" inputMode="numeric" autocomplete="one-time-code" value={code} onInput={(e) => setCode(e.currentTarget.value)} required />
          {invitation ? (
            <>
              <label for="member-name">Your name</label>
              <input id="member-name" autocomplete="name" maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} required />
              <p class="hint">The people you answer see its first word on your replies.</p>
            </>
          ) : null}
          {partnerField}
          <button class="primary" disabled={busy}>
            Sign in
          </button>
        </form>
      )}
      <Alert text={error} />
    </main>
  );
}
