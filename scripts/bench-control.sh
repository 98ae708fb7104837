#!/bin/bash
# Issue #13's benchmark: megaflow learning through real upcalls, real OVS-DPDK 3.1 against
# `flowswitch bench control`, interleaved rep by rep (OVS rep, ours, OVS rep, ours, ...; both
# PMDs pinned to core 1), and a markdown table with the issue's goals.
#
# usage (as root):  scripts/bench-control.sh OUT.md
#   env: NS="10000 100000 1000000"   flow counts (N distinct frames = N megaflows)
#        REPS=3       repetitions per N (medians are reported)
#        CORE=1       our PMD's core (OVS's pmd-cpu-mask in dpdk-preconf.sh is 0x2 = core 1)
#        PFX=20000    sacrificial frames before each once-replayed pcap (see below)
#        LIMIT=4000000   OVS flow-limit (other_config) and upcall/set-flow-limit
#        POLL_MS=2    how often the poller asks OVS for its megaflow count
#        DUMP_MAX=100000  largest N at which OVS's dpctl/dump-flows is timed once per rep
#        FW_DIR=/work/shared/ovs-bench/firewall   the helper scripts (env.sh, ovs-start.sh, ...)
#        WORK=/tmp/ctlbench-flowswitch   private dir: script copies, pcaps (kept), OVS instance
#        FS=path      the flowswitch binary (default: cargo build --release -p flowswitch)
#        FS_REV=text  what that binary was built from (default: this checkout's HEAD[-dirty])
#        TSC_HZ=hz    TSC frequency for OVS's cycle-based rate (default: the kernel's, dmesg)
#
# The frames and rules are flowswitch's own (`bench control --write-pcap/--write-flows`): N
# 60-byte UDP frames 10.0.0.1 -> 10.0.0.2, each with its own source MAC, and flows.sh's l3
# rules below a 64-MAC deny list (`in_port=1,dl_src=M,actions=drop`). The deny list's
# subtable misses on dl_src, which OVS then un-wildcards whole (no prefix trie on MACs), so
# OVS too makes one megaflow per frame
# (recirc_id(0),in_port(1),eth(src=M),eth_type(0x0800),ipv4(dst=10.0.0.2,proto=17,frag=no)):
# checked by the script (OVS's megaflow count must reach N; the first megaflow is printed).
#
# OVS's set-up (private instance under $WORK/ovs, copies of FW_DIR's helpers whose env.sh
# points there; started with dpdk-preconf.sh: PMD on core 1, 1024 MiB of hugepages; stopped by
# PID, trap): other_config:flow-limit=$LIMIT and max-idle=600000 (frames are sent once, so the
# megaflows are idle at once: with the default 10 s some would expire during a 1M run), then
# `upcall/set-flow-limit $LIMIT` before each rep. OVS 3.1 has no per-PMD cap any more
# (dpif-netdev's MAX_FLOWS = 65536 was deleted in 2020, commit df5c29364); what caps its
# megaflows is ofproto's *dynamic* flow limit: it starts at min(flow-limit, 10000), grows by
# 1000 per revalidator round while dumps take < 1 s, shrinks when they take > 1.3 s (÷ seconds
# when > 2 s), and an upcall over it is executed but not installed
# (ofproto-dpif-upcall.c: should_install_flow, udpif_revalidator). set-flow-limit jumps it
# to LIMIT; the revalidator may shrink it again during a long run (then OVS installs fewer
# than N: the table says so in "OVS megaflows").
#
# One OVS rep at N: p1 removed; flows (re)installed; revalidator/purge; dpctl/del-flows;
# upcall/set-flow-limit; pmd-stats-clear; then p1 attached as a DPDK pcap PMD reading
# PFX + N frames once (no infinite_rx), while a poller (python, JSON-RPC straight to
# ovs-vswitchd's control socket, every POLL_MS) records (time, megaflows from dpctl/show,
# packets received from pmd-stats-show) until every packet is in and the count is still.
#   OVS learn/s (cycles) = megaflows learned / ((pmd-stats processing cycles - P0) / TSC Hz):
#     the PMD's own busy time (upcalls run on the PMD in dpif-netdev), as our wall time is
#     ours; P0 = the prefix's own cycles, the median of 3 attaches of the prefix alone.
#   OVS learn/s (poll) = the count's rise / time from the first sample above the base to the
#     first at N, when at least 5 samples were taken while it rose (ovs-vswitchd's main
#     thread answers nothing while it is still adding the port: a 10k run is over before the
#     first answer, and at 100k the first answer comes after a few tenths).
#   OVS first/last tenth: the crossings of k·N/10 (the first from the first sample above the
#     base); at 10k the run is a few tens of ms, so these are coarse (POLL_MS + a request).
#   PFX: the PMD polls a new port before ofproto knows it, so the first packets of an attach
#     take failed upcalls (bench-firewall.sh's finding: 3,173 of them in a trial here, more
#     than its 2,000-frame prefix); the pcap therefore starts with PFX non-IP frames
#     (ethertype 0x88b5, one megaflow: the base the count is taken from). If the race still
#     eats real frames, "OVS megaflows" shows fewer than N (their upcalls failed; counted).
# Ours at N (OVS frozen: SIGSTOP to its PID, SIGCONT after, so its PMD does not poll core 1):
#   `flowswitch bench control --flows N --core CORE --reps 1`; its last line and its learn:
#   line are kept.
# Raw lines: OUT.ovs.txt ("N=… repR key=value …", plus the poll series as OUT.ovs.series/),
# OUT.flowswitch.txt.
set -u
OUT=${1:?usage: bench-control.sh OUT.md}
NS=${NS:-"10000 100000 1000000"}; REPS=${REPS:-3}; CORE=${CORE:-1}; PFX=${PFX:-20000}
LIMIT=${LIMIT:-4000000}; POLL_MS=${POLL_MS:-2}; DUMP_MAX=${DUMP_MAX:-100000}
FW_DIR=${FW_DIR:-/work/shared/ovs-bench/firewall}
WORK=${WORK:-/tmp/ctlbench-flowswitch}
REPO=$(cd "$(dirname "$0")/.." && pwd)
REV=${FS_REV:-$(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null)$(cd "$REPO" && git diff --quiet HEAD 2>/dev/null || echo -dirty)}
RAW_OVS=$OUT.ovs.txt; RAW_FS=$OUT.flowswitch.txt; SER=$OUT.ovs.series
[ "${TABLE_ONLY:-0}" = 1 ] || { : > "$RAW_OVS"; : > "$RAW_FS"; mkdir -p "$SER"; }

