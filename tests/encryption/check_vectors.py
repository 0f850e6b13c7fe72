#!/usr/bin/env python3
"""An independent implementation of docs/e2e.md (Python `cryptography`), checked against the test vector.

Run: python3 tests/encryption/check_vectors.py   (needs `pip install cryptography`)
It derives the device key, the wrap and the ciphertext from the vector's inputs and compares them with the
expected envelope, then opens the envelope the way a device does.
"""
import base64
import json
import pathlib
import re
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def unb64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def seq(start: int, n: int) -> bytes:
    return bytes(range(start, start + n))


def pub(priv: X25519PrivateKey) -> bytes:
    return priv.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def wrap_key(shared: bytes, eph_pub: bytes, recipient_pub: bytes, device_uuid: str) -> bytes:
    info = ("hubbub-e2e-v1|wrap|" + device_uuid).encode()
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=eph_pub + recipient_pub, info=info).derive(shared)


def main() -> int:
    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "e2e.md"
    expected = json.loads(re.search(r"<!-- vector-envelope -->\s*```json\n(.*?)```", doc.read_text(), re.S).group(1))

    device = X25519PrivateKey.from_private_bytes(seq(0x00, 32))
    eph = X25519PrivateKey.from_private_bytes(seq(0x20, 32))
    content_key, nonce, wrap_nonce = seq(0x40, 32), seq(0x60, 12), seq(0x70, 12)
    plaintext = b"Your parcel 7731 is ready for pickup."
    aad = expected["aad"]
    device_uuid = expected["key_wraps"][0]["device_uuid"]

    shared = eph.exchange(X25519PublicKey.from_public_bytes(pub(device)))
    wk = wrap_key(shared, pub(eph), pub(device), device_uuid)
    wrap = AESGCM(wk).encrypt(wrap_nonce, content_key, aad.encode())
    ciphertext = AESGCM(content_key).encrypt(nonce, plaintext, aad.encode())

    got = {
        "ciphertext": b64(ciphertext),
        "nonce": b64(nonce),
        "wrap": b64(wrap),
        "wrap_nonce": b64(wrap_nonce),
        "sender_eph_pub": b64(pub(eph)),
    }
    want = {
        "ciphertext": expected["ciphertext"],
        "nonce": expected["nonce"],
        **{k: expected["key_wraps"][0][k] for k in ("wrap", "wrap_nonce", "sender_eph_pub")},
    }
    if got != want:
        print("MISMATCH\n got:", got, "\nwant:", want)
        return 1

    # Open it as the device does: ECDH with the sender's ephemeral key, unwrap, decrypt.
    w = expected["key_wraps"][0]
    shared = device.exchange(X25519PublicKey.from_public_bytes(unb64(w["sender_eph_pub"])))
    key = AESGCM(wrap_key(shared, unb64(w["sender_eph_pub"]), pub(device), device_uuid)).decrypt(
        unb64(w["wrap_nonce"]), unb64(w["wrap"]), aad.encode())
    opened = AESGCM(key).decrypt(unb64(expected["nonce"]), unb64(expected["ciphertext"]), aad.encode())
    assert opened == plaintext, opened
    print("docs/e2e.md test vector: OK (device public key %s)" % b64(pub(device)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
