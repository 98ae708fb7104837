#!/usr/bin/env bash
# northd-side-by-side.sh NODES [gen-nb options...]
#
# Real ovn-northd (A) and `flowswitch northd` (B) on the same NB (the OVN benchmark
# topology written by `flowswitch gen-nb`), each between its own pair of ovsdb-servers,
# measured interleaved A, B, A, B…:
#   - initial build into an empty SB (wall time of the first `--wait=sb sync`),
#   - full recompute: `ovn-nbctl --print-wait-time --wait=sb sync` completion ms (both
#     northds recompute everything on a new nb_cfg),
#   - one LSP add (`lsp-add` + addresses, --wait=sb) completion ms, and the part of it
#     before the northd started its round ("delay before processing": nbctl's
#     transaction through the NB ovsdb-server and its update reaching the northd; both
#     northds write NB_Global.nb_cfg_timestamp when they start), and the difference
#     (the northd's own part: its round and the SB commit),
#   - the same add from a long-lived NB client (scripts/nb-lsp-add-latency.py: one
#     connection, the transaction ovn-nbctl sends, waits for sb_cfg as --wait=sb does), the
#     way a CMS drives OVN, CADDS (default 4) adds in a row per rep and northd; ovn-nbctl is a new client per command, and ovsdb-server spends
#     10-15 ms on the first transaction after a new client's monitor at 800 nodes,
#   - peak RSS (VmHWM) of each northd.
# Env: REPS (default 5), CADDS (default 4), THREADS (default 1: both northds' --n-threads), FLOWSWITCH (binary,
# default target/release/flowswitch), KEEP=1 keeps the scratch directory.
# Needs ovn-central (ovsdb-server, ovn-northd, ovn-nbctl) and the NB/SB schemas.
set -euo pipefail
N=${1:?usage: $0 NODES [gen-nb options]}; shift
REPS=${REPS:-5}
THREADS=${THREADS:-1}
REPO=$(cd "$(dirname "$0")/.." && pwd)
FS=${FLOWSWITCH:-$REPO/target/release/flowswitch}
[ -x "$FS" ] || (cd "$REPO" && cargo build --release -q -p flowswitch)
for p in ovsdb-server ovsdb-tool ovn-northd ovn-nbctl; do
  command -v $p >/dev/null || { echo "$p not installed (apt-get install ovn-central)" >&2; exit 1; }
done
D=$(mktemp -d "${TMPDIR:-/tmp}/northd-sbs.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$D/a-northd.pid" ] && kill "$(cat "$D/a-northd.pid")" 2>/dev/null || true
  [ "${KEEP:-0}" = 1 ] || rm -rf "$D"
}
trap cleanup EXIT

"$FS" gen-nb --nodes "$N" "$@" -o "$D/nb.db"
for s in a b; do
  cp "$D/nb.db" "$D/$s-nb.db"
  ovsdb-tool create "$D/$s-sb.db" /usr/share/ovn/ovn-sb.ovsschema
  for x in nb sb; do
    ovsdb-server --no-chdir --remote=punix:"$D/$s-$x.sock" --unixctl="$D/$s-$x.ctl" \
      --log-file="$D/$s-$x.log" -vconsole:off "$D/$s-$x.db" </dev/null >/dev/null 2>&1 &
    PIDS+=($!)
  done
done
for s in a b; do for x in nb sb; do
  for _ in $(seq 2400); do [ -S "$D/$s-$x.sock" ] && break; sleep 0.05; done
done; done
nbctl() { ovn-nbctl --no-leader-only --db=unix:"$D/$1-nb.sock" --timeout=900 "${@:2}"; }
ms_of() { awk '/completion/{gsub("ms","",$NF); print $NF}'; }
# "DELAY COMPLETION" of one --print-wait-time output.
both_of() { awk '/delay before/{gsub("ms","",$NF); d=$NF} /completion/{gsub("ms","",$NF); c=$NF} END{print d, c}'; }
hwm() { awk '/^VmHWM/{printf "%.0f", $2/1024}' "/proc/$1/status"; }

t0=$(date +%s%N)
ovn-northd --no-chdir --ovnnb-db=unix:"$D/a-nb.sock" --ovnsb-db=unix:"$D/a-sb.sock" \
  --unixctl="$D/a-northd.ctl" --log-file="$D/a-northd.log" -vconsole:off \
  --n-threads="$THREADS" --detach --pidfile="$D/a-northd.pid"
nbctl a --wait=sb sync
ta=$(( ($(date +%s%N) - t0) / 1000000 ))
APID=$(cat "$D/a-northd.pid")
t0=$(date +%s%N)
"$FS" northd --nb-db unix:"$D/b-nb.sock" --sb-db unix:"$D/b-sb.sock" --n-threads "$THREADS" \
  2>"$D/b-northd.log" &
BPID=$!; PIDS+=($BPID)
nbctl b --wait=sb sync
tb=$(( ($(date +%s%N) - t0) / 1000000 ))

