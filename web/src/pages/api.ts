// The API as the pages beside the app use it: same-origin fetch, the generated OpenAPI types, one error
// shape. The partner console authenticates by the member's session cookie (HttpOnly: no script ever reads
// it; the browser sends it, and the Sec-Fetch-Site header the host's CSRF check wants); the developer
// portal by its 12-hour session key, sent as a bearer header (`setBearer`).
import type { components } from "@hubbub/client/src/schema";

type S = components["schemas"];
export type MemberSession = S["MemberSession"];
export type Member = S["MemberRecord"];
export type Conversation = S["Conversation"];
export type Thread = S["ConversationThread"];
export type ThreadMessage = S["Message"];
export type Note = S["ConversationNote"];
export type Invitation = S["InvitationCreated"];
export type AuditEntry = S["AuditRecord"];
export type Developer = S["Developer"];
export type DevKey = S["DevKey"];
export type DevSession = S["DevSession"];
export type DevVerified = S["DevVerified"];
export type DevUsage = S["DevUsage"];
export type CatalogEntry = S["CatalogTemplate"];
export type TestOutcome = S["WebhookTestOutcome"];
export type WebhookSettings = S["WebhookSettings"];
export type WebhookDelivery = S["WebhookDelivery"];
export type Bot = S["Bot"];
export type Account = S["Account"];
export type ApiKey = S["ApiKey"];
export type ApiKeyCreated = S["ApiKeyCreated"];
export type CannedReply = S["CannedReply"];
export type Template = S["Template"];
export type Payment = S["PaymentRecord"];
export type BotCreated = S["BotCreated"];
export type BotToken = S["BotToken"];
export type WebhookDeliveryDetail = S["WebhookDeliveryDetail"];
export type Broadcast = S["Broadcast"];
export type BroadcastAudience = S["BroadcastAudience"];
export type AccountField = S["AccountField"];
export type Linked = S["Linked"];
export type BotSession = S["BotSession"];
export type PartnerSender = S["PartnerSender"];
export type FlowInvited = S["FlowInvited"];
export type PasskeyRecord = S["PasskeyRecord"];
export type PasskeyChallenge = S["PasskeyChallenge"];
export type Page<T> = { data: T[]; next_cursor?: string | null };

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
    public field?: string,
    /** A `422` names each field it refuses, with why (`fields.KEY` for an account's custom fields). */
    public fields: Record<string, string> = {},
  ) {
    super(message);
  }
}

let bearer: () => string | null = () => null;
/** Where the developer portal's session key is read from, for every call. */
export function setBearer(read: () => string | null) {
  bearer = read;
}

const signedOut = new Set<() => void>();
/** Called when a call answers 401: the session ended (idle, signed out elsewhere, member removed). */
export function onSignedOut(l: () => void): () => void {
  signedOut.add(l);
  return () => signedOut.delete(l);
}

/** Bytes sent as they are, with their content type (a Wasm component), instead of a JSON body. */
export type Raw = { bytes: ArrayBuffer; contentType: string };

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const raw = body !== null && typeof body === "object" && (body as Raw).bytes instanceof ArrayBuffer ? (body as Raw) : null;
  if (body !== undefined) headers["Content-Type"] = raw ? raw.contentType : "application/json";
  const token = bearer();
  if (token) headers.Authorization = `Bearer ${token}`;
  let res: Response;
  try {
    res = await fetch(`/api/v1${path}`, {
      method,
      headers,
      credentials: "same-origin",
      body: raw ? raw.bytes : body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "network", "The service cannot be reached. Check your connection and try again.");
  }
  const text = await res.text();
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const e = json?.error ?? {};
    const signingIn = ["/members/sessions", "/auth/", "/dev/signup", "/dev/verify", "/dev/session"].some((p) => path.startsWith(p));
    if (res.status === 401 && !signingIn) signedOut.forEach((l) => l());
    throw new ApiError(res.status, e.code ?? `http_${res.status}`, e.message ?? `Request failed (${res.status})`, e.field, e.fields ?? {});
  }
  return json as T;
}

/** Sends bytes (a Wasm component) as the body, with their content type. */
export const upload = <T>(path: string, bytes: ArrayBuffer, contentType: string) => api<T>("PUT", path, { bytes, contentType });

export const get = <T>(path: string) => api<T>("GET", path);
export const post = <T>(path: string, body: unknown = {}) => api<T>("POST", path, body);
export const patch = <T>(path: string, body: unknown) => api<T>("PATCH", path, body);
export const put = <T>(path: string, body: unknown) => api<T>("PUT", path, body);
export const del = <T>(path: string) => api<T>("DELETE", path);
export const enc = encodeURIComponent;
