#!/usr/bin/env bash
# Proves a Python client generated from docs/openapi.json by openapi-python-client installs, imports and
# works: in a temporary directory (a virtualenv there; nothing global changes) it installs the pinned
# generator, generates the client with --fail-on-warning (any warning about the document fails the check),
# installs the generated package and
#  1. with no network (an in-process httpx transport answers) builds an AuthenticatedClient, a SendMessage,
#     and calls send_message and list_messages, checking the request sent and the typed Message / Error /
#     ListMessage parsed from the answers;
#  2. against a running host (target/debug/hubbub, or $HUBBUB_BIN; dev mode, a temporary SQLite database)
#     links an account, sends it a message, lists with `limit`, and reads a 422 as a typed Error.
#
#   bash tests/clients/python.sh              (OPC_VERSION=… to try another generator version)
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"

OPC_VERSION="${OPC_VERSION:-0.29.1}"
# Builds the generated package (its --meta setup is a setup.py); Python 3.12+ venvs have no setuptools.
SETUPTOOLS_VERSION="84.2.1"
PYTHON="${PYTHON:-python3}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# A virtualenv without its own pip (the interpreter's pip installs into it: faster than ensurepip).
"$PYTHON" -m venv --without-pip "$work/venv"
venv="$work/venv/bin"
pip_venv() { "$PYTHON" -m pip --python "$venv/python" --disable-pip-version-check "$@"; }

# The generator's wheels, kept between runs (the registry's answers are not cached by pip here, and
# resolving some twenty packages again takes most of a minute): downloaded once per version pair and
# Python version, then installed with no index. HUBBUB_CLIENTS_CACHE= (empty) turns the cache off.
pyver="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
cache="${HUBBUB_CLIENTS_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/hubbub-clients}"
requirements=("openapi-python-client==$OPC_VERSION" "setuptools==$SETUPTOOLS_VERSION")
install_generator() {
  if [ -z "$cache" ]; then
    pip_venv install -q "${requirements[@]}"
    return
  fi
  local wheels="$cache/wheels-opc$OPC_VERSION-setuptools$SETUPTOOLS_VERSION-py$pyver"
  if [ ! -f "$wheels/.complete" ]; then
    # (set -e does not apply inside a function called as a condition: each step checks itself.)
    rm -rf "$wheels.partial" && mkdir -p "$wheels.partial" &&
      pip_venv download -q --only-binary=:all: -d "$wheels.partial" "${requirements[@]}" &&
      touch "$wheels.partial/.complete" &&
      rm -rf "$wheels" && mv "$wheels.partial" "$wheels" || return 1
  fi
  pip_venv install -q --no-compile --no-index --find-links "$wheels" "${requirements[@]}"
}
if ! install_generator >"$work/pip.log" 2>&1; then
  cat "$work/pip.log" >&2
  echo "python.sh: could not install openapi-python-client==$OPC_VERSION" >&2
  exit 1
fi

# ruff (installed with the generator) formats the output; it is looked up on PATH.
if ! (cd "$work" && PATH="$venv:$PATH" "$venv/openapi-python-client" generate \
  --path "$repo/docs/openapi.json" --config "$repo/tests/clients/openapi-python-client.yaml" \
  --meta setup --output-path "$work/hubbub-api-client" --fail-on-warning) >"$work/generate.log" 2>&1; then
  cat "$work/generate.log" >&2
  echo "python.sh: openapi-python-client $OPC_VERSION failed on docs/openapi.json (output above)" >&2
  exit 1
fi
# Anything besides its one progress line is a warning about the document: show it.
if grep -v '^Generating ' "$work/generate.log" | grep -q .; then
  echo "python.sh: openapi-python-client said:" >&2
  cat "$work/generate.log" >&2
fi

# Its dependencies (httpx, attrs) are already in the virtualenv with the generator, and so is setuptools.
if ! pip_venv install -q --no-compile --no-index --no-build-isolation "$work/hubbub-api-client" \
  >"$work/pip.log" 2>&1; then
  cat "$work/pip.log" >&2
  echo "python.sh: the generated client does not install" >&2
  exit 1
fi

# Run from the temporary directory so the installed package, not a source tree, is imported.
cd "$work"
"$venv/python" - <<'PY'
import json

import httpx

from hubbub_api_client import AuthenticatedClient
from hubbub_api_client.api.messages import list_messages, send_message
from hubbub_api_client.models import Error, ListMessage, Message, MessageState, SendMessage

