// WebAuthn in the browser for members' passkeys: the server's options (WebAuthn's JSON form, binary values
// base64url) become the objects `navigator.credentials` takes, and its answer becomes JSON again for the
// server (what `PublicKeyCredential.toJSON()` gives, written out so older browsers work too).

type Json = Record<string, any>;

function fromB64u(s: string): ArrayBuffer {
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out.buffer;
}

function toB64u(buf: ArrayBuffer): string {
  let bin = "";
  for (const b of new Uint8Array(buf)) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const withIds = (list: Json[] | undefined) => (list ?? []).map((c) => ({ ...c, id: fromB64u(c.id) }));

/** Whether this browser can use passkeys at all. */
export const passkeysAvailable = () => typeof window.PublicKeyCredential === "function" && !!navigator.credentials;

/** The browser's answer in WebAuthn's JSON form, with `response`'s binary values encoded. */
function answer(cred: PublicKeyCredential, response: Json): Json {
  return { id: cred.id, rawId: toB64u(cred.rawId), type: cred.type, response, clientExtensionResults: cred.getClientExtensionResults() };
}

/** Runs the browser's part; what it refuses becomes an error that says so to the member. */
async function ask(what: () => Promise<Credential | null>): Promise<PublicKeyCredential> {
  let cred;
  try {
    cred = await what();
  } catch (e) {
    throw new Error(passkeyErrorText(e));
  }
  if (!cred) throw new Error("No passkey was used.");
  return cred as PublicKeyCredential;
}

/** Makes a passkey for the server's registration options; the answer to send back. */
export async function createPasskey(options: Json): Promise<Json> {
  const o = options.publicKey;
  const publicKey = { ...o, challenge: fromB64u(o.challenge), user: { ...o.user, id: fromB64u(o.user.id) }, excludeCredentials: withIds(o.excludeCredentials) };
  const cred = await ask(() => navigator.credentials.create({ publicKey } as CredentialCreationOptions));
  const r = cred.response as AuthenticatorAttestationResponse;
  return answer(cred, { attestationObject: toB64u(r.attestationObject), clientDataJSON: toB64u(r.clientDataJSON) });
}

/** Signs the server's sign-in challenge with one of the listed passkeys; the answer to send back. */
export async function signWithPasskey(options: Json): Promise<Json> {
  const o = options.publicKey;
  const publicKey = { ...o, challenge: fromB64u(o.challenge), allowCredentials: withIds(o.allowCredentials) };
  const cred = await ask(() => navigator.credentials.get({ publicKey } as CredentialRequestOptions));
  const r = cred.response as AuthenticatorAssertionResponse;
  return answer(cred, {
    authenticatorData: toB64u(r.authenticatorData),
    clientDataJSON: toB64u(r.clientDataJSON),
    signature: toB64u(r.signature),
    userHandle: r.userHandle ? toB64u(r.userHandle) : null,
  });
}

/** What to tell the member when the browser's part failed (cancelled, timed out, not allowed here). */
function passkeyErrorText(e: unknown): string {
  if (e instanceof DOMException) {
    if (e.name === "NotAllowedError") return "The passkey was not used (cancelled or timed out). Try again, or sign in with a code.";
    if (e.name === "InvalidStateError") return "This device already holds a passkey of yours.";
    if (e.name === "SecurityError") return "Passkeys are not allowed on this address.";
    return `The browser refused: ${e.message}`;
  }
  return e instanceof Error ? e.message : String(e);
}
