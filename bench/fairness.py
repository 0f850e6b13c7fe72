"""One partner's flood of slow bot calls against another partner's chat (run by bench/fairness.sh).

Partner A's bot sleeps in every call (the `sleep` flow of tests/guests/evil: each call holds its slot until
its wall-clock deadline); partner B's chat bot answers in about a millisecond. The script times B's steps
alone, then while A starts FLOOD slow calls at once, and counts how A's calls were answered.

Usage: python3 bench/fairness.py BASE_URL PARTNER_A_KEY PARTNER_B_KEY USER_TOKEN WASM_DIR
"""

import json
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request

FLOOD = 300
STEPS = 60
PHONE = "+15551230000"


def call(method, url, token, body=None, content_type="application/json", data=None):
    if data is None and body is not None:
        data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def main():
    base, key_a, key_b, token, wasm = sys.argv[1:6]
    for key, code, component in [(key_a, "slow", "evil"), (key_b, "chat", "chat")]:
        call("POST", f"{base}/bots", key, {"code": code, "name": code, "runtime_mode": "local"})
        with open(f"{wasm}/{component}.wasm", "rb") as f:
            status, _ = call("PUT", f"{base}/bots/{code}/component", key, data=f.read(), content_type="application/wasm")
        assert status == 200, status
        call("POST", f"{base}/accounts/link", key, {"phone": PHONE})
    status, opened = call("POST", f"{base}/me/bots/chat/sessions", token, {})
    assert status == 201, (status, opened)
    events = f"{base}/me/bots/chat/sessions/{opened['session']}/events"

    def b_steps():
        took = []
        for _ in range(STEPS):
            started = time.perf_counter()
            status, _ = call("POST", events, token, {"type": "text", "text": "hello"})
            took.append((time.perf_counter() - started) * 1000)
            assert status == 200, status
        return took

    alone = b_steps()
    starts = []
    for _ in range(FLOOD):
        status, invited = call("POST", f"{base}/bots/slow/flows/sleep/invite", key_a, {"phone": PHONE})
        assert status == 201, (status, invited)
        starts.append(f"{base}/me/flows/{invited['flow_session']['ref']}/start")
    outcomes = {}
    lock = threading.Lock()

    def a_call(url):
        status, body = call("POST", url, token, {})
        code = (body or {}).get("error", {}).get("code", "ok") if isinstance(body, dict) else "ok"
        with lock:
            outcomes[f"{status} {code}"] = outcomes.get(f"{status} {code}", 0) + 1

    threads = [threading.Thread(target=a_call, args=(url,)) for url in starts]
    for t in threads:
        t.start()
    time.sleep(0.2)
    flooded = b_steps()
    for t in threads:
        t.join()
    for name, took in [("alone", alone), (f"while A starts {FLOOD} slow calls", flooded)]:
        print(
            f"B's chat steps {name}: p50 {statistics.median(took):.1f} ms, p99 {percentile(took, 0.99):.1f} ms, "
            f"max {max(took):.1f} ms ({len(took)} steps, all 200)"
        )
    print("A's calls: " + ", ".join(f"{n} × {k}" for k, n in sorted(outcomes.items())))


if __name__ == "__main__":
    main()
