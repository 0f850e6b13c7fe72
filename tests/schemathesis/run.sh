#!/usr/bin/env bash
# Schema-driven fuzzing of the whole API with schemathesis, against the OpenAPI document the service serves.
# Starts a fresh host (debug build, dev mode, a temporary SQLite database), makes one credential of each kind,
# and runs schemathesis once per kind over the operations that kind calls, with a bounded number of examples
# per operation and a fixed seed. Fails on a 5xx, a response that breaks its documented schema or status
# codes or content type, an invalid request the server accepts, or a valid one it refuses (400/422).
#
#   bash tests/schemathesis/run.sh            (after `cargo build -p hubbub-host`)
#   ST_EXAMPLES=25 ST_SEED=7 bash tests/schemathesis/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

HUBBUB="${HUBBUB_BIN:-target/debug/hubbub}"
EXAMPLES="${ST_EXAMPLES:-6}"
SEED="${ST_SEED:-1}"
MAX_TIME="${ST_MAX_TIME:-50}"

if ! python3 -c 'import schemathesis' 2>/dev/null; then
  python3 -m pip install -q -r tests/schemathesis/requirements.txt
fi
# The CLI through the interpreter, so a fresh install works without its script being on PATH; run from the
# temporary directory, where it keeps its cache (never in the repository).
st() { (cd "$work" && python3 -c 'import sys; from schemathesis.cli import schemathesis; sys.argv[0] = "st"; sys.exit(schemathesis())' --config-file "$config" "$@"); }

work="$(mktemp -d)"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export HUBBUB_DATABASE_URL="sqlite://$work/hubbub.db?mode=rwc"
export HUBBUB_LISTEN="127.0.0.1:$port"
export HUBBUB_DEV=1
export HUBBUB_JWT_SECRET="schemathesis-run-secret-of-32-bytes-or-more"
export HUBBUB_COMPONENT_CACHE_DIR="$work/components"
export HUBBUB_RATE_LIMIT_PER_S=100000 HUBBUB_RATE_LIMIT_BURST=100000
export HUBBUB_DEVELOPER_RATE_LIMIT_PER_S=100000 HUBBUB_DEVELOPER_RATE_LIMIT_BURST=100000
export HUBBUB_DEVELOPER_DAILY_QUOTA=100000000
export HUBBUB_CODE_RATE_LIMIT_PER_IP_PER_MIN=100000 HUBBUB_CODE_RATE_LIMIT_GLOBAL_PER_MIN=100000
export HUBBUB_LOG=warn

json_field() { python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }

partner="$("$HUBBUB" partner create --code acme --name Acme --platform | json_field '["api_key"]')"
user="$("$HUBBUB" user token +15551230000)"
"$HUBBUB" serve >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$work"' EXIT
base="http://127.0.0.1:$port/api/v1"
for _ in $(seq 1 100); do curl -fs "$base/openapi.json" >/dev/null && break; sleep 0.1; done

post() { curl -fs -X POST "$base$1" -H 'content-type: application/json' "${@:3}" -d "$2"; }
post /accounts/link '{"phone": "+15551230000"}' -H "authorization: Bearer $partner" >/dev/null
post /dev/signup '{"phone": "+15557770000"}' >/dev/null
code="$(curl -fs "$base/dev-sink/messages?phone=%2B15557770000&channel=sms" -H "authorization: Bearer $partner" \
  | python3 -c 'import json, re, sys; print(re.findall(r"\b\d{6}\b", json.load(sys.stdin)["data"][0]["text"])[0])')"
developer="$(post /dev/verify "{\"phone\": \"+15557770000\", \"code\": \"$code\"}" | json_field '["api_key"]')"

# The checks, and the operations left out of positive_data_acceptance with the reason, are in
# tests/schemathesis/schemathesis.toml.
config="$PWD/tests/schemathesis/schemathesis.toml"
passed=0
failed=0
run_group() {
  local name="$1" credential="$2"
  shift 2
  echo "-- schemathesis: $name operations"
  if st run "$base/openapi.json" -H "Authorization: Bearer $credential" "$@" \
      --max-examples "$EXAMPLES" --seed "$SEED" --phases examples,coverage,fuzzing \
      --max-time "$MAX_TIME" --workers 1 --no-color --suppress-health-check all \
      >"$work/$name.txt" 2>&1; then
    passed=$((passed + 1))
    grep -E "generated|passed|Tested" "$work/$name.txt" | tail -3
  else
    failed=$((failed + 1))
    cat "$work/$name.txt"
  fi
}
run_group partner "$partner" --exclude-path-regex '^/api/v1/(me|dev)/'
run_group user "$user" --include-path-regex '^/api/v1/me/'
run_group developer "$developer" --include-path-regex '^/api/v1/dev/'

if grep -E "panicked|thread '.*' panicked" "$work/server.log"; then
  failed=$((failed + 1))
fi
echo "schemathesis: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
