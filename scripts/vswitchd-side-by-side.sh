#!/usr/bin/env bash
# vswitchd-side-by-side.sh [N_FLOWS] [REPS]   (defaults 100000, 3)
#
# Real ovs-vswitchd (OVS) and `flowswitch vswitchd` (ours), each with its own private
# ovsdb-server on OVS's schema, in fresh directories per rep, interleaved (OVS then ours on odd
# reps, ours then OVS on even ones). Per rep and daemon:
#   ovs-vsctl add-br br0 -- set bridge br0 datapath_type=dummy fail-mode=secure
#   time ovs-ofctl add-flows br0 FILE           (wall, and the client's own user+sys CPU)
#   time ovs-ofctl dump-flows br0 > /dev/null
#   VmRSS / VmHWM of the daemon (after the load and the dump)
#   ovs-ofctl del-flows br0
#   time ovs-ofctl -O OpenFlow14 --bundle add-flows br0 FILE
# and after each load `ovs-ofctl dump-aggregate br0` must show the same flow_count on both.
# FILE: the first N_FLOWS flows of a ClassBench set (`flowswitch gen-flows`, ranges expanded).
# Nothing is pinned (both daemons and the client float over all CPUs alike).
# Env: FLOWSWITCH (binary; default target/release/flowswitch, built if missing), RULES
# (ClassBench file; default ../shared/classbench/acl1_100k.gz), KEEP=1 keeps the scratch dir.
set -euo pipefail
N=${1:-100000}
REPS=${2:-3}
REPO=$(cd "$(dirname "$0")/.." && pwd)
TD=${CARGO_TARGET_DIR:-$REPO/target}
FS=${FLOWSWITCH:-$TD/release/flowswitch}
[ -x "$FS" ] || (cd "$REPO" && cargo build --release -q -p flowswitch)
RULES=${RULES:-$REPO/../shared/classbench/acl1_100k.gz}
SCHEMA=${SCHEMA:-/usr/share/openvswitch/vswitch.ovsschema}
for p in ovsdb-server ovsdb-tool ovs-vswitchd ovs-vsctl ovs-ofctl; do
  command -v $p >/dev/null || { echo "$p not installed (apt-get install openvswitch-switch)" >&2; exit 1; }
done
D=$(mktemp -d "${TMPDIR:-/tmp}/vswitchd-sbs.XXXXXX")
CUR=""
stop() {
  local dir=$1
  [ -n "$dir" ] || return 0
  for f in "$dir"/ovs-vswitchd.pid "$dir"/ovsdb-server.pid; do
    [ -f "$f" ] || continue
    local p; p=$(cat "$f")
    kill "$p" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  done
}
cleanup() { stop "$CUR"; [ "${KEEP:-0}" = 1 ] || rm -rf "$D"; }
trap cleanup EXIT

FILE=$D/flows.txt
"$FS" gen-flows --rules "$RULES" --max-flows "$N" -o "$FILE"
NF=$(wc -l < "$FILE")

# start WHO DIR: ovsdb-server and the daemon in DIR.
start() {
  local who=$1 dir=$2
  mkdir -p "$dir"
  ovsdb-tool create "$dir/conf.db" "$SCHEMA"
  ovsdb-server --no-chdir --remote=punix:"$dir/db.sock" --unixctl="$dir/ovsdb-server.ctl" \
    --log-file="$dir/ovsdb-server.log" -vconsole:off --pidfile="$dir/ovsdb-server.pid" \
    --detach "$dir/conf.db" 2>/dev/null
  export OVS_RUNDIR=$dir OVS_LOGDIR=$dir OVS_DBDIR=$dir
  ovs-vsctl --db=unix:"$dir/db.sock" --no-wait init
  local d=(ovs-vswitchd)
  [ "$who" = ours ] && d=("$FS" vswitchd)
  "${d[@]}" unix:"$dir/db.sock" --pidfile --detach --no-chdir --log-file="$dir/vswitchd.log" \
    -vconsole:off --enable-dummy=override --disable-system 2>/dev/null
  ovs-vsctl --db=unix:"$dir/db.sock" --timeout=30 add-br br0 -- set bridge br0 \
    datapath_type=dummy fail-mode=secure
}

# timed OUTVAR CMD...: runs CMD (stdout to /dev/null); OUTVAR="wall user sys" (seconds).
timed() {
  local __v=$1; shift
  local __t
  __t=$( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null; } 2>&1 ) || { echo "failed: $* ($__t)" >&2; exit 1; }
  printf -v "$__v" '%s' "$(tail -1 <<<"$__t")"
}
count() { ovs-ofctl dump-aggregate br0 | sed -n 's/.*flow_count=\([0-9]*\).*/\1/p'; }
# dcpu PID: the daemon's user+sys CPU so far (s), all threads.
dcpu() { awk -v t="$(getconf CLK_TCK)" '{sub(/.*\) /, ""); print ($12 + $13) / t}' "/proc/$1/stat"; }
rss() { awk '/^VmRSS/{r=$2} /^VmHWM/{h=$2} END{printf "%.1f %.1f", r/1024, h/1024}' "/proc/$1/status"; }

