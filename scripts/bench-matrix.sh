#!/bin/bash
# Run ovs-bench's OVS-DPDK matrix (matrix_dpdk.sh's rows) for real Open vSwitch and for
# `flowswitch bench datapath`, interleaved rep by rep (OVS rep 1, ours rep 1, OVS rep 2, …
# on the same pcap, both PMDs pinned to the same core), and write a markdown ratio table.
#
# usage (as root):  scripts/bench-matrix.sh OUT.md
#   env: T=5          measured seconds per repetition (after a 1 s warm-up, as dpdk-measure.sh)
#        REPS=3       repetitions per row (medians are reported)
#        CORE=1       PMD core (OVS's pmd-cpu-mask in dpdk-preconf.sh is 0x2 = core 1)
#        ONLY=REGEX   run only the rows whose label matches (grep -E)
#        OVSB_DIR=../shared/ovs-bench   the ovs-bench scripts (default: beside this checkout;
#                                       shared data, not in this repository: the script stops
#                                       and says so when they are absent)
#        FS=path      the flowswitch binary (default: cargo build --release -p flowswitch)
#        FS_REV=text  what that binary was built from (default: this checkout's HEAD[-dirty])
#
# Setup it performs when missing: apt-get install openvswitch-switch-dpdk tcpreplay
# librte-net-null23 (DPDK's null PMD, needed for OVS's output port),
# 1024 x 2 MiB hugepages, make-pcaps.sh. OVS is started with dpdk-start.sh and always
# stopped with ovs-stop.sh (by PID). While flowswitch runs, ovs-vswitchd is frozen (SIGSTOP
# to its PID, SIGCONT after) so its PMD does not poll on the same core.
# Raw lines (dpdk-measure.sh's format, both sides) are kept next to OUT as OUT.ovs.txt and
# OUT.flowswitch.txt; summarize.py reads either.
set -u
OUT=${1:?usage: bench-matrix.sh OUT.md}
T=${T:-5}; REPS=${REPS:-3}; CORE=${CORE:-1}; ONLY=${ONLY:-.}
REPO=$(cd "$(dirname "$0")/.." && pwd)
D=${OVSB_DIR:-$REPO/../shared/ovs-bench}
if [ ! -f "$D/env.sh" ]; then
  echo "bench-matrix: $D/env.sh not found. The ovs-bench scripts (env.sh, make-pcaps.sh," >&2
  echo "  dpdk-start.sh, ...) are not part of this repository: they are in the project's shared" >&2
  echo "  data folder (../shared/ovs-bench beside a checkout that has it); set OVSB_DIR to" >&2
  echo "  their directory." >&2
  exit 1
fi
. "$D/env.sh"
P=/tmp/ovsb/pcap
REV=${FS_REV:-$(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null)$(cd "$REPO" && git diff --quiet HEAD 2>/dev/null || echo -dirty)}
RAW_OVS=$OUT.ovs.txt; RAW_FS=$OUT.flowswitch.txt
: > "$RAW_OVS"; : > "$RAW_FS"

[ "$(id -u)" = 0 ] || { echo "bench-matrix: run as root" >&2; exit 1; }
[ "$CORE" = 1 ] || echo "bench-matrix: note: OVS's PMD is pinned to core 1 (dpdk-preconf.sh), ours to $CORE" >&2

# --- setup ---------------------------------------------------------------------------------
# librte-net-null23: Debian ships DPDK's null PMD (the output port) as its own package.
if [ ! -x /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk ] || ! command -v tcpreplay >/dev/null \
   || ! ls /usr/lib/x86_64-linux-gnu/dpdk/pmds-*/librte_net_null.so* >/dev/null 2>&1; then
  apt-get install -y openvswitch-switch-dpdk tcpreplay librte-net-null23 >/dev/null \
    || { echo "apt-get failed" >&2; exit 1; }
fi
HP=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
[ "$(cat $HP)" -ge 1024 ] || echo 1024 > $HP
[ -f $P/sub10_100k.pcap ] || "$D/make-pcaps.sh" >/dev/null
if [ -z "${FS:-}" ]; then
  (cd "$REPO" && cargo build --release -q -p flowswitch) || exit 1
  FS=${CARGO_TARGET_DIR:-$REPO/target}/release/flowswitch
fi
[ -x "$FS" ] || { echo "bench-matrix: no flowswitch binary at $FS" >&2; exit 1; }

"$D/ovs-stop.sh" >/dev/null 2>&1   # a previous private instance (by PID file only)
VPID=""
trap '[ -n "$VPID" ] && kill -CONT "$VPID" 2>/dev/null; "$D/ovs-stop.sh" >/dev/null 2>&1' EXIT
"$D/dpdk-start.sh" >&2 || exit 1
VPID=$(cat "$OVS_RUNDIR/ovs-vswitchd.pid")
ERR=$(vsctl get Interface out0 error 2>&1)
[ "$ERR" = "[]" ] || { echo "bench-matrix: OVS output port out0 failed: $ERR" >&2; exit 1; }

