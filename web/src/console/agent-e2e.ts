// The console's agent device for end-to-end encrypted conversations (docs/e2e.md, "Encrypted
// conversations"): an X25519 identity made in this browser with WebCrypto (web/src/shared/e2e.ts, the code the
// end-user app uses), its private key non-extractable and kept in IndexedDB, published for the partner with
// `POST /agent/devices/keys`. A thread's content keys K_v reach it as wraps the other side (or this browser)
// uploaded to `/conversations/{id}/keys`; messages are opened and sealed here, so the service only ever sees
// ciphertext.
//
// Who wraps for this device: whoever makes a content key wraps it to every agent device published at that
// moment (the user's app when it turns encryption on, or when its device lacks the newest key). Nobody
// re-wraps an existing key for a browser published later, so the messages sealed before cannot be read
// here; a reply from here makes the next key (K_{v+1}, wrapped to the user's devices and the partner's agent
// devices), and what the user writes after it can be.
import { ApiError, enc, get, post, type MemberSession, type Schemas } from "./api";
import {
  conversationAad,
  conversationKeyAad,
  decrypt,
  encode,
  encrypt,
  generateDeviceKey,
  newContentKey,
  newRef,
  random,
  unwrapKey,
  wrapKey,
  type DeviceKey,
  type Envelope,
  type KeyWrap,
} from "../shared/e2e";
import { database } from "../shared/idb";

type S = Schemas;
type ConversationKeys = S["ConversationKeys"];
type PeerDirectory = S["PeerDirectory"];
type Message = S["Message"];

/** This browser's agent device: the uuid it publishes itself under, and its key. */
export interface AgentDevice {
  uuid: string;
  key: DeviceKey;
}

// Not the app's database ("hubbub", where keystore.ts keeps an end user's device key on the same origin)
// nor its offline copy: a member's agent key and a user's device key never meet.
const DB = "hubbub-console";
const STORE = "agent-devices";
const run = database(DB, { [STORE]: undefined });

type Stored = { uuid: string; privateKey: CryptoKey; publicRaw: Uint8Array };

/** One agent device per member of a partner in this browser (two members may share a browser). */
const slot = (session: MemberSession) => `${session.partner.code}:${session.member.id}`;

async function loadOrMake(id: string): Promise<AgentDevice> {
  const read = () => run<Stored | undefined>(STORE, "readonly", (s) => s.get(id));
  const found = await read();
  if (found?.privateKey) return { uuid: found.uuid, key: { privateKey: found.privateKey, publicRaw: new Uint8Array(found.publicRaw) } };
  const key = await generateDeviceKey();
  const uuid = "agent-web-" + encode(random(18));
  try {
    // `add`, not `put`: another tab that made one first keeps it, and this one uses it.
    await run(STORE, "readwrite", (s) => s.add({ uuid, privateKey: key.privateKey, publicRaw: key.publicRaw } satisfies Stored, id));
    return { uuid, key };
  } catch (e) {
    const other = await read();
    if (other?.privateKey) return { uuid: other.uuid, key: { privateKey: other.privateKey, publicRaw: new Uint8Array(other.publicRaw) } };
    throw e;
  }
}

const devices = new Map<string, Promise<AgentDevice>>();

/** The member's agent device in this browser, made on first use and published once per page load (the same
 * key again changes nothing on the server; a published key is what lets the user's app wrap for it). */
export function agentDevice(session: MemberSession): Promise<AgentDevice> {
  const id = slot(session);
  let p = devices.get(id);
  if (!p) {
    p = (async () => {
      const d = await loadOrMake(id);
      await post("/agent/devices/keys", { device_uuid: d.uuid, identity_key_pub: encode(d.key.publicRaw), platform: "web" });
      return d;
    })();
    devices.set(id, p);
    p.catch(() => devices.delete(id));
  }
  return p;
}

/** The body of an encrypted reply, for `POST /conversations/{id}/messages`. */
export interface SealedReply {
  encrypted: true;
  e2e_mode: "conversation";
  e2e_key_version: number;
  ref: string;
  e2e_envelope: Envelope;
}

/** This browser has no agent device; the message says why, in words for the agent (the console shows an
 * ApiError's message). */
export class NoAgentDevice extends ApiError {
  constructor(cause: unknown) {
    super(
      0,
      "e2e_device",
      "This browser has no agent key for encrypted conversations: " +
        (cause instanceof ApiError
          ? `publishing it failed (${cause.message}).`
          : "it could not make or keep one (the console needs X25519 in WebCrypto, and IndexedDB)."),
    );
  }
}

