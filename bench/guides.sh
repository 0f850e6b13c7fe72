#!/usr/bin/env bash
# Walks each "first bot" guide (guest-sdk/docs/{rust,python,javascript}.md) from an empty folder to a flow
# completed through the API, on this machine, and prints how long each took (run on demand, never in CI).
#
#   bash bench/guides.sh                 # all three
#   bash bench/guides.sh python js      # some
#
# The Python and JavaScript guides run as written: their ```sh blocks in order, and each code block that
# follows a line "`FILE`:" written to FILE (after `../hubbub` is pointed at this checkout). The only
# addition is a wait for the host to answer after `serve &`, which a reader does by reading on. The Rust
# guide is interactive, so its commands are run with what a reader copies by hand filled in (the printed
# api_key, the `hubbub` alias, the answers typed into `bot try`). Each walk needs port 8080 free (the
# guides' host listens there) and ends with the flow's "completed" answer, or fails.
#
# The time is the machine's part only (installs, builds, compiles, calls); reading and typing are not in it.
# Downloads come from the local caches when earlier runs (or flows/build.sh) filled them.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
WANTED="${*:-rust python js}"
cargo build -q --release -p hubbub-host --bin hubbub
if curl -s -o /dev/null http://127.0.0.1:8080/; then echo "port 8080 is in use: the guides' host needs it" >&2; exit 1; fi

# The guide's commands as a script (see above).
guide_script() {
  python3 - "$1" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
out, pending, i = ["set -euo pipefail"], None, 0
while i < len(lines):
    line = lines[i].strip()
    named = re.fullmatch(r"`([^`]+)`:", line)
    if named:
        pending = named.group(1)
    fence = re.fullmatch(r"```(\w*)", line)
    if fence:
        body, i = [], i + 1
        while lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if fence.group(1) == "sh":
            for command in body:
                out.append(command)
                if re.search(r"\bserve &", command):
                    out.append("for _ in $(seq 1 100); do curl -sf http://127.0.0.1:8080/api/v1/openapi.json >/dev/null && break; sleep 0.1; done")
        elif pending:
            out.append(f"cat > {pending} <<'GUIDE_EOF'\n" + "\n".join(body) + "\nGUIDE_EOF")
        pending = None
    i += 1
print("\n".join(out))
PY
}

# walk NAME: runs the guide in a fresh folder; prints its time and checks the flow completed.
walk() {
  local name="$1" work out start
  work="$(mktemp -d)"
  out="$work/walk.log"
  start=$(date +%s%N)
  case "$name" in
    python | js)
      local doc=guest-sdk/docs/python.md
      [ "$name" = js ] && doc=guest-sdk/docs/javascript.md
      ln -s "$REPO" "$work/hubbub"
      guide_script "$doc" > "$work/guide.sh"
      (cd "$work" && bash -c "trap 'kill \$(jobs -p) 2>/dev/null' EXIT; source guide.sh") > "$out" 2>&1 || true
      ;;
    rust)
      (
        export HUBBUB_DATABASE_URL="sqlite://$work/hubbub.db?mode=rwc"
        HUBBUB_DEV=1 cargo run -q --release -p hubbub-host -- serve &
        trap 'kill $(jobs -p) 2>/dev/null' EXIT
        key="$(cargo run -q --release -p hubbub-host -- partner create --code acme --name Acme --platform | jq -r .api_key)"
        for _ in $(seq 1 100); do curl -sf http://127.0.0.1:8080/api/v1/openapi.json >/dev/null && break; sleep 0.1; done
        export HUBBUB_API_URL=http://127.0.0.1:8080 HUBBUB_API_KEY="$key"
        hubbub() { "$REPO/target/release/hubbub" "$@"; }
        rustup target add wasm32-wasip2
        mkdir "$work/bots" && cd "$work/bots"
        hubbub bot new my-bot
        cd my-bot
        cargo test
        cargo build --target wasm32-wasip2 --release
        hubbub bot upload my-bot target/wasm32-wasip2/release/my_bot.wasm
        printf '\n1\nAna\n' | hubbub bot try my-bot hello
      ) > "$out" 2>&1 || true
      ;;
  esac
  local seconds=$(( ($(date +%s%N) - start) / 1000000000 ))
  if grep -qE '"state":"completed"|Completed\.$' "$out"; then
    echo "$name guide: from an empty folder to a completed flow in ${seconds} s"
    rm -rf "$work"
  else
    echo "$name guide: the flow did not complete after ${seconds} s; the walk's output is in $out" >&2
    return 1
  fi
}

status=0
for name in $WANTED; do walk "$name" || status=1; done
exit $status
