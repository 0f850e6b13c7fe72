// The API as the app uses it: same-origin fetch, the user JWT from localStorage, one error shape.
// Types come from the generated OpenAPI schema (@hubbub/client, openapi-typescript); requests are a tiny
// fetch wrapper so that every 401 from /me can send the user back to the login screen.
import type { components } from "@hubbub/client/src/schema";
import { forget, reached, recall, save } from "./offline";

type S = components["schemas"];
// `flow` is an untyped object in the schema; FlowCard below is its shape (host/src/flows.rs).
export type Message = Omit<S["Message"], "flow"> & { flow?: FlowCard | null };
export type Account = S["Account"];
export type Conversation = S["Conversation"];
export type Unread = S["Unread"];
export type ConversationThread = Omit<S["ConversationThread"], "messages"> & { messages: Message[] };
export type ConversationKeys = S["ConversationKeys"];
export type PeerDirectory = S["PeerDirectory"];
export type OpenForm = S["OpenForm"];
export type MyBot = S["MyBot"];
export type LoggedIn = S["LoggedIn"];
export type FlowProgress = S["FlowProgress"];
/** One of my flows as GET /me/flows/{ref} gives it: where it stands, its summary once completed. */
export type FlowState = S["FlowCard"];
export type FieldValue = S["FieldValue"];
export type Page<T> = { data: T[]; next_cursor?: string | null };

/** A flow card as a message record carries it. */
export interface FlowCard {
  ref: string;
  bot: string;
  /** The bot's ref and partner (cards made before they were added lack them). */
  bot_ref?: string;
  partner?: string;
  flow: string;
  title?: string | null;
  state: string;
  summary?: Record<string, unknown> | null;
}

const TOKEN = "hubbub.token";
const DEVICE = "hubbub.device";
const FLASH = "hubbub.flash";

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
    public field?: string,
    public fields?: Record<string, string>,
  ) {
    super(message);
  }
}

export const auth = {
  token: (): string | null => localStorage.getItem(TOKEN),
  set(token: string) {
    localStorage.setItem(TOKEN, token);
  },
  /** Signs out this browser: the token, and what was kept for offline use. */
  clear() {
    localStorage.removeItem(TOKEN);
    void forget();
  },
  /** One device uuid per browser, made once. */
  device(): string {
    let d = localStorage.getItem(DEVICE);
    if (!d) {
      d = crypto.randomUUID();
      localStorage.setItem(DEVICE, d);
    }
    return d;
  },
  /** A message for the login screen (session expired…), read once. */
  flash(msg?: string): string | null {
    if (msg !== undefined) {
      sessionStorage.setItem(FLASH, msg);
      return msg;
    }
    const m = sessionStorage.getItem(FLASH);
    sessionStorage.removeItem(FLASH);
    return m;
  },
};

type Listener = () => void;
const unauthorized = new Set<Listener>();
/** Called when a /me call answered 401: the token is expired, revoked or bad. */
export function onUnauthorized(l: Listener): () => void {
  unauthorized.add(l);
  return () => unauthorized.delete(l);
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const token = auth.token();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(`/api/v1${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    // Offline: a read answers what it last answered (the app says it is offline); a write fails.
    const saved = method === "GET" ? await recall<T>(path) : undefined;
    if (saved !== undefined) return saved;
    throw new ApiError(0, "network", "The service cannot be reached. Check your connection and try again.");
  }
  reached();
  const text = await res.text();
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const e = json?.error ?? {};
    const err = new ApiError(res.status, e.code ?? "http_" + res.status, e.message ?? `Request failed (${res.status})`, e.field, e.fields);
    if (res.status === 401 && path.startsWith("/me")) {
      auth.clear();
      auth.flash("Your session has expired or was signed out. Please log in again.");
      unauthorized.forEach((l) => l());
    }
    throw err;
  }
  // Kept for offline use only while the one who asked is still signed in: an answer that arrives after
  // "Log out" (which empties what was kept) is not kept again.
  if (method === "GET" && token && auth.token() === token) save(path, json);
  return json as T;
}

export const get = <T>(path: string) => api<T>("GET", path);
export const post = <T>(path: string, body: unknown = {}) => api<T>("POST", path, body);
export const enc = encodeURIComponent;