if [ "${TABLE_ONLY:-0}" = 1 ]; then   # rebuild OUT from existing raw files only
  : "${OVS_VER:=3.1}" "${DPDK_VER:=?}" "${TSC_HZ:=0}"
else
[ "$(id -u)" = 0 ] || { echo "bench-control: run as root" >&2; exit 1; }
[ "$CORE" = 1 ] || echo "bench-control: note: OVS's PMD is pinned to core 1 (dpdk-preconf.sh), ours to $CORE" >&2

# --- setup ---------------------------------------------------------------------------------
if [ ! -x /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk ] \
   || ! ls /usr/lib/x86_64-linux-gnu/dpdk/pmds-*/librte_net_pcap.so* >/dev/null 2>&1; then
  apt-get install -y openvswitch-switch-dpdk librte-net-pcap23 >/dev/null \
    || { apt-get update >/dev/null && apt-get install -y openvswitch-switch-dpdk librte-net-pcap23 >/dev/null; } \
    || { echo "apt-get failed" >&2; exit 1; }
fi
B=$WORK/bin; PC=$WORK/pcap
mkdir -p "$B" "$PC"
for f in env.sh ovs-start.sh ovs-stop.sh dpdk-preconf.sh; do cp "$FW_DIR/$f" "$B/" || exit 1; done
sed -i "s|^export OVSB=.*|export OVSB=$WORK/ovs|; s|^export PCAPDIR=.*|export PCAPDIR=$PC|" "$B/env.sh"
. "$B/env.sh"
[ "$OVSB" = "$WORK/ovs" ] || { echo "bench-control: could not retarget $B/env.sh" >&2; exit 1; }
"$B/ovs-stop.sh" >/dev/null 2>&1   # a previous instance of this script (by PID file only)
OTHER=$(ps -eo pid=,args= | awk '$2 ~ /ovs-vswitchd-dpdk$/ {print $1}')
[ -z "$OTHER" ] || { echo "bench-control: another OVS-DPDK is running (pid $OTHER); not starting a second" >&2; exit 1; }

