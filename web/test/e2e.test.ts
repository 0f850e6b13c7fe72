import { describe, expect, it } from "vitest";
import {
  conversationAad, conversationKeyAad, decode, decrypt, E2eError, encode, encrypt, generateDeviceKey, hubAad,
  importPrivateRaw, newContentKey, open, publicFromPrivate, seal, sealWith, unwrapKey, wrapKey,
} from "../src/shared/e2e";

const seq = (start: number, n: number) => Uint8Array.from({ length: n }, (_, i) => start + i);

// docs/e2e.md, "Test vector".
const VECTOR = {
  v: 1,
  alg: "x25519-hkdf-sha256-aes-256-gcm",
  mode: "sealed",
  key_version: 1,
  ciphertext: "9Ud8dyfk8dRq5BUWMrFvOi9FnTFlW_Bqd1qt19nid5JDhJhuVde_O8dzeAThx-2S7an9hIU",
  nonce: "YGFiY2RlZmdoaWpr",
  aad: "hubbub.hub.acme|msg|msg_TESTVECTOR000000000001|v1",
  key_wraps: [
    {
      device_uuid: "dev-vector-1",
      wrap: "llR5TdtmvEbWiZ8GJCLBtPKVCVEC7r0AN8Fd5aqO0y6oezPAhCmVd7TrNYtUaOr4",
      wrap_nonce: "cHFyc3R1dnd4eXp7",
      sender_eph_pub: "NYBy1jZYgNGu6jKa35EhODhR7SGijjt16WXQ0s0WYlQ",
    },
  ],
};
const PLAINTEXT = "Your parcel 7731 is ready for pickup.";
const DEVICE_PUB = "j0DFrbaPJWJK5bIU6nZ6bslNgp09e14a0bpvPiE4KF8";

async function vectorDevice() {
  const privateKey = await importPrivateRaw(seq(0x00, 32));
  return { privateKey, publicRaw: await publicFromPrivate(privateKey) };
}

describe("docs/e2e.md test vector", () => {
  it("derives the documented device public key", async () => {
    const device = await vectorDevice();
    expect(encode(device.publicRaw)).toBe(DEVICE_PUB);
  });

  it("opens the documented envelope", async () => {
    const device = await vectorDevice();
    const text = await open(VECTOR, "dev-vector-1", device, hubAad("acme", "msg_TESTVECTOR000000000001"));
    expect(text).toBe(PLAINTEXT);
  });

  it("seals the documented envelope byte for byte", async () => {
    const eph = await importPrivateRaw(seq(0x20, 32));
    const envelope = await sealWith(
      PLAINTEXT,
      VECTOR.aad,
      [{ device_uuid: "dev-vector-1", identity_key_pub: DEVICE_PUB }],
      seq(0x40, 32),
      seq(0x60, 12),
      [[eph, seq(0x70, 12)]],
    );
    expect(JSON.stringify(envelope)).toBe(JSON.stringify(VECTOR));
  });

  it("refuses an envelope replayed into another context (aad mismatch)", async () => {
    const device = await vectorDevice();
    await expect(open(VECTOR, "dev-vector-1", device, hubAad("acme", "msg_OTHER0000000000000001"))).rejects.toMatchObject({ kind: "aad" });
  });

  it("says when there is no wrap for this device", async () => {
    const device = await vectorDevice();
    await expect(open(VECTOR, "dev-other", device, VECTOR.aad)).rejects.toBeInstanceOf(E2eError);
  });

  it("refuses altered ciphertext", async () => {
    const device = await vectorDevice();
    const bad = decode("c", VECTOR.ciphertext);
    bad[0] ^= 1;
    await expect(open({ ...VECTOR, ciphertext: encode(bad) }, "dev-vector-1", device, VECTOR.aad)).rejects.toMatchObject({ kind: "decrypt" });
  });
});

describe("round trips", () => {
  it("seals and opens for two fresh devices", async () => {
    const a = await generateDeviceKey();
    const b = await generateDeviceKey();
    const aad = hubAad("acme", "msg_ROUNDTRIP00000000000001");
    const envelope = await seal("héllo 👋", aad, [
      { device_uuid: "dev-a", identity_key_pub: encode(a.publicRaw) },
      { device_uuid: "dev-b", identity_key_pub: encode(b.publicRaw) },
    ]);
    expect(envelope.key_wraps).toHaveLength(2);
    expect(await open(envelope, "dev-a", a, aad)).toBe("héllo 👋");
    expect(await open(envelope, "dev-b", b, aad)).toBe("héllo 👋");
    // A wrap moved to another device does not open.
    const moved = { ...envelope, key_wraps: [{ ...envelope.key_wraps![0], device_uuid: "dev-b" }] };
    await expect(open(moved, "dev-b", b, aad)).rejects.toBeInstanceOf(E2eError);
  });

  it("shares a conversation key and encrypts messages with it", async () => {
    const device = await generateDeviceKey();
    const k = newContentKey();
    const keyAad = conversationKeyAad("conv_abc", 1);
    const wrap = await wrapKey(k, { device_uuid: "dev-c", identity_key_pub: encode(device.publicRaw) }, keyAad);
    const got = await unwrapKey(wrap, device, keyAad);
    expect(encode(got)).toBe(encode(k));
    const aad = conversationAad("conv_abc", "msg_CONV000000000000000001");
    const envelope = await encrypt(got, 1, "where is my parcel?", aad);
    expect(envelope.mode).toBe("conversation");
    expect(await decrypt(envelope, k, aad)).toBe("where is my parcel?");
    await expect(decrypt(envelope, k, conversationAad("conv_abc", "msg_X"))).rejects.toMatchObject({ kind: "aad" });
  });

  it("keeps device private keys non-extractable", async () => {
    const device = await generateDeviceKey();
    expect(device.privateKey.extractable).toBe(false);
    await expect(crypto.subtle.exportKey("pkcs8", device.privateKey)).rejects.toBeTruthy();
  });
});
