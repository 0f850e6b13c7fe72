// This browser's E2E device identity: an X25519 key pair made with WebCrypto, the private key
// non-extractable, the CryptoKey kept in IndexedDB (structured clone keeps it unexportable).
import { auth, post } from "./api";
import { encode, generateDeviceKey, type DeviceKey } from "../shared/e2e";
import { database } from "../shared/idb";

const DB = "hubbub";
const STORE = "keys";

const run = database(DB, { [STORE]: undefined });
const tx = <T>(mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest<T>) => run(STORE, mode, f);

let cached: Promise<DeviceKey> | null = null;

/** The device key, made on first use. */
export function deviceKey(): Promise<DeviceKey> {
  cached ??= (async () => {
    const id = auth.device();
    const stored = await tx<{ privateKey: CryptoKey; publicRaw: Uint8Array } | undefined>("readonly", (s) => s.get(id)).catch(() => undefined);
    if (stored?.privateKey) return { privateKey: stored.privateKey, publicRaw: new Uint8Array(stored.publicRaw) };
    const key = await generateDeviceKey();
    await tx("readwrite", (s) => s.put({ privateKey: key.privateKey, publicRaw: key.publicRaw }, id));
    return key;
  })();
  cached.catch(() => (cached = null));
  return cached;
}

/** Publishes this device's public key (the same key again changes nothing on the server). */
export async function publishDeviceKey(): Promise<void> {
  const key = await deviceKey();
  await post("/me/devices/keys", { identity_key_pub: encode(key.publicRaw), device_uuid: auth.device(), platform: "web" });
}