HP=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
HP0=$(cat $HP)
[ "$HP0" -ge 1024 ] || echo 1024 > $HP

if [ -z "${FS:-}" ]; then
  (cd "$REPO" && cargo build --release -q -p flowswitch) || exit 1
  FS=${CARGO_TARGET_DIR:-$REPO/target}/release/flowswitch
fi
[ -x "$FS" ] || { echo "bench-control: no flowswitch binary at $FS" >&2; exit 1; }

if [ -z "${TSC_HZ:-}" ]; then
  TSC_HZ=$(dmesg 2>/dev/null | sed -n 's/.*Refined TSC clocksource calibration: \([0-9.]*\) MHz.*/\1/p; s/.*tsc: Detected \([0-9.]*\) MHz processor.*/\1/p' \
           | tail -1 | awk '{printf "%.0f", $1 * 1e6}')
fi
[ -n "$TSC_HZ" ] || { echo "bench-control: TSC frequency unknown (dmesg); set TSC_HZ" >&2; exit 1; }

# the frames and rules, from flowswitch itself; each pcap with PFX sacrificial frames first
"$FS" bench control --flows 1 --write-flows "$PC/control.flows" || exit 1
for n in $NS; do
  if [ ! -s "$PC/control${n}_pfx$PFX.pcap" ] || [ "$PC/control${n}_pfx$PFX.pcap" -ot "$FS" ]; then
    "$FS" bench control --flows "$n" --write-pcap "$PC/control$n.pcap" || exit 1
    python3 -c '
import struct, sys
src, dst, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = open(src, "rb").read()
f = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x88\xb5" + bytes(46)
open(dst, "wb").write(d[:24] + (struct.pack("<IIII", 0, 0, 60, 60) + f) * k + d[24:])' \
      "$PC/control$n.pcap" "$PC/control${n}_pfx$PFX.pcap" "$PFX" || exit 1
    rm -f "$PC/control$n.pcap"
  fi
done
python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<IHHiIII",0xa1b2c3d4,2,4,0,0,65535,1))' $PC/empty.pcap
python3 -c '
import struct, sys
f = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x88\xb5" + bytes(46)
open(sys.argv[1], "wb").write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1) + (struct.pack("<IIII", 0, 0, 60, 60) + f) * int(sys.argv[2]))' \
  "$PC/prefix$PFX.pcap" "$PFX"

