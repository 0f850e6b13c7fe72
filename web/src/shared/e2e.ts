// Hubbub end-to-end encryption, protocol version 1 (docs/e2e.md), on WebCrypto only:
// X25519 (deriveBits), HKDF-SHA-256 (deriveBits), AES-256-GCM. Interoperable with the Rust reference (`e2e/`).
// Private keys stay CryptoKeys (non-extractable in the app); only public keys are ever exported.

export const VERSION = 1;
export const ALG = "x25519-hkdf-sha256-aes-256-gcm";
export const WRAP_INFO_PREFIX = "hubbub-e2e-v1|wrap|";

export interface KeyWrap {
  device_uuid: string;
  wrap: string;
  wrap_nonce: string;
  sender_eph_pub: string;
  device_kind?: "user" | "agent";
}

export interface Envelope {
  v: number;
  alg: string;
  mode?: string | null;
  key_version?: number | null;
  sender_device_uuid?: string | null;
  ciphertext: string;
  nonce: string;
  aad?: string | null;
  key_wraps?: KeyWrap[] | null;
}

export interface Recipient {
  device_uuid: string;
  identity_key_pub: string;
}

/** A device identity: its private CryptoKey and its raw 32-byte public key. */
export interface DeviceKey {
  privateKey: CryptoKey;
  publicRaw: Uint8Array;
}

export class E2eError extends Error {
  constructor(
    public kind: "encoding" | "unsupported" | "aad" | "no_wrap" | "weak_key" | "decrypt",
    message: string,
  ) {
    super(message);
  }
}

const X25519 = { name: "X25519" } as const;
const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });

/** base64url without padding. */
export function encode(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** base64url, with or without padding. */
export function decode(what: string, s: string): Uint8Array {
  try {
    const b = s.replace(/=+$/, "").replace(/-/g, "+").replace(/_/g, "/");
    const bin = atob(b + "===".slice((b.length + 3) % 4));
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    throw new E2eError("encoding", `${what} is not valid base64url`);
  }
}

function decodeLen(what: string, s: string, n: number): Uint8Array {
  const b = decode(what, s);
  if (b.length !== n) throw new E2eError("encoding", `${what} must be ${n} bytes`);
  return b;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

// WebCrypto wants BufferSource backed by ArrayBuffer; copy to be safe with views of shared buffers.
function buf(b: Uint8Array): ArrayBuffer {
  return b.slice().buffer as ArrayBuffer;
}

export function random(n: number): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(n));
}

export const hubAad = (partner: string, ref: string) => `hubbub.hub.${partner}|msg|${ref}|v1`;
export const conversationAad = (conv: string, ref: string) => `hubbub.conv.${conv}|msg|${ref}|v1`;
export const conversationKeyAad = (conv: string, v: number) => `hubbub.conv.${conv}|key|${v}|v1`;

/** A message ref the sender chooses (`msg_` + 24 URL-safe characters). */
export function newRef(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  return "msg_" + Array.from(random(24), (b) => alphabet[b % alphabet.length]).join("");
}

const PKCS8_X25519_PREFIX = new Uint8Array([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20,
]);

/** Imports a raw 32-byte X25519 private key (tests and vectors; the app never sees raw private keys). */
export async function importPrivateRaw(raw: Uint8Array, extractable = false): Promise<CryptoKey> {
  return crypto.subtle.importKey("pkcs8", buf(concat(PKCS8_X25519_PREFIX, raw)), X25519, extractable, ["deriveBits"]);
}

async function importPublicRaw(raw: Uint8Array): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", buf(raw), X25519, true, []);
}

const BASE_POINT = new Uint8Array(32);
BASE_POINT[0] = 9;

/** The public key of a private key: X25519(p, 9). Works for non-extractable keys. */
export async function publicFromPrivate(privateKey: CryptoKey): Promise<Uint8Array> {
  return x25519(privateKey, BASE_POINT);
}