PHONE = "+15551230000"
MESSAGE = {
    "message_id": 42,
    "ref": "msg_0123456789abcdefghij",
    "phone": PHONE,
    "partner": "acme",
    "partner_name": "Acme",
    "direction": "out",
    "content_type": "text",
    "state": "queued",
    "priority": "notification",
    "created_at": "2025-01-02 03:04:05",
    "body": "Hello from Python",
    "channel": None,
}
sent = []


def answer(request: httpx.Request) -> httpx.Response:
    sent.append(request)
    assert request.headers["authorization"] == "Bearer sk_test_key", request.headers
    if request.method == "POST" and request.url.path == "/api/v1/messages":
        body = json.loads(request.content)
        if body.get("phone") != PHONE:
            return httpx.Response(422, json={"error": {"code": "validation", "message": "not E.164", "field": "phone"}})
        assert body == {"phone": PHONE, "body": "Hello from Python"}, body
        assert request.headers["idempotency-key"] == "k1", request.headers
        return httpx.Response(201, json=MESSAGE)
    if request.method == "GET" and request.url.path == "/api/v1/messages":
        assert dict(request.url.params) == {"phone": PHONE, "state": "delivered", "limit": "10"}, request.url
        return httpx.Response(200, json={"data": [dict(MESSAGE, state="delivered")], "next_cursor": None})
    return httpx.Response(404, json={"error": {"code": "not_found", "message": "no such route"}})


client = AuthenticatedClient(
    base_url="https://hubbub.example.com",
    token="sk_test_key",
    raise_on_unexpected_status=True,
    httpx_args={"transport": httpx.MockTransport(answer)},
)

request = SendMessage(phone=PHONE, body="Hello from Python")
assert request.to_dict() == {"phone": PHONE, "body": "Hello from Python"}, request.to_dict()

message = send_message.sync(client=client, body=request, idempotency_key="k1")
assert isinstance(message, Message), message
assert message.message_id == 42 and message.state == MessageState.QUEUED, message

error = send_message.sync(client=client, body=SendMessage(phone="0800", body="x"))
assert isinstance(error, Error), error
assert error.error.code == "validation" and error.error.field == "phone", error

page = list_messages.sync(client=client, phone=PHONE, state=MessageState.DELIVERED, limit=10)
assert isinstance(page, ListMessage), page
assert [m.message_id for m in page.data] == [42] and page.data[0].state == MessageState.DELIVERED, page
assert len(sent) == 3
PY

# 2. Against a running host.
hubbub="${HUBBUB_BIN:-$repo/target/debug/hubbub}"
port="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export HUBBUB_DATABASE_URL="sqlite://$work/hubbub.db?mode=rwc" HUBBUB_LISTEN="127.0.0.1:$port" HUBBUB_DEV=1
export HUBBUB_JWT_SECRET="python-client-run-secret-of-32-bytes-or-more" HUBBUB_LOG=warn
export HUBBUB_COMPONENT_CACHE_DIR="$work/components"
key="$("$hubbub" partner create --code acme --name Acme | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["api_key"])')"
"$hubbub" serve >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
HUBBUB_URL="http://127.0.0.1:$port" HUBBUB_KEY="$key" "$venv/python" - <<'PY'
import os

from hubbub_api_client import AuthenticatedClient
from hubbub_api_client.api.accounts import link
from hubbub_api_client.api.messages import list_messages, send_message
from hubbub_api_client.models import AccountLink, Error, Linked, ListMessage, Message, SendMessage

client = AuthenticatedClient(base_url=os.environ["HUBBUB_URL"], token=os.environ["HUBBUB_KEY"])
PHONE = "+15551239876"

linked = link.sync(client=client, body=AccountLink(phone=PHONE, display_name="Ada"))
assert isinstance(linked, Linked), linked
assert linked.linked and linked.account.phone == PHONE and linked.account.display_name == "Ada", linked

ids = []
for text in ("first", "second"):
    sent = send_message.sync(client=client, body=SendMessage(phone=PHONE, body=text))
    assert isinstance(sent, Message), sent
    assert sent.phone == PHONE and sent.body == text, sent
    ids.append(sent.message_id)

page = list_messages.sync(client=client, phone=PHONE, limit=1)
assert isinstance(page, ListMessage), page
assert [m.message_id for m in page.data] == [ids[1]] and page.next_cursor, page
rest = list_messages.sync(client=client, phone=PHONE, limit=1, cursor=page.next_cursor)
assert [m.message_id for m in rest.data] == [ids[0]], rest

error = link.sync(client=client, body=AccountLink(phone="0800"))
assert isinstance(error, Error) and error.error.code == "validation" and error.error.field == "phone", error
PY
echo "python client (openapi-python-client $OPC_VERSION): generated without warnings, installed; send_message / list_messages / Error typed offline; link / send / list with limit / a 422 against a running host"