VPID=""
trap '[ -n "$VPID" ] && kill -CONT "$VPID" 2>/dev/null; "$B/ovs-stop.sh" >/dev/null 2>&1; [ "$HP0" -lt 1024 ] && echo "$HP0" > '$HP EXIT
export OVSB_PRECONF_HOOK=$B/dpdk-preconf.sh DPDK_MEM=1024
export EXTRA_PRECONF="other_config:flow-limit=$LIMIT other_config:max-idle=600000"
"$B/ovs-start.sh" /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk >&2 || exit 1
sleep 2
timeout 30 ovs-vsctl --db=unix:$DB_SOCK add-br br0 -- set bridge br0 datapath_type=netdev || exit 1
VPID=$(cat "$OVS_RUNDIR/ovs-vswitchd.pid")
CTL=$(ls $OVS_RUNDIR/ovs-vswitchd*.$VPID.ctl | head -1)
OVS_VER=$(ovs-vswitchd --version | head -1 | awk '{print $NF}')
DPDK_VER=$(vsctl get Open_vSwitch . dpdk_version | tr -d '"' | sed 's/^DPDK //')
attach_once() { # port ofport pcap: DPDK pcap PMD reading PCAP once (no infinite_rx; no tx_pcap: tx dropped)
  local t; t=$(basename "$3" .pcap | tr -c 'a-zA-Z0-9\n' '_')
  vsctl add-port br0 "$1" -- set Interface "$1" type=dpdk ofport_request=$2 options:n_rxq=1 \
       "options:dpdk-devargs=net_pcap_${t}_once_$RANDOM,rx_pcap=$3"
  local e; e=$(vsctl get Interface "$1" error); [ "$e" = "[]" ] || echo "# $1: $e" >&2
}
attach_once p2 2 $PC/empty.pcap

# The poller: JSON-RPC to the control socket (what ovs-appctl does), no process per sample.
cat > "$B/poll.py" <<'EOF'
import json, socket, sys, time, re
ctl, want_rx, out, poll_ms, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
s = socket.socket(socket.AF_UNIX); s.connect(ctl)
dec = json.JSONDecoder(); buf = ""; rid = 0
def call(method, *params):
    global buf, rid
    rid += 1
    s.sendall(json.dumps({"id": rid, "method": method, "params": list(params)}).encode())
    while True:
        try:
            msg, end = dec.raw_decode(buf)
            buf = buf[end:].lstrip()
            if msg.get("id") == rid:
                if msg.get("error"): raise RuntimeError(msg["error"])
                return msg["result"]
        except ValueError:
            chunk = s.recv(1 << 20)
            if not chunk: raise RuntimeError("control socket closed")
            buf += chunk.decode()
def sample():
    f = int(re.search(r"flows: *(\d+)", call("dpctl/show")).group(1))
    st = call("dpif-netdev/pmd-stats-show")
    m = re.search(r"pmd thread.*?packets received: *(\d+)", st, re.S)
    return f, int(m.group(1)) if m else 0
t0 = time.monotonic(); rows = []; still = None
with open(out, "w") as o:
    while True:
        t = time.monotonic() - t0
        f, rx = sample()
        rows.append((t, f, rx)); o.write(f"{t:.6f} {f} {rx}\n")
        if rx >= want_rx:
            if still is None or f != still[1]: still = (t, f)
            elif t - still[0] > 0.5: break
        if t > timeout: print("# poller timeout", file=sys.stderr); break
        time.sleep(poll_ms / 1000)
EOF

