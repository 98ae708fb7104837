#!/usr/bin/env bash
# northd-mem.sh NODES [gen-nb options...]
#
# Our side only: `flowswitch northd` between its own NB and SB ovsdb-servers on a
# `flowswitch gen-nb` NB; prints its VmHWM / VmRSS after the initial build (first
# `--wait=sb sync`), after a full recompute (a second `--wait=sb sync`) and after one LSP
# add, and the daemon's logged compute / sync ms of those rounds.
# Env: RUNS (default 1: fresh servers and daemon each run), THREADS (default 1), FLOWSWITCH
# (binary, default $CARGO_TARGET_DIR or target/, release), WRAP (a command put before the
# daemon, e.g. "heaptrack -o /tmp/h"; then the figures are the wrapper's), DAEMON (a command
# run instead of `flowswitch northd`, given the NB and SB targets), KEEP=1 keeps the scratch
# directory.
set -euo pipefail
N=${1:?usage: $0 NODES [gen-nb options]}; shift
RUNS=${RUNS:-1}
THREADS=${THREADS:-1}
REPO=$(cd "$(dirname "$0")/.." && pwd)
FS=${FLOWSWITCH:-${CARGO_TARGET_DIR:-$REPO/target}/release/flowswitch}
[ -x "$FS" ] || { echo "no $FS: cargo build --release -p flowswitch" >&2; exit 1; }
D=$(mktemp -d "${TMPDIR:-/tmp}/northd-mem.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ "${KEEP:-0}" = 1 ] || rm -rf "$D"
}
trap cleanup EXIT
"$FS" gen-nb --nodes "$N" "$@" -o "$D/nb.db"
kb() { [ -r "/proc/$1/status" ] || { echo 0; return; }; awk -v k="$2" '$1 == k":" {printf "%.0f", $2/1024}' "/proc/$1/status"; }
nbctl() { ovn-nbctl --no-leader-only --db=unix:"$D/nb.sock" --timeout=900 "$@"; }
for run in $(seq "$RUNS"); do
  rm -f "$D"/*.sock "$D"/sb.db "$D"/run-nb.db
  cp "$D/nb.db" "$D/run-nb.db"
  ovsdb-tool create "$D/sb.db" /usr/share/ovn/ovn-sb.ovsschema
  SP=()
  for x in nb sb; do
    db=$D/sb.db; [ $x = nb ] && db=$D/run-nb.db
    ovsdb-server --no-chdir --remote=punix:"$D/$x.sock" --unixctl="$D/$x.ctl" \
      --log-file="$D/$x.log" -vconsole:off "$db" </dev/null >/dev/null 2>&1 &
    SP+=($!); PIDS+=($!)
  done
  for x in nb sb; do
    for _ in $(seq 1200); do [ -S "$D/$x.sock" ] && break; sleep 0.05; done
  done
  t0=$(date +%s%N)
  if [ -n "${DAEMON:-}" ]; then
    # shellcheck disable=SC2086
    ${WRAP:-} $DAEMON unix:"$D/nb.sock" unix:"$D/sb.sock" >/dev/null 2>"$D/northd.log" &
  else
    # shellcheck disable=SC2086
    ${WRAP:-} "$FS" northd --nb-db unix:"$D/nb.sock" --sb-db unix:"$D/sb.sock" \
      --n-threads "$THREADS" >/dev/null 2>"$D/northd.log" &
  fi
  P=$!; PIDS+=($P)
  nbctl --wait=sb sync
  ti=$(( ($(date +%s%N) - t0) / 1000000 ))
  h1=$(kb $P VmHWM); r1=$(kb $P VmRSS)
  ts=$(nbctl --print-wait-time --wait=sb sync | awk '/completion/{gsub("ms","",$NF); print $NF}')
  h2=$(kb $P VmHWM); r2=$(kb $P VmRSS)
  ta=$(nbctl --print-wait-time --wait=sb lsp-add node-0 mem-pod \
      -- lsp-set-addresses mem-pod "0a:58:0a:80:00:fe 10.128.0.254" |
      awk '/completion/{gsub("ms","",$NF); print $NF}')
  h3=$(kb $P VmHWM); r3=$(kb $P VmRSS)
  echo "run $run nodes=$N threads=$THREADS load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "  initial build ${ti} ms: HWM ${h1} MB RSS ${r1} MB"
  echo "  full recompute ${ts} ms: HWM ${h2} MB RSS ${r2} MB"
  echo "  LSP add ${ta} ms: HWM ${h3} MB RSS ${r3} MB"
  sed 's/^/  log: /' "$D/northd.log" | tail -4
  # A wrapper's children (the daemon under WRAP) first, then the daemon and the servers.
  for c in $(pgrep -P "$P" || true); do kill "$c" 2>/dev/null || true; done
  kill "$P" "${SP[@]}" 2>/dev/null || true
  wait "$P" 2>/dev/null || true
  wait "${SP[@]}" 2>/dev/null || true
  [ "${KEEP:-0}" = 1 ] && cp "$D/northd.log" "$D/northd-$run.log"
done
