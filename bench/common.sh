# Sourced by the bench scripts: wrk; the host binary to measure ($BIN: this tree's release build, or the
# one HUBBUB_BENCH_BIN names, say an earlier commit's for a before/after); a scratch folder ($WORK),
# removed on exit with the background jobs.
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
BIN="${HUBBUB_BENCH_BIN:-target/release/hubbub}"
[ -n "${HUBBUB_BENCH_BIN:-}" ] || cargo build --release -p hubbub-host --bin hubbub 2>&1 | tail -1
WORK="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
# The host refuses short or repetitive secrets: fresh random ones for each run.
BENCH_JWT_SECRET="$(head -c 32 /dev/urandom | base64 | tr -d '=+/')"
BENCH_METRICS_TOKEN="$(head -c 32 /dev/urandom | base64 | tr -d '=+/')"
