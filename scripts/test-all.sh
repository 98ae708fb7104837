#!/usr/bin/env bash
# Runs every test of flowswitch: formatting, lints, unit/property/differential tests, and a
# short fuzz pass. Installs what the tests need when it can (as root): Debian's
# openvswitch-switch (the oracle for the differential tests) and cargo-fuzz.
#
#   ./scripts/test-all.sh            # everything
#   FUZZ_SECONDS=0 ./scripts/test-all.sh   # skip the fuzz pass
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-20}
step() { printf '\n==> %s\n' "$*"; }

need_root_install() {
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    if [ ! -f /tmp/.flowswitch-apt-updated ]; then apt-get update -qq && touch /tmp/.flowswitch-apt-updated; fi
    apt-get install -y -qq "$@" >/dev/null
  else
    echo "SKIP install of $* (not root): tests that need them will skip with a message"
  fi
}

step "dependencies"
command -v cargo >/dev/null || { echo "cargo not found: install Rust (rustup) first" >&2; exit 1; }
if ! command -v ovs-ofctl >/dev/null || ! command -v ovs-vswitchd >/dev/null; then
  need_root_install openvswitch-switch openvswitch-common
fi
# Never let the package's own service run: our tests start private instances.
if [ "$(id -u)" = 0 ] && command -v ovs-ctl >/dev/null && pgrep -x ovs-vswitchd >/dev/null 2>&1; then
  echo "note: a system ovs-vswitchd is running; tests use private sockets and do not touch it"
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test (unit, property and differential tests against real OVS)"
cargo test --workspace 2>&1 | tee /tmp/flowswitch-test.log
grep -E '^test result:' /tmp/flowswitch-test.log | awk '
  { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1); if ($(i) ~ /^ignored;?$/) s += $(i-1) } }
  END { printf "cargo: %d passed, %d failed, %d skipped\n", p, f, s }'

if [ "$FUZZ_SECONDS" -gt 0 ] && [ -d fuzz ]; then
  step "fuzz (${FUZZ_SECONDS}s per target)"
  if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked >/dev/null 2>&1 || echo "SKIP fuzz: cargo-fuzz could not be installed"
  fi
  if command -v cargo-fuzz >/dev/null; then
    # cargo-fuzz wants nightly flags; stable rustc accepts them with RUSTC_BOOTSTRAP.
    for t in $(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz list); do
      mkdir -p "fuzz/corpus/$t"
      RUSTC_BOOTSTRAP=1 cargo fuzz run "$t" --sanitizer none -- \
        -max_total_time="$FUZZ_SECONDS" "fuzz/corpus/$t" "fuzz/seeds/$t" >"/tmp/fuzz-$t.log" 2>&1 \
        || { echo "fuzz target $t FAILED:"; tail -40 "/tmp/fuzz-$t.log"; exit 1; }
      grep -E '^Done|#[0-9]+.*DONE' "/tmp/fuzz-$t.log" | tail -1 || true
      echo "fuzz $t: ok"
    done
  fi
fi
echo
echo "all tests passed"
