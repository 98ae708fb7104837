#!/bin/bash
# Instructions per received packet of `bench firewall`'s packet path, measured with
# callgrind (deterministic, unlike the wall clock on a shared machine): the path is run
# synchronously by the unit test `firewall_replay_counts` twice, with 100k and 300k packets;
# instructions per packet = the difference of the totals / 200k (setup cancels out).
#
# usage: scripts/fw-instructions.sh PROTO CONNS [PLAIN=0|1] [HINTS=1|0]
#   e.g. scripts/fw-instructions.sh udp 1          # firewall, recirculation hints on
#        scripts/fw-instructions.sh tcp 100 0 0    # firewall, hints off
#        scripts/fw-instructions.sh udp 1 1        # plain forwarding
# needs: valgrind; builds the flowswitch unit-test binary (release) itself.
set -euo pipefail
PROTO=${1:?proto udp|tcp}; CONNS=${2:?connections}; PLAIN=${3:-0}; HINTS=${4:-1}
cd "$(dirname "$0")/.."
BIN=$(cargo test --release -p flowswitch --bin flowswitch --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[ -x "$BIN" ] || { echo "fw-instructions: could not build the test binary" >&2; exit 1; }
TMP=$(mktemp -d -t fw-instructions.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
total() {
  FW_REPLAY_HINTS=$HINTS FW_REPLAY_PACKETS=$1 FW_REPLAY_CONNS=$CONNS FW_REPLAY_PROTO=$PROTO \
  FW_REPLAY_PLAIN=$PLAIN valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$1" "$BIN" \
    --exact cmd::bench_firewall::replay::firewall_replay_counts --test-threads=1 \
    >/dev/null 2>"$TMP/log.$1" || { cat "$TMP/log.$1" >&2; exit 1; }
  grep -m1 '^summary\|^totals' "$TMP/cg.$1" | awk '{print $2}'
}
a=$(total 100000); b=$(total 300000)
echo "proto=$PROTO conns=$CONNS plain=$PLAIN hints=$HINTS instr_per_packet=$(( (b - a) / 200000 ))"
