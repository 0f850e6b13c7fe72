// What the user has not read yet (GET /api/v1/me/unread): the counts on the navigation, in the tab title
// and on the installed app's icon (Badging API). Asked again whenever a live event says something changed,
// never on a timer.
import { useEffect, useState } from "preact/hooks";
import { get, type Unread } from "./api";
import { onLive, type LiveKind } from "./live";
import { setTitleCount } from "./util";

const NONE: Unread = { messages: 0, conversations: 0, bots: 0, total: 0 };
let counts: Unread = NONE;
let signedIn = false;
let timer: number | undefined;
const listeners = new Set<(u: Unread) => void>();

function show(u: Unread) {
  counts = u;
  setTitleCount(u.total);
  const nav = navigator as Navigator & { setAppBadge?: (n: number) => Promise<void>; clearAppBadge?: () => Promise<void> };
  if (u.total && nav.setAppBadge) nav.setAppBadge(u.total).catch(() => {});
  else if (!u.total && nav.clearAppBadge) nav.clearAppBadge().catch(() => {});
  listeners.forEach((l) => l(u));
}

/** Asks for the counts again, once for a burst of changes. */
export function refreshUnread(): void {
  if (!signedIn) return;
  clearTimeout(timer);
  timer = window.setTimeout(() => {
    get<Unread>("/me/unread").then((u) => signedIn && show(u), () => {});
  }, 100);
}

const CHANGES: LiveKind[] = ["message.created", "message.updated", "conversation.message", "conversation.updated", "flow.updated", "reset"];
CHANGES.forEach((k) => onLive(k, refreshUnread));

/** Starts counting for the signed-in user. */
export function startUnread(): void {
  signedIn = true;
  refreshUnread();
}

/** Forgets the counts (logging out). */
export function stopUnread(): void {
  signedIn = false;
  clearTimeout(timer);
  show(NONE);
}

export function useUnread(): Unread {
  const [u, set] = useState(counts);
  useEffect(() => {
    listeners.add(set);
    set(counts);
    return () => void listeners.delete(set);
  }, []);
  return u;
}