async function x25519(privateKey: CryptoKey, publicRaw: Uint8Array): Promise<Uint8Array> {
  const pub = await importPublicRaw(publicRaw);
  let bits: ArrayBuffer;
  try {
    bits = await crypto.subtle.deriveBits({ name: "X25519", public: pub } as unknown as AlgorithmIdentifier, privateKey, 256);
  } catch {
    throw new E2eError("weak_key", "the public key is a low-order point");
  }
  const shared = new Uint8Array(bits);
  if (shared.every((b) => b === 0)) throw new E2eError("weak_key", "the public key is a low-order point");
  return shared;
}

/** A new device identity: the private key is never extractable. */
export async function generateDeviceKey(): Promise<DeviceKey> {
  const pair = (await crypto.subtle.generateKey(X25519, false, ["deriveBits"])) as CryptoKeyPair;
  const publicRaw = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
  return { privateKey: pair.privateKey, publicRaw };
}

async function hkdf(shared: Uint8Array, ephPub: Uint8Array, recipientPub: Uint8Array, deviceUuid: string): Promise<Uint8Array> {
  const ikm = await crypto.subtle.importKey("raw", buf(shared), "HKDF", false, ["deriveBits"]);
  const bits = await crypto.subtle.deriveBits(
    { name: "HKDF", hash: "SHA-256", salt: buf(concat(ephPub, recipientPub)), info: buf(enc.encode(WRAP_INFO_PREFIX + deviceUuid)) },
    ikm,
    256,
  );
  return new Uint8Array(bits);
}

async function aesKey(raw: Uint8Array): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", buf(raw), "AES-GCM", false, ["encrypt", "decrypt"]);
}

async function aeadSeal(key: Uint8Array, nonce: Uint8Array, msg: Uint8Array, aad: string): Promise<Uint8Array> {
  const k = await aesKey(key);
  return new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv: buf(nonce), additionalData: buf(enc.encode(aad)) }, k, buf(msg)));
}

async function aeadOpen(key: Uint8Array, nonce: Uint8Array, msg: Uint8Array, aad: string): Promise<Uint8Array> {
  const k = await aesKey(key);
  try {
    return new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv: buf(nonce), additionalData: buf(enc.encode(aad)) }, k, buf(msg)));
  } catch {
    throw new E2eError("decrypt", "authentication failed: the data was altered or is not for this key");
  }
}

/** A fresh random 32-byte content key. */
export function newContentKey(): Uint8Array {
  return random(32);
}

/** Wraps `contentKey` for one recipient device, with the ephemeral key and wrap nonce given (vectors). */
export async function wrapKeyWith(
  contentKey: Uint8Array,
  recipient: Recipient,
  aad: string,
  ephemeral: CryptoKey,
  wrapNonce: Uint8Array,
): Promise<KeyWrap> {
  const their = decodeLen("identity_key_pub", recipient.identity_key_pub, 32);
  const ephPub = await publicFromPrivate(ephemeral);
  const shared = await x25519(ephemeral, their);
  const wrapKey = await hkdf(shared, ephPub, their, recipient.device_uuid);
  const wrap = await aeadSeal(wrapKey, wrapNonce, contentKey, aad);
  return { device_uuid: recipient.device_uuid, wrap: encode(wrap), wrap_nonce: encode(wrapNonce), sender_eph_pub: encode(ephPub) };
}

/** Wraps `contentKey` for one recipient device with a fresh ephemeral key (one per wrap, never reused). */
export async function wrapKey(contentKey: Uint8Array, recipient: Recipient, aad: string): Promise<KeyWrap> {
  const eph = (await crypto.subtle.generateKey(X25519, false, ["deriveBits"])) as CryptoKeyPair;
  return wrapKeyWith(contentKey, recipient, aad, eph.privateKey, random(12));
}

