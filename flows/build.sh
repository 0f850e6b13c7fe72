#!/usr/bin/env bash
# Builds the sample bot components (flows/signup, flows/shop, flows/chat), the runtime tests' hostile
# component (tests/guests/evil) and the WhatsApp menu check's (tests/guests/wide-menu), then the Python and
# JavaScript samples (flows/python-signup with componentize-py, flows/js-signup with ComponentizeJS), and
# prints their paths.
#
# The Python and JavaScript tools are installed by this script, at the versions pinned in
# flows/python-signup/requirements.txt and flows/js-signup/package-lock.json, into
# <target>/langs-tools/ (a venv and a node_modules); a component is rebuilt only when its sources, the WIT
# or the tool changed. HUBBUB_SKIP_LANG_FLOWS=1 builds the Rust components only.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

rustup target add wasm32-wasip2 >/dev/null 2>&1
cargo build --target wasm32-wasip2 --release -p signup -p shop -p chat -p evil -p wide-menu

target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
for flow in signup shop chat evil wide_menu; do
    echo "$target_dir/wasm32-wasip2/release/$flow.wasm"
done

[ "${HUBBUB_SKIP_LANG_FLOWS:-0}" = 1 ] && exit 0

out="$target_dir/wasm32-wasip2/release"
tools="$target_dir/langs-tools"
mkdir -p "$tools" "$out"

# A digest of files (the inputs of a component), to rebuild only when one changed.
inputs_digest() { cat "$@" | sha256sum | cut -d' ' -f1; }
# Runs "$@" unless <out>/<name>.wasm was built from the same inputs (digest in <name>.wasm.inputs).
build_if_changed() {
    local name="$1" digest="$2"
    shift 2
    if [ -f "$out/$name.wasm" ] && [ "$(cat "$out/$name.wasm.inputs" 2>/dev/null)" = "$digest" ]; then
        return 0
    fi
    rm -f "$out/$name.wasm.inputs"
    "$@"
    echo "$digest" >"$out/$name.wasm.inputs"
}
wit_files=(wit/v0.1.0/*.wit)

# Python: componentize-py (its binary is inside the PyPI wheel) in a venv.
py_req=flows/python-signup/requirements.txt
if [ "$(cat "$tools/python/.installed" 2>/dev/null)" != "$(inputs_digest "$py_req")" ]; then
    echo "installing componentize-py into $tools/python" >&2
    rm -rf "$tools/python"
    python3 -m venv "$tools/python"
    "$tools/python/bin/pip" install -q --disable-pip-version-check -r "$py_req" >&2
    inputs_digest "$py_req" >"$tools/python/.installed"
fi
build_if_changed python-signup "$(inputs_digest flows/python-signup/app.py "${wit_files[@]}" "$py_req")" \
    "$tools/python/bin/componentize-py" -d wit/v0.1.0 -w bot componentize -p flows/python-signup app \
    -o "$out/python-signup.wasm" >&2

# JavaScript: ComponentizeJS (StarlingMonkey) from npm, at the versions of the lock file.
js_lock=flows/js-signup/package-lock.json
if [ "$(cat "$tools/node/.installed" 2>/dev/null)" != "$(inputs_digest "$js_lock")" ]; then
    echo "installing ComponentizeJS into $tools/node" >&2
    rm -rf "$tools/node"
    mkdir -p "$tools/node"
    cp flows/js-signup/package.json "$js_lock" "$tools/node/"
    # `npm ci` refuses this lock (npm leaves optional platform packages out of it): `npm install` from the
    # lock file installs the same versions.
    (cd "$tools/node" && npm install --no-audit --no-fund --loglevel=error >&2)
    inputs_digest "$js_lock" >"$tools/node/.installed"
fi
# `jco componentize` 1.35 fails here resolving the WIT path; componentize-js is what it runs underneath.
# Paths relative to the repository: the tool only sees the current directory.
build_if_changed js-signup "$(inputs_digest flows/js-signup/signup.js "${wit_files[@]}" "$js_lock")" \
    "$tools/node/node_modules/.bin/componentize-js" flows/js-signup/signup.js --wit wit/v0.1.0 --world-name bot \
    --disable http fetch-event -o "$out/js-signup.wasm" >&2

for flow in python-signup js-signup; do
    echo "$out/$flow.wasm"
done