# --- the rows (matrix_dpdk.sh's, same order and labels) --------------------------------------
CUR=""
row() { # flowset pcap emc-inv-prob smc label
  local rules=$1 pcap=$2 inv=$3 smc=$4 label=$5
  echo "$label" | grep -qE "$ONLY" || return 0
  # OVS, exactly as matrix_dpdk.sh's run()
  [ "$CUR" != "$pcap" ] && { "$D/dpdk-setin.sh" "$P/$pcap.pcap" >&2; CUR=$pcap; }
  "$D/flows.sh" "$rules" 1 2
  vsctl set Open_vSwitch . other_config:emc-insert-inv-prob=$inv other_config:smc-enable=$smc
  appctl revalidator/purge >/dev/null; sleep 1
  local emc=on; [ "$inv" = 0 ] && emc=off
  local smcf=off; [ "$smc" = true ] && smcf=on
  # OVS and ours alternate rep by rep (A B A B …), so that both sample the same stretches of
  # a noisy machine rather than one taking the first half of the row and the other the second.
  for r in $(seq 1 "$REPS"); do
    "$D/dpdk-measure.sh" "$label rep$r" "$T" | tee -a "$RAW_OVS"
    # freeze OVS (SIGSTOP by PID) while ours runs: its PMD would otherwise keep polling core 1
    # (removing its rx port is not enough: the PMD thread spins on with no rx queue)
    kill -STOP "$VPID"; sleep 0.5
    case $(ps -o stat= -p "$VPID") in T*) ;; *) echo "bench-matrix: OVS not frozen" >&2;; esac
    "$FS" bench datapath --rules "$rules" --pcap "$P/$pcap.pcap" --emc $emc --smc $smcf \
        --seconds "$T" --reps 1 --core "$CORE" --label "flowswitch $label" 2>&1 \
      | grep -E ' rep[0-9]+ Mpps=|^#' | sed "s/^flowswitch //; s/ rep1 Mpps=/ rep$r Mpps=/" \
      | tee -a "$RAW_FS"
    kill -CONT "$VPID"
  done
}
row simple f1         100 false "simple(in_port only) 1flow"
row l3     f1         100 false "l3 1flow emc=on"
row l3     f1         0   false "l3 1flow emc=off"
row l3     f1k        100 false "l3 1k emc=on"
row l3     f1k        0   false "l3 1k emc=off"
row l3     f10k       100 false "l3 10k emc=on"
row l3     f10k       0   false "l3 10k emc=off"
row l3     f10k       0   true  "l3 10k emc=off smc=on"
row l3     f100k      100 false "l3 100k emc=on"
row l3     f100k      0   false "l3 100k emc=off"
row sub10  sub10_10   100 false "sub10 10flows emc=on"
row sub10  sub10_10   0   false "sub10 10flows emc=off"
row sub10  sub10_1k   100 false "sub10 1k emc=on"
row sub10  sub10_1k   0   false "sub10 1k emc=off"
row sub10  sub10_10k  100 false "sub10 10k emc=on"
row sub10  sub10_10k  0   false "sub10 10k emc=off"
row sub10  sub10_10k  0   true  "sub10 10k emc=off smc=on"
row sub10  sub10_100k 100 false "sub10 100k emc=on"
row sub10  sub10_100k 0   false "sub10 100k emc=off"
vsctl remove Open_vSwitch . other_config emc-insert-inv-prob
vsctl remove Open_vSwitch . other_config smc-enable

# --- the table -------------------------------------------------------------------------------
MACHINE="$(nproc) vCPU $(lscpu | sed -n 's/^Model name: *//p' | head -1), kernel $(uname -r)"
python3 - "$RAW_OVS" "$RAW_FS" "$OUT" "$T" "$REPS" "$MACHINE" "$REV" <<'EOF'
import re, sys, statistics as st, datetime
from collections import OrderedDict
ovs_path, fs_path, out, T, reps, machine, rev = sys.argv[1:8]
def load(path):
    rows = OrderedDict()
    for l in open(path):
        m = re.match(r'(.*) rep\d+ (Mpps=.*)', l.strip())
        if not m: continue
        kv = dict(x.split('=', 1) for x in m.group(2).split() if '=' in x)
        rows.setdefault(m.group(1), []).append(kv)
    return rows
ovs, fs = load(ovs_path), load(fs_path)
def med(v, k):
    xs = [float(x[k]) for x in v if k in x]
    return st.median(xs) if xs else float('nan')
def rng(v, k):
    xs = [int(float(x[k])) for x in v if k in x]
    return f"{min(xs)}–{max(xs)}" if xs else "?"
now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
L = [f"Measured {now} on {machine}; flowswitch {rev}; OVS-DPDK 3.1 via ovs-bench; "
     f"one PMD pinned to core 1 each, alternating rep by rep; median of {reps} × {T} s. "
     "Mpps is wall-clock rate; cpu% is the share of wall time the PMD thread was on a CPU "
     "(other load steals the rest), so Mpps/cpu (packets per on-CPU second) is the figure "
     "that stays comparable on a busy machine.", "",
     "| row | OVS Mpps | flowswitch Mpps | ratio | OVS cyc/pkt | flowswitch cyc/pkt | "
     "OVS cpu% | flowswitch cpu% | OVS Mpps/cpu | flowswitch Mpps/cpu | ratio per cpu | "
     "subtbl/hit OVS / ours |",
     "|---|---|---|---|---|---|---|---|---|---|---|---|"]
for k in ovs:
    o = ovs[k]; f = fs.get(k, [])
    om, fm = med(o, 'Mpps'), med(f, 'Mpps')
    oc, fc = med(o, 'Mpps_per_cpu'), med(f, 'Mpps_per_cpu')
    r = fm / om if om else float('nan'); rc = fc / oc if oc else float('nan')
    sub = f"{o[0].get('subtbl/hit', '?')} / {f[0].get('subtbl/hit', '?') if f else '?'}"
    L.append(f"| {k} | {om:.2f} | {fm:.2f} | **{r:.2f}×** | {med(o, 'cyc/pkt'):.0f} | "
             f"{med(f, 'cyc/pkt'):.0f} | {rng(o, 'cpu%')} | {rng(f, 'cpu%')} | {oc:.2f} | "
             f"{fc:.2f} | {rc:.2f}× | {sub} |")
open(out, 'w').write('\n'.join(L) + '\n')
print('\n'.join(L))
EOF
