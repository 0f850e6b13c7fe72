#!/usr/bin/env bash
# Runs every test of the project, on a fresh machine too: installs what is missing (the wasm32-wasip2
# target, a running PostgreSQL with database `test`), builds the sample flows, then runs the whole suite
# on the embedded SQLite default and again on PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_URL="${HUBBUB_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"

log() { printf '\n== %s\n' "$*"; }

ensure_postgres() {
  if ! command -v pg_isready >/dev/null 2>&1; then
    log "installing PostgreSQL"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    log "starting PostgreSQL"
    for version in $(ls /etc/postgresql 2>/dev/null); do
      pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    done
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
  pg_isready -h 127.0.0.1 -p 5432
  if ! psql -h 127.0.0.1 -U postgres -d test -Atc 'SELECT 1' >/dev/null 2>&1; then
    psql -h 127.0.0.1 -U postgres -d postgres -c 'CREATE DATABASE test' >/dev/null
  fi
  # Each test makes its own schema t_…; drop those of earlier runs.
  psql -h 127.0.0.1 -U postgres -d test -Atc \
    "SELECT format('DROP SCHEMA %I CASCADE;', nspname) FROM pg_namespace WHERE nspname LIKE 't\_%'" \
    | psql -q -h 127.0.0.1 -U postgres -d test >/dev/null
}

log "formatting (cargo fmt --check, rustfmt.toml)"
rustup component add rustfmt >/dev/null 2>&1 || true
cargo fmt --all --check

if [ -x flows/build.sh ]; then
  log "building the sample flows (wasm32-wasip2)"
  bash flows/build.sh
fi

ensure_postgres

THREADS="${HUBBUB_TEST_THREADS:-8}"

log "E2E test vector against an independent implementation (Python cryptography)"
if python3 -c 'import cryptography' 2>/dev/null || python3 -m pip install -q cryptography 2>/dev/null; then
  python3 tests/encryption/check_vectors.py
else
  echo "python3 with the cryptography package is not available: skipped (the Rust unit tests check the vector too)"
fi

log "supply chain: cargo deny (licenses, duplicate versions, sources; advisories when reachable) — deny.toml"
command -v cargo-deny >/dev/null 2>&1 || cargo install --locked -q cargo-deny
cargo deny --log-level error check licenses bans sources
# The RustSec advisory database is a git repository on github.com: checked whenever it can be fetched.
if timeout 20 git ls-remote -q https://github.com/RustSec/advisory-db HEAD >/dev/null 2>&1; then
  cargo deny --log-level error check advisories
else
  echo "advisories: skipped (the RustSec database on github.com is not reachable from this machine)"
fi

log "guest SDK: the shared form validator, the SDK (with its testing harness) and the sample bots' native tests"
cargo test -p hubbub-forms -p hubbub-guest-sdk -p signup -p shop -p chat --features hubbub-guest-sdk/testing

log "tests on SQLite"
HUBBUB_TEST_DATABASE_URL=sqlite cargo test -- --test-threads "$THREADS"

log "benchmarks build (run by hand, not in CI: built here so that none falls behind the code)"
cargo build -q -p hubbub-host --benches

log "schema-driven API fuzzing (schemathesis) against the served OpenAPI document, on SQLite"
bash tests/schemathesis/run.sh

log "clients generated from docs/openapi.json (TypeScript, Python) build and import"
bash tests/clients/run.sh

log "the web app in headless Chromium (tests/web): Vitest, then a person's use of each area"
bash tests/web/run.sh

log "deployment files: docker-compose.yml parses and names files that exist"
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install -q pyyaml
python3 - <<'PY'
import os, sys, yaml
compose = yaml.safe_load(open("docker-compose.yml"))
assert {"postgres", "hubbub-1", "hubbub-2", "entry"} <= set(compose["services"]), compose["services"].keys()
for service in compose["services"].values():
    for volume in service.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("./"):
            assert os.path.exists(source), f"{source} is missing"
    if "build" in service:
        assert os.path.exists(os.path.join(service["build"], "Dockerfile"))
print("docker-compose.yml: ok")
PY
if docker info >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
  docker compose config --quiet && echo "docker compose config: ok"
elif docker info >/dev/null 2>&1 && command -v docker-compose >/dev/null 2>&1; then
  docker-compose config --quiet && echo "docker-compose config: ok"
else
  echo "docker compose config: skipped (no usable Docker engine on this machine)"
fi

log "tests on PostgreSQL"
HUBBUB_TEST_DATABASE_URL="$PG_URL" cargo test -p hubbub-host --test api -- --test-threads "$THREADS"
