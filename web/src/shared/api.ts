// The API as every page uses it: a same-origin fetch of `/api/v1…`, the generated OpenAPI types
// (@hubbub/client, openapi-typescript), one error shape. Each side makes its own client with `apiClient`,
// giving how it is signed in: the end-user app a bearer token from its auth module (app/api.ts), the partner
// console the member's session cookie (HttpOnly: no script ever reads it; the browser sends it with the
// same-origin fetch, and the Sec-Fetch-Site header the host's CSRF check wants; console/api.ts), the
// developer portal its 12-hour session key as a bearer header (dashboard/api.ts).
import type { components } from "@hubbub/client/src/schema";

export type { components };
export type Schemas = components["schemas"];
export type Page<T> = { data: T[]; next_cursor?: string | null };

// The schema's records as the console and the developer portal name them (the app names its own, app/api.ts).
type S = Schemas;
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
export type RetentionSettings = S["RetentionSettings"];
export type WebhookDelivery = S["WebhookDelivery"];
export type Bot = S["Bot"];
export type Account = S["Account"];
export type ApiKey = S["ApiKey"];
export type ApiKeyCreated = S["ApiKeyCreated"];
export type CannedReply = S["CannedReply"];
export type Label = S["Label"];
export type Macro = S["Macro"];
export type MacroAction = S["MacroAction"];
export type MacroApplied = S["MacroApplied"];
export type AssignmentSettings = S["AssignmentSettings"];
export type BusinessHours = S["BusinessHours"];
export type SlaTargets = S["SlaTargets"];
export type CsatSettings = S["CsatSettings"];
export type ConversationAnalytics = S["ConversationAnalytics"];
export type MessageAnalytics = S["MessageAnalytics"];
export type MessageFigures = S["MessageFigures"];
export type Prices = S["Prices"];
export type ConversationSla = S["ConversationSla"];
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

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
    public field?: string,
    /** A `422` names each field it refuses, with why (`fields.KEY` for an account's custom fields). */
    public fields?: Record<string, string>,
  ) {
    super(message);
  }
}

/** Bytes sent as they are, with their content type (a Wasm component), instead of a JSON body. */
export type Raw = { bytes: ArrayBuffer; contentType: string };

/** How one side calls the API. */
export interface ApiOptions {
  /** The bearer token sent with each call, read for every call (none: no Authorization header). */
  bearer?: () => string | null;
  /** Whether a 401 answer to `path` means the sign-in ended (then `onSignedOut`'s listeners are called). */
  signedOut: (path: string) => boolean;
  /** What a GET answers when the service cannot be reached (the app's offline copy); undefined: it fails. */
  offline?: (path: string) => Promise<unknown>;
  /** The service answered (whatever it said). */
  reached?: () => void;
  /** A GET of `path` answered `json`, asked with the bearer token `token`. */
  answered?: (path: string, json: unknown, token: string | null) => void;
  /** The side's own words for some error codes, shown instead of the API's message. */
  words?: Record<string, string>;
}

export function apiClient(o: ApiOptions) {
  const signedOut = new Set<() => void>();

  async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { Accept: "application/json" };
    const raw = body !== null && typeof body === "object" && (body as Raw).bytes instanceof ArrayBuffer ? (body as Raw) : null;
    if (body !== undefined) headers["Content-Type"] = raw ? raw.contentType : "application/json";
    const token = o.bearer?.() ?? null;
    if (token) headers.Authorization = `Bearer ${token}`;
    let res: Response;
    try {
      res = await fetch(`/api/v1${path}`, {
        method,
        headers,
        // The session cookie (the console's), and nothing across origins.
        credentials: "same-origin",
        body: raw ? raw.bytes : body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      // Offline: a read may answer what it last answered (the app says it is offline); a write fails.
      const saved = method === "GET" && o.offline ? await o.offline(path) : undefined;
      if (saved !== undefined) return saved as T;
      throw new ApiError(0, "network", "The service cannot be reached. Check your connection and try again.");
    }
    o.reached?.();
    const text = await res.text();
    let json: any = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    if (!res.ok) {
      const e = json?.error ?? {};
      const code: string = e.code ?? `http_${res.status}`;
      const err = new ApiError(res.status, code, o.words?.[code] ?? e.message ?? `Request failed (${res.status})`, e.field, e.fields);
      if (res.status === 401 && o.signedOut(path)) signedOut.forEach((l) => l());
      throw err;
    }
    if (method === "GET") o.answered?.(path, json, token);
    return json as T;
  }

  return {
    request,
    get: <T>(path: string) => request<T>("GET", path),
    post: <T>(path: string, body: unknown = {}) => request<T>("POST", path, body),
    put: <T>(path: string, body: unknown) => request<T>("PUT", path, body),
    patch: <T>(path: string, body: unknown) => request<T>("PATCH", path, body),
    del: <T>(path: string) => request<T>("DELETE", path),
    /** Sends bytes (a Wasm component) as the body, with their content type. */
    upload: <T>(path: string, bytes: ArrayBuffer, contentType: string) => request<T>("PUT", path, { bytes, contentType } satisfies Raw),
    /** Calls `l` when a call answers 401 and the sign-in ended (expired, signed out elsewhere, member removed). */
    onSignedOut(l: () => void): () => void {
      signedOut.add(l);
      return () => signedOut.delete(l);
    },
  };
}

export const enc = encodeURIComponent;