# --- OVS rep ---------------------------------------------------------------------------------
PS=$OVSB/pmd-stats.txt
g() { awk -v k="$1" 'BEGIN{p=0} /pmd thread/{p=1} p && index($0,k){sub(/.*: */,""); print $1; exit}' "$PS"; }
ovs_rep() { # n label
  local n=$1 label=$2 ser=$SER/N$1_$(echo "$2" | tr ' =' '__').txt
  vsctl --if-exists del-port br0 p1
  ofctl del-flows br0; ofctl add-flows br0 "$PC/control.flows"
  appctl revalidator/purge >/dev/null; appctl dpctl/del-flows >/dev/null
  appctl upcall/set-flow-limit "$LIMIT" >/dev/null
  sleep 0.5
  appctl dpif-netdev/pmd-stats-clear >/dev/null
  python3 "$B/poll.py" "$CTL" $((n + PFX)) "$ser" "$POLL_MS" $((60 + n / 5000)) & local pp=$!
  attach_once p1 1 "$PC/control${n}_pfx$PFX.pcap"
  wait $pp
  appctl dpif-netdev/pmd-stats-show > "$PS"
  local up; up=$(appctl upcall/show | sed -n 's/.*flows *: *(current \([0-9]*\)).*(limit \([0-9]*\)).*/\1 \2/p' | head -1)
  local dms=nan first="(not dumped: N > DUMP_MAX)"
  if [ "$n" -le "$DUMP_MAX" ]; then
    local t0 t1; t0=$(date +%s%N); appctl dpctl/dump-flows > "$OVSB/dump.txt"; t1=$(date +%s%N); dms=$(( (t1 - t0) / 1000000 ))
    first=$(grep -m1 'ipv4(' "$OVSB/dump.txt" | sed 's/, packets.*//'); rm -f "$OVSB/dump.txt"
  fi
  python3 - "$ser" "$n" "$label" "$(g 'processing cycles:')" "$TSC_HZ" "$(g 'packets received:')" \
      "$(g 'miss with success')" "$(g 'miss with failed')" "${up:-nan nan}" "$dms" "$PFX" "$P0" <<'EOF'
import sys
ser, n, label, pc, hz, recv, ok, fail, up, dms, pfx, p0 = sys.argv[1:13]
n, pc, hz, p0 = int(n), float(pc), float(hz), float(p0)
rows = [tuple(float(x) for x in l.split()) for l in open(ser)]
# base: the prefix's one megaflow, unless all its frames met the unknown port (failed upcalls)
# (a rep whose count never reached N may be off by this one flow)
base = 1 if int(fail or 0) < int(pfx) else 0
final = rows[-1][1] if rows else 0
learned = final - base
def cross(x):  # first time the count (above base) reached x; nan unless a sample saw it below
    below = False
    for t, f, rx in rows:
        if f - base >= x: return t if below else float("nan")
        below = True
    return float("nan")
# the start: the last sample before the count rose (nan if the first answer came later)
start = next((rows[i - 1][0] for i, (t, f, rx) in enumerate(rows) if f > base and i > 0), float("nan"))
marks = [start] + [cross(k * n / 10) for k in range(1, 11)]
tenths = [(b - a) * 1e6 for a, b in zip(marks, marks[1:])]  # nan where a crossing fell between no two samples
# poll rate: from the first sample above the base to the first at N (the main thread may
# answer its first request only once the count is well past 0)
a = next(((t, f) for t, f, rx in rows if f > base), None)
b = next(((t, f) for t, f, rx in rows if f >= base + n), None)
poll = (b[1] - a[1]) / (b[0] - a[0]) if a and b and b[0] > a[0] else float("nan")
cyc = learned / ((pc - p0) / hz) if pc > p0 else float("nan")
# the poll series is only as good as the samples taken while the count rose (ovs-vswitchd's
# main thread answers nothing while it is still adding the port; a 10k run is over by then)
rising = sum(1 for t, f, rx in rows if base < f < base + n)
if rising < 5: poll = float("nan")
# the peak: OVS's count can fall again (its dynamic flow limit, see the header): the most it
# held, and the rate from the first sample above the base to the peak
pk = max(rows, key=lambda r: r[1]) if rows else (0, 0, 0)
peak_rate = (pk[1] - a[1]) / (pk[0] - a[0]) if a and pk[0] > a[0] else float("nan")
cur, lim = (up.split() + ["nan", "nan"])[:2]
print(f"N={n} {label} learn_per_s_cycles={cyc:.0f} learn_per_s_poll={poll:.0f} megaflows={learned:.0f} "
      f"base={base:.0f} final={final:.0f} first_tenth_us={tenths[0]:.0f} last_tenth_us={tenths[-1]:.0f} "
      f"tenths_us={','.join(f'{x:.0f}' for x in tenths)} proc_cycles={pc:.0f} recv={recv} "
      f"upcall_ok={ok} upcall_failed={fail} upcall_show_current={cur} flow_limit={lim} "
      f"dump_flows_ms={dms} samples={len(rows)} rising_samples={rising} prefix_cycles={p0:.0f} "
      f"peak={pk[1] - base:.0f} learn_per_s_to_peak={peak_rate:.0f}")
EOF
  echo "# N=$n $label first megaflow: $first"
}