/** One conversation's content keys as this agent device holds them, by version. */
export class AgentConvKeys {
  keys = new Map<number, Uint8Array>();
  /** The newest key version shared in the thread (null: the thread was never encrypted). */
  latest: number | null = null;

  /** `id` and `ref`: the conversation's; its ref is what the AADs bind. */
  constructor(
    public id: number,
    public ref: string,
    private device: () => Promise<AgentDevice>,
  ) {}

  private async own(): Promise<AgentDevice> {
    try {
      return await this.device();
    } catch (err) {
      throw new NoAgentDevice(err);
    }
  }

  /** Reads the wraps addressed to this device and opens those not opened yet. */
  async refresh(): Promise<void> {
    const d = await this.own();
    const r = await get<ConversationKeys>(`/conversations/${this.id}/keys?device_uuid=${enc(d.uuid)}`);
    this.latest = r.key_version ?? null;
    for (const w of r.wraps) {
      if (this.keys.has(w.key_version) || w.device_uuid !== d.uuid) continue;
      try {
        this.keys.set(w.key_version, await unwrapKey(w as KeyWrap, d.key, conversationKeyAad(this.ref, w.key_version)));
      } catch {
        /* a wrap this key cannot open (made for a key this device had before) */
      }
    }
  }

  /** Reads the thread's keys for this device (`refresh`). Without an agent device in this browser, still finds
   * whether the thread is encrypted (the peer directory's newest version) and answers why there is no device;
   * null when there is one. Throws when neither could be read. */
  async check(): Promise<string | null> {
    try {
      await this.refresh();
      return null;
    } catch (err) {
      if (!(err instanceof NoAgentDevice)) throw err;
      const dir = await get<PeerDirectory>(`/conversations/${this.id}/devices`);
      this.latest = dir.key_version ?? null;
      return err.message;
    }
  }

  /** Whether this device holds the newest key of the thread. */
  get current(): boolean {
    return this.latest !== null && this.keys.has(this.latest);
  }

  /** The text of an encrypted message, checked against this thread and the message's ref. Throws when it
   * cannot be opened here (no key of its version, or altered). */
  async open(m: Message): Promise<string> {
    const env = m.e2e_envelope as Envelope | undefined;
    if (!env) throw new Error("no envelope");
    const v = m.e2e_key_version ?? env.key_version ?? 1;
    const k = this.keys.get(v);
    if (!k) throw new Error(`no content key of version ${v} on this device`);
    return decrypt(env, k, conversationAad(this.ref, m.ref));
  }

  /** Makes K_{v+1} and wraps it to every peer device: the user's devices with a key and the partner's agent
   * devices (this one among them). Refused when the user has no device that could read it. */
  async share(): Promise<number> {
    await this.own();
    const dir = await get<PeerDirectory>(`/conversations/${this.id}/devices`);
    if (!dir.devices.some((d) => d.has_keys && d.identity_key_pub)) {
      throw new ApiError(0, "e2e_no_devices", "Not sent: the user has no device with an encryption key, so an encrypted reply could not be read by them.");
    }
    const v = (dir.key_version ?? 0) + 1;
    const k = newContentKey();
    const aad = conversationKeyAad(this.ref, v);
    const wraps: KeyWrap[] = [];
    for (const [kind, list] of [["user", dir.devices], ["agent", dir.agent_devices]] as const) {
      for (const d of list) {
        if (!d.has_keys || !d.identity_key_pub) continue;
        wraps.push({ ...(await wrapKey(k, { device_uuid: d.device_uuid, identity_key_pub: d.identity_key_pub }, aad)), device_kind: kind });
      }
    }
    await post(`/conversations/${this.id}/keys`, { key_version: v, wraps });
    this.keys.set(v, k);
    this.latest = v;
    return v;
  }

  /** Seals `text` with the newest key (making one first when this device does not hold it), bound to a ref
   * chosen here: the request body of the reply. The text itself never leaves this function. */
  async seal(text: string): Promise<SealedReply> {
    await this.refresh();
    let v = this.latest;
    if (v === null || !this.keys.has(v)) v = await this.share();
    const ref = newRef();
    const envelope = await encrypt(this.keys.get(v)!, v, text, conversationAad(this.ref, ref));
    return { encrypted: true, e2e_mode: "conversation", e2e_key_version: v, ref, e2e_envelope: envelope };
  }
}
