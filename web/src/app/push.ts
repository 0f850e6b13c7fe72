// Web Push for a closed app: this device subscribes with the host's VAPID key (GET /me/push) and gives the
// host its PushSubscription (POST /me/push/subscriptions); the service worker (public/sw.js) shows what
// arrives and tells the host it arrived. Asked for only when the user chooses to, never on first load.
import { del, get, post } from "./api";
import { decode } from "../shared/e2e";

export type PushState = "unsupported" | "blocked" | "on" | "off";
interface PushSettings {
  vapid_public_key: string;
  subscribed: boolean;
}

export const pushSupported = () => "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;

async function registration(): Promise<ServiceWorkerRegistration | undefined> {
  return navigator.serviceWorker.getRegistration();
}

/** Whether this device gets notifications: the browser's permission, its subscription and the host's. */
export async function pushState(): Promise<PushState> {
  if (!pushSupported() || !(await registration())) return "unsupported";
  if (Notification.permission === "denied") return "blocked";
  if (Notification.permission !== "granted") return "off";
  const [settings, sub] = await Promise.all([get<PushSettings>("/me/push"), registration().then((r) => r?.pushManager.getSubscription())]);
  return settings.subscribed && sub ? "on" : "off";
}

/** Asks for permission (the caller is a click) and subscribes this device. */
export async function turnOnPush(): Promise<PushState> {
  if (!pushSupported()) return "unsupported";
  const permission = await Notification.requestPermission();
  if (permission !== "granted") return permission === "denied" ? "blocked" : "off";
  const reg = await navigator.serviceWorker.ready;
  const { vapid_public_key } = await get<PushSettings>("/me/push");
  const key = decode("the VAPID key", vapid_public_key);
  let sub = await reg.pushManager.getSubscription();
  const same = sub?.options?.applicationServerKey && new Uint8Array(sub.options.applicationServerKey).every((b, i) => b === key[i]);
  if (sub && !same) {
    await sub.unsubscribe();
    sub = null;
  }
  sub ??= await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key as BufferSource });
  await post("/me/push/subscriptions", sub.toJSON());
  return "on";
}

/** Unsubscribes this device, here and on the host. */
export async function turnOffPush(): Promise<PushState> {
  const sub = await (await registration())?.pushManager.getSubscription();
  await sub?.unsubscribe().catch(() => false);
  await del("/me/push/subscriptions");
  return "off";
}

const ASKED = "hubbub.push.asked";
/** Whether to offer notifications now: supported, never answered, and not declined here before. */
export const shouldOffer = () => pushSupported() && Notification.permission === "default" && !localStorage.getItem(ASKED);
export const declineOffer = () => localStorage.setItem(ASKED, "1");