declare -A R
run_one() {
  local who=$1 rep=$2 dir=$D/$who-$rep
  CUR=$dir
  start "$who" "$dir"
  local pid; pid=$(cat "$dir/ovs-vswitchd.pid")
  local t c0
  c0=$(dcpu "$pid")
  timed t ovs-ofctl --timeout=600 add-flows br0 "$FILE"
  R[$who,add,$rep]=$t
  R[$who,dadd,$rep]=$(awk -v a="$c0" -v b="$(dcpu "$pid")" 'BEGIN{print b - a}')
  R[$who,n1,$rep]=$(count)
  timed t ovs-ofctl --timeout=600 dump-flows br0
  R[$who,dump,$rep]=$t
  R[$who,rss,$rep]=$(rss "$pid")
  ovs-ofctl del-flows br0
  c0=$(dcpu "$pid")
  timed t ovs-ofctl --timeout=600 -O OpenFlow14 --bundle add-flows br0 "$FILE"
  R[$who,bundle,$rep]=$t
  R[$who,dbundle,$rep]=$(awk -v a="$c0" -v b="$(dcpu "$pid")" 'BEGIN{print b - a}')
  R[$who,n2,$rep]=$(count)
  stop "$dir"
  CUR=""
  echo "rep $rep $who: add-flows ${R[$who,add,$rep]} (wall user sys) daemon CPU ${R[$who,dadd,$rep]} n=${R[$who,n1,$rep]};" \
    "dump ${R[$who,dump,$rep]}; rss/hwm MB ${R[$who,rss,$rep]}; bundle ${R[$who,bundle,$rep]} daemon CPU ${R[$who,dbundle,$rep]}" \
    "n=${R[$who,n2,$rep]}" >&2
}

for rep in $(seq "$REPS"); do
  if [ $((rep % 2)) = 1 ]; then order="ovs ours"; else order="ours ovs"; fi
  for who in $order; do run_one "$who" "$rep"; done
  for k in n1 n2; do
    [ "${R[ovs,$k,$rep]}" = "${R[ours,$k,$rep]}" ] ||
      { echo "rep $rep: flow_count differs ($k): OVS ${R[ovs,$k,$rep]} ours ${R[ours,$k,$rep]}" >&2; exit 1; }
  done
done

# med WHO KEY FIELD: median over reps of field FIELD (1-based) of R[WHO,KEY,rep].
med() {
  for rep in $(seq "$REPS"); do echo "${R[$1,$2,$rep]}" | awk -v f="$3" '{print $f}'; done |
    sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'
}
cpu() { # median client user+sys of KEY
  for rep in $(seq "$REPS"); do echo "${R[$1,$2,$rep]}" | awk '{print $2+$3}'; done |
    sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'
}
echo "flows=$NF (first $N of $(basename "$RULES"), ranges expanded) reps=$REPS nproc=$(nproc) load: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%FT%TZ)"
echo "flow_count after add-flows and --bundle: ${R[ovs,n1,1]} / ${R[ovs,n2,1]} (same on both)"
printf '%-28s %12s %12s %10s\n' "median" "OVS" "ours" "ours/OVS"
row() { # label ovs ours [fmt]
  awk -v l="$1" -v a="$2" -v b="$3" 'BEGIN{printf "%-28s %12.3f %12.3f %10.2f\n", l, a, b, (a>0? b/a : 0)}'
}
rowi() {
  awk -v l="$1" -v a="$2" -v b="$3" 'BEGIN{printf "%-28s %12.0f %12.0f %10.2f\n", l, a, b, (a>0? b/a : 0)}'
}
ao=$(med ovs add 1); au=$(med ours add 1)
row "add-flows s" "$ao" "$au"
rowi "add-flows flows/s" "$(awk -v n="$NF" -v t="$ao" 'BEGIN{print n/t}')" "$(awk -v n="$NF" -v t="$au" 'BEGIN{print n/t}')"
row "  client CPU s (user+sys)" "$(cpu ovs add)" "$(cpu ours add)"
row "  daemon CPU s (user+sys)" "$(med ovs dadd 1)" "$(med ours dadd 1)"
bo=$(med ovs bundle 1); bu=$(med ours bundle 1)
row "--bundle add-flows s" "$bo" "$bu"
rowi "--bundle flows/s" "$(awk -v n="$NF" -v t="$bo" 'BEGIN{print n/t}')" "$(awk -v n="$NF" -v t="$bu" 'BEGIN{print n/t}')"
row "  client CPU s (user+sys)" "$(cpu ovs bundle)" "$(cpu ours bundle)"
row "  daemon CPU s (user+sys)" "$(med ovs dbundle 1)" "$(med ours dbundle 1)"
row "dump-flows s" "$(med ovs dump 1)" "$(med ours dump 1)"
row "  client CPU s (user+sys)" "$(cpu ovs dump)" "$(cpu ours dump)"
row "RSS MB after load+dump" "$(med ovs rss 1)" "$(med ours rss 1)"
row "peak RSS (VmHWM) MB" "$(med ovs rss 2)" "$(med ours rss 2)"