# The prefix's own PMD cycles (failed upcalls while the port is unknown, one upcall, then
# megaflow/EMC hits), subtracted from each rep's processing cycles: the median of 3 attaches
# of the prefix alone.
prefix_cycles() {
  vsctl --if-exists del-port br0 p1
  ofctl del-flows br0; ofctl add-flows br0 "$PC/control.flows"
  appctl revalidator/purge >/dev/null; appctl dpctl/del-flows >/dev/null; sleep 0.5
  appctl dpif-netdev/pmd-stats-clear >/dev/null
  attach_once p1 1 "$PC/prefix$PFX.pcap"
  local i; for i in $(seq 1 300); do
    appctl dpif-netdev/pmd-stats-show > "$PS"; [ "$(g 'packets received:')" -ge "$PFX" ] && break; sleep 0.1
  done
  sleep 0.3; appctl dpif-netdev/pmd-stats-show > "$PS"
  echo "$(g 'processing cycles:') $(g 'miss with failed')"
}
P0S=""; for i in 1 2 3; do c=$(prefix_cycles); echo "# prefix alone ($PFX frames): processing_cycles failed_upcalls = $c" | tee -a "$RAW_OVS"; P0S="$P0S ${c%% *}"; done
P0=$(echo $P0S | tr ' ' '\n' | sort -n | sed -n 2p)
vsctl --if-exists del-port br0 p1

# --- the rows ------------------------------------------------------------------------------
for n in $NS; do
  for r in $(seq 1 "$REPS"); do
    ovs_rep "$n" "rep$r" 2>&1 | tee -a "$RAW_OVS"
    vsctl --if-exists del-port br0 p1
    appctl dpctl/del-flows >/dev/null
    kill -STOP "$VPID"; sleep 0.5
    case $(ps -o stat= -p "$VPID") in T*) ;; *) echo "bench-control: OVS not frozen" >&2;; esac
    o=$("$FS" bench control --flows "$n" --core "$CORE" --reps 1 2>&1)
    kill -CONT "$VPID"
    l=$(echo "$o" | grep -E '^flows=' | tail -1)
    if [ -n "$l" ]; then
      echo "N=$n rep$r $l $(echo "$o" | grep -E '^learn:' | sed 's/^learn: flows=[0-9]* //; s/ PMD .*//') $(echo "$o" | grep -E '^control:' | grep -o 'delete_per_s=[0-9]*')" | tee -a "$RAW_FS"
    else
      echo "# N=$n rep$r flowswitch failed: $(echo "$o" | tail -3 | tr '\n' ' ')" | tee -a "$RAW_FS" >&2
    fi
  done
done

fi  # TABLE_ONLY

# --- the table -------------------------------------------------------------------------------
MACHINE="$(nproc) vCPU $(lscpu | sed -n 's/^Model name: *//p' | head -1), kernel $(uname -r), TSC $(awk -v h=$TSC_HZ 'BEGIN{printf "%.2f", h/1e9}') GHz"
python3 - "$RAW_OVS" "$RAW_FS" "$OUT" "$REPS" "$MACHINE" "$REV" "$NS" "$OVS_VER" "$DPDK_VER" <<'EOF'
import re, sys, statistics as st, datetime
from collections import defaultdict
ovs_path, fs_path, out, reps, machine, rev, ns, ovsv, dpdkv = sys.argv[1:10]
def kvs(s): return dict(x.split('=', 1) for x in s.split() if '=' in x)
ovs, fs = defaultdict(list), defaultdict(list)
for l in open(ovs_path):
    m = re.match(r'N=(\d+) rep\d+ (.*)', l.strip())
    if m: ovs[int(m.group(1))].append(kvs(m.group(2)))