/** Recovers the content key from a wrap addressed to this device. */
export async function unwrapKey(wrap: KeyWrap, device: DeviceKey, aad: string): Promise<Uint8Array> {
  const ephPub = decodeLen("sender_eph_pub", wrap.sender_eph_pub, 32);
  const shared = await x25519(device.privateKey, ephPub);
  const wrapKey = await hkdf(shared, ephPub, device.publicRaw, wrap.device_uuid);
  const nonce = decodeLen("wrap_nonce", wrap.wrap_nonce, 12);
  const key = await aeadOpen(wrapKey, nonce, decode("wrap", wrap.wrap), aad);
  if (key.length !== 32) throw new E2eError("decrypt", "content key must be 32 bytes");
  return key;
}

function checkEnvelope(envelope: Envelope, expectedAad: string): void {
  if (envelope.v !== VERSION || envelope.alg !== ALG) {
    throw new E2eError("unsupported", `unsupported envelope: v ${envelope.v} alg ${envelope.alg}`);
  }
  if (envelope.aad !== expectedAad) {
    throw new E2eError("aad", `the envelope's aad ${JSON.stringify(envelope.aad)} is not the expected ${JSON.stringify(expectedAad)}`);
  }
}

/** Encrypts with a known content key (mode `conversation`, no wraps), nonce given (vectors). */
export async function encryptWithNonce(contentKey: Uint8Array, keyVersion: number, plaintext: string, aad: string, nonce: Uint8Array): Promise<Envelope> {
  const ciphertext = await aeadSeal(contentKey, nonce, enc.encode(plaintext), aad);
  return { v: VERSION, alg: ALG, mode: "conversation", key_version: keyVersion, ciphertext: encode(ciphertext), nonce: encode(nonce), aad };
}

export function encrypt(contentKey: Uint8Array, keyVersion: number, plaintext: string, aad: string): Promise<Envelope> {
  return encryptWithNonce(contentKey, keyVersion, plaintext, aad, random(12));
}

/** Decrypts an envelope's content with a known content key, checking its aad first. */
export async function decrypt(envelope: Envelope, contentKey: Uint8Array, expectedAad: string): Promise<string> {
  checkEnvelope(envelope, expectedAad);
  const nonce = decodeLen("nonce", envelope.nonce, 12);
  const plain = await aeadOpen(contentKey, nonce, decode("ciphertext", envelope.ciphertext), expectedAad);
  try {
    return dec.decode(plain);
  } catch {
    throw new E2eError("decrypt", "the plaintext is not UTF-8");
  }
}

/** Seals a hub message for every recipient (mode `sealed`, key version 1), randomness given (vectors). */
export async function sealWith(
  plaintext: string,
  aad: string,
  recipients: Recipient[],
  contentKey: Uint8Array,
  nonce: Uint8Array,
  wrapRandomness: [CryptoKey, Uint8Array][],
): Promise<Envelope> {
  const key_wraps: KeyWrap[] = [];
  for (let i = 0; i < recipients.length; i++) {
    key_wraps.push(await wrapKeyWith(contentKey, recipients[i], aad, wrapRandomness[i][0], wrapRandomness[i][1]));
  }
  const envelope = await encryptWithNonce(contentKey, 1, plaintext, aad, nonce);
  return { ...envelope, mode: "sealed", key_wraps };
}

export async function seal(plaintext: string, aad: string, recipients: Recipient[]): Promise<Envelope> {
  const key = newContentKey();
  const key_wraps: KeyWrap[] = [];
  for (const r of recipients) key_wraps.push(await wrapKey(key, r, aad));
  const envelope = await encrypt(key, 1, plaintext, aad);
  return { ...envelope, mode: "sealed", key_wraps };
}

/** Opens a sealed envelope with this device's wrap, checking the aad is `expectedAad` (hubAad of the record). */
export async function open(envelope: Envelope, deviceUuid: string, device: DeviceKey, expectedAad: string): Promise<string> {
  checkEnvelope(envelope, expectedAad);
  const wrap = (envelope.key_wraps ?? []).find((w) => w.device_uuid === deviceUuid);
  if (!wrap) throw new E2eError("no_wrap", `no key wrap for device ${deviceUuid}`);
  const key = await unwrapKey(wrap, device, expectedAad);
  return decrypt(envelope, key, expectedAad);
}
