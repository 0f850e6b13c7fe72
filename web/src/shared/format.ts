// What every page writes alike: a record's time, and a failure in words for the reader.
import { ApiError } from "./api";

/**
 * A record time (`YYYY-MM-DD HH:MM:SS`, UTC; or an ISO time ending in `Z`) in the reader's own time and
 * format: `full`, its date and time (the console, the developer portal); `short`, the time when it is today,
 * else the day, with the year when it is not this year's (the app). Nothing for none; an unreadable time as
 * it is.
 */
export function when(t: string | null | undefined, style: "full" | "short" = "full"): string {
  if (!t) return "";
  const d = new Date(t.replace(" ", "T") + (t.endsWith("Z") ? "" : "Z"));
  if (isNaN(d.getTime())) return t;
  if (style === "full") return d.toLocaleString();
  const now = new Date();
  return d.toDateString() === now.toDateString()
    ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : d.toLocaleDateString([], { day: "numeric", month: "short", year: d.getFullYear() === now.getFullYear() ? undefined : "numeric" });
}

/**
 * What to tell the reader about a failure: an API error's message (in its side's words for some codes,
 * `ApiOptions.words`). Any other failure says its own message with `own` (the app, whose steps and
 * encryption word their errors for the user); without it, a plain sentence (the console and the developer
 * portal show no internal error's text).
 */
export function errorText(e: unknown, { own = false }: { own?: boolean } = {}): string {
  if (e instanceof ApiError) return e.message;
  if (!own) return "Something went wrong. Try again.";
  return e instanceof Error ? e.message : String(e);
}

/** The latest message of a conversation, as the lists show it (`ConversationLastMessage` of the API). */
export interface LastMessage {
  direction: "in" | "out";
  content_type: string;
  preview?: string | null;
  encrypted: boolean;
  sender_name?: string | null;
}

const CONTENT_WORDS: Record<string, string> = {
  image: "📷 Photo",
  video: "🎬 Video",
  audio: "🎵 Audio",
  document: "📄 Document",
  link: "🔗 Link",
  html: "📰 Page",
};

/**
 * A list's line for a conversation's latest message: who wrote it (`inName`, the person, and for the
 * partner's side the member's first name or `outName`), then the start of its text, or what it is when it
 * has no text the server can show (encrypted, a photo).
 */
export function lastMessageLine(last: LastMessage, inName: string, outName: string): string {
  const who = last.direction === "in" ? inName : (last.sender_name ?? outName);
  const what = last.preview ?? (last.encrypted ? "🔒 Encrypted message" : (CONTENT_WORDS[last.content_type] ?? "Message"));
  return `${who}: ${what}`;
}

/** What the people a member answers see of their display name: its first word, as the server sends it. */
export const firstName = (name: string | null | undefined): string | undefined => name?.trim().split(/\s+/)[0] || undefined;