sync_a=(); sync_b=(); add_a=(); add_b=(); delay_a=(); delay_b=(); own_a=(); own_b=()
for r in $(seq "$REPS"); do
  sync_a+=("$(nbctl a --print-wait-time --wait=sb sync | ms_of)")
  sync_b+=("$(nbctl b --print-wait-time --wait=sb sync | ms_of)")
done
for r in $(seq "$REPS"); do
  for s in a b; do
    read -r d v < <(nbctl $s --print-wait-time --wait=sb lsp-add node-0 "sbs-pod-$r" \
        -- lsp-set-addresses "sbs-pod-$r" "0a:58:0a:80:00:$(printf %02x $((200 + r))) 10.128.0.$((200 + r))" | both_of)
    if [ $s = a ]; then
      add_a+=("$v"); delay_a+=("$d"); own_a+=("$((v - d))")
    else
      add_b+=("$v"); delay_b+=("$d"); own_b+=("$((v - d))")
    fi
  done
done
# The same add from a long-lived NB client (as a CMS such as ovn-kubernetes holds one): each
# ovn-nbctl run above is a new client, and ovsdb-server 3.1 takes 10-15 ms over the first
# transaction after a client's monitor request at 800 nodes (see nb-lsp-add-latency.py).
cadd_a=(); cadd_b=(); cdelay_a=(); cdelay_b=()
CADDS=${CADDS:-4}
for r in $(seq "$REPS"); do
  for s in a b; do
    while read -r line; do
      d=$(sed -n 's/.*delay_ms=\(-\?[0-9]*\).*/\1/p' <<<"$line")
      v=$(sed -n 's/.*completion_ms=\([0-9]*\).*/\1/p' <<<"$line")
      if [ $s = a ]; then cadd_a+=("$v"); cdelay_a+=("$d"); else cadd_b+=("$v"); cdelay_b+=("$d"); fi
    done < <(python3 "$REPO/scripts/nb-lsp-add-latency.py" "$D/$s-nb.sock" node-1 "$CADDS" "sbs-cli-$r-" $((100 + 10 * r)))
  done
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
lfa=$(ovn-sbctl --db=unix:"$D/a-sb.sock" --columns=_uuid list Logical_Flow | grep -c _uuid || true)
lfb=$(ovn-sbctl --db=unix:"$D/b-sb.sock" --columns=_uuid list Logical_Flow | grep -c _uuid || true)
echo "nodes=$N args='$*' threads=$THREADS reps=$REPS load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %14s %14s %8s\n' "" "ovn-northd" "flowswitch" "ratio"
printf '%-34s %14s %14s %8s\n' "SB Logical_Flow rows" "$lfa" "$lfb" ""
printf '%-34s %14s %14s %8.3f\n' "initial build, wall ms" "$ta" "$tb" "$(echo "$tb / $ta" | bc -l)"
ma=$(med "${sync_a[@]}"); mb=$(med "${sync_b[@]}")
printf '%-34s %14s %14s %8.3f\n' "full recompute (sync), median ms" "$ma" "$mb" "$(echo "$mb / $ma" | bc -l)"
ma=$(med "${add_a[@]}"); mb=$(med "${add_b[@]}")
printf '%-34s %14s %14s %8.3f\n' "one LSP add, median ms" "$ma" "$mb" "$(echo "$mb / $ma" | bc -l)"
ma=$(med "${delay_a[@]}"); mb=$(med "${delay_b[@]}")
printf '%-34s %14s %14s\n' "  of which before the round, ms" "$ma" "$mb"
ma=$(med "${own_a[@]}"); mb=$(med "${own_b[@]}")
printf '%-34s %14s %14s %8.3f\n' "  the northd's own part, ms" "$ma" "$mb" "$(echo "$mb / $ma" | bc -l)"
ma=$(med "${cadd_a[@]}"); mb=$(med "${cadd_b[@]}")
printf '%-34s %14s %14s %8.3f\n' "one LSP add, long-lived client, ms" "$ma" "$mb" "$(echo "$mb / $ma" | bc -l)"
ma=$(med "${cdelay_a[@]}"); mb=$(med "${cdelay_b[@]}")
printf '%-34s %14s %14s\n' "  of which before the round, ms" "$ma" "$mb"
ha=$(hwm "$APID"); hb=$(hwm "$BPID")
printf '%-34s %14s %14s %8.3f\n' "peak RSS (VmHWM), MB" "$ha" "$hb" "$(echo "$hb / $ha" | bc -l)"
echo "all samples: sync A ${sync_a[*]} | sync B ${sync_b[*]} | add A ${add_a[*]} | add B ${add_b[*]} | delay A ${delay_a[*]} | delay B ${delay_b[*]} | client add A ${cadd_a[*]} | client add B ${cadd_b[*]} | client delay A ${cdelay_a[*]} | client delay B ${cdelay_b[*]}"