for l in open(fs_path):
    m = re.match(r'N=(\d+) rep\d+ (.*)', l.strip())
    if m: fs[int(m.group(1))].append(kvs(m.group(2)))
nan = float('nan')
def med(v, k):
    xs = [float(x[k]) for x in v if k in x and x[k] not in ('nan', '')]
    return st.median(xs) if xs else nan
def each(v, k, f=lambda x: f"{x / 1e3:.0f}k"):
    return ' / '.join(f(float(x[k])) for x in v if k in x and x[k] not in ('nan', '')) or '—'
def fmt(x, d=0): return '—' if x != x else f"{x:,.{d}f}"
def goal(x, ok, s): return '—' if x != x else f"**{s} {'✓' if ok else '✗'}**"
now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
L = [f"Measured {now} on {machine}; flowswitch {rev}; OVS {ovsv} with DPDK {dpdkv}; one PMD "
     f"pinned to core 1 each, alternating rep by rep (OVS, ours); median of {reps}. Learn/s = "
     "megaflows learned (each frame once: miss → upcall → install) per second; ours = N / wall "
     "time of the PMD's run; OVS's = megaflows / (PMD processing cycles / TSC Hz) when it held "
     "all N at the end, else († ) the polled count's rise to its peak / the time it took; "
     "'OVS, poll' = the polled count's rise / time (first sample above 0 → first at N). "
     "Raw lines: OUT.ovs.txt, OUT.flowswitch.txt.", "",
     "| N | ours learn/s (reps) | OVS learn/s (reps) | OVS learn/s, poll | ours / OVS | "
     "ours first / last tenth ms | last / first | OVS megaflows, peak / end | "
     "ours terse dump ms | OVS dump-flows ms | ours install during dump | ours delete/s | ours bytes/flow |",
     "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for n in [int(x) for x in ns.split()]:
    o, f = ovs.get(n, []), fs.get(n, [])
    for x in o:  # the rate that means something for this rep
        held = float(x.get('megaflows', 0)) >= n
        x['rate'] = x['learn_per_s_cycles'] if held else x.get('learn_per_s_to_peak', 'nan')
        x['held'] = '1' if held else '0'
    dag = '' if all(x['held'] == '1' for x in o) else ' †'
    ol, olp, fl = med(o, 'rate'), med(o, 'learn_per_s_poll'), med(f, 'learn_per_s')
    ft, lt = med(f, 'first_tenth_us'), med(f, 'last_tenth_us')
    r = fl / ol if ol == ol and ol else nan
    flat = lt / ft if ft == ft and ft else nan
    dump = med(f, 'terse_dump_ms'); ratio = med(f, 'install_during_dump_ratio')
    L.append(f"| {n:,} | {goal(fl, fl >= 500e3, fmt(fl))} ({each(f, 'learn_per_s')}) | "
             f"{fmt(ol)}{dag} ({each(o, 'rate')}) | {fmt(olp)} | {goal(r, r >= 10, f'{r:.2f}×')} | "
             f"{fmt(ft / 1e3, 1)} / {fmt(lt / 1e3, 1)} | {goal(flat, flat <= 1.5, f'{flat:.2f}')} | "
             f"{fmt(med(o, 'peak'))} / {fmt(med(o, 'megaflows'))} | "
             f"{goal(dump, dump <= 500, f'{dump:.1f}') if n >= 1000000 else fmt(dump, 1)} | "
             f"{fmt(med(o, 'dump_flows_ms'))} | {goal(ratio, ratio >= 0.9, f'{ratio:.2f}')} | "
             f"{fmt(med(f, 'delete_per_s'))} | {fmt(med(f, 'bytes_per_flow'))} |")
open(out, 'w').write('\n'.join(L) + '\n')
print('\n'.join(L))
EOF
