// The API as the app uses it: the shared fetch core (shared/api.ts) with the user JWT from localStorage as a
// bearer token, so that every 401 from /me can send the user back to the login screen; reads kept for
// offline use (offline.ts). Types come from the generated OpenAPI schema (@hubbub/client, openapi-typescript).
import { apiClient, type Schemas } from "../shared/api";
import { forget, reached, recall, save } from "./offline";

export { ApiError, enc, type Page } from "../shared/api";

type S = Schemas;
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

/** What reaches the person, how and when (GET and PUT /me/preferences). */
export type Preferences = S["Preferences"];
export type PersonExport = S["PersonExport"];
export type PartnerPreferences = S["PartnerPreferences"];
export type PreferencesUpdate = S["PreferencesUpdate"];

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

const client = apiClient({
  bearer: auth.token,
  signedOut: (path) => path.startsWith("/me"),
  // Offline: a read answers what it last answered (the app says it is offline).
  offline: recall,
  reached,
  // Kept for offline use only while the one who asked is still signed in: an answer that arrives after
  // "Log out" (which empties what was kept) is not kept again.
  answered: (path, json, token) => {
    if (token && auth.token() === token) save(path, json);
  },
  words: {
    bot_error: "The bot failed to answer. Your answers are kept: try again.",
    rate_limited: "Too many tries. Wait a moment and try again.",
  },
});

/** Called when a /me call answered 401: the token is expired, revoked or bad (after the sign-in is cleared). */
export const onSignedOut = client.onSignedOut;
onSignedOut(() => {
  auth.clear();
  auth.flash("Your session has expired or was signed out. Please log in again.");
});

export const { request, get, post, put, del } = client;
