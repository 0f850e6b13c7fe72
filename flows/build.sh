#!/usr/bin/env bash
# Builds the sample bot components (flows/signup, flows/shop, flows/chat) and the runtime tests' hostile
# component (tests/guests/evil), and prints their paths.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

rustup target add wasm32-wasip2 >/dev/null 2>&1
cargo build --target wasm32-wasip2 --release -p signup -p shop -p chat -p evil

target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
for flow in signup shop chat evil; do
    echo "$target_dir/wasm32-wasip2/release/$flow.wasm"
done
