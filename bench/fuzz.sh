#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer through cargo fuzz) of the parsers that take outside input: template
# parse and render, phone/URL/IP validation, E2E envelope checks, form value validation, and inbound
# signature and receipt parsing (fuzz/fuzz_targets/). Not part of CI: it runs each target for a set time.
#
#   cargo install cargo-fuzz            # once
#   bash bench/fuzz.sh                  # every target, FUZZ_SECONDS (default 600) each
#   FUZZ_SECONDS=60 bash bench/fuzz.sh template validate
#
# Runs on the stable toolchain: RUSTC_BOOTSTRAP=1 lets cargo fuzz pass its -Z flags. Targets are built
# without a sanitizer (`-s none`): the code under test is safe Rust, and an instrumented wasmtime build
# would triple the build time. Findings land in fuzz/artifacts/<target>/; the corpus in fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
export RUSTC_BOOTSTRAP=1
seconds="${FUZZ_SECONDS:-600}"
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
cargo fuzz build -s none
status=0
for target in "${targets[@]}"; do
  log="$(mktemp)"
  echo "== $target (${seconds}s)"
  if cargo fuzz run -s none "$target" -- -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
    outcome="no crash"
  else
    outcome="CRASH (see fuzz/artifacts/$target/)"
    status=1
  fi
  runs="$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?')"
  cov="$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 || true)"
  echo "$target: $runs executions in ${seconds}s, ${cov:-cov: ?}, $outcome"
  if [ "$outcome" != "no crash" ]; then tail -40 "$log"; fi
  rm -f "$log"
done
exit "$status"
