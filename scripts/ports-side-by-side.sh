#!/usr/bin/env bash
# ports-side-by-side.sh — real ports side by side (issue 16). Run as root.
#
#   NS1 (v1 10.0.0.1) ==veth== [NSW: veth1  SWITCH  veth2] ==veth== NS2 (v2 10.0.0.2)
#
# The switch side of both veth pairs lives in its own namespace NSW, so every switch (and
# the taps OVS and flowswitch create for their bridges) is confined there and goes away with
# it. Offloads are off on all four veth ends and ARP is static, as ../shared/ovs-bench/topo.sh
# does. The same topology is switched, in turn, by
#   fs-afpacket   flowswitch switch --port afpacket:veth1 --port afpacket:veth2
#   fs-afxdp      flowswitch switch --port afxdp:veth1 --port afxdp:veth2
#   ovs-netdev    OVS ovs-vswitchd, datapath_type=netdev, system ports (netdev-linux)
#   ovs-afxdp     OVS ovs-vswitchd, datapath_type=netdev, type=afxdp ports (if supported)
#   linux-bridge  a Linux bridge (kernel forwarding, no process)
# each with the same rule: MAC learning (NORMAL; the Linux bridge learns as well). Switch
# processes run pinned to SWITCH_CPU (default 1) with their PMD on PMD_MASK (0x2); senders,
# iperf3 client and server on SENDER_CPU (0).
#
# Per round (REPS rounds, default 3, switches interleaved) and switch:
#   far-side pps : `flowswitch blast` (BLAST_KIND, default afxdp) in NS1 sends SIZE-byte
#                  UDP frames (FLOWS flows) to v2's MAC for T+3 s; NS2's v2 rx_packets delta
#                  over T seconds (default 10) after 1.5 s of warm-up, and NS1's v1 tx_packets
#                  (what the sender got into the veth) over the same interval.
#   tcpreplay    : for ovs-netdev (and TCPREPLAY_ALL=1: every switch), the same with
#                  `tcpreplay --topspeed` of a one-frame pcap as the sender, if installed.
#   TCP          : iperf3 NS1 -> NS2, IPERF_T seconds (default 5), one stream.
# Then a table of medians, ratios to OVS netdev and to the Linux bridge, load averages and
# the commit. Logs (switch logs, pmd-stats-show of each interval, raw results) stay in a
# directory under /tmp, printed at the end.
#
# Env: REPS T IPERF_T SIZE FLOWS BLAST_KIND SENDER_CPU SWITCH_CPU PMD_MASK SWITCHES
#      PREFIX (namespace names, default pss) FLOWSWITCH (binary; default
#      $CARGO_TARGET_DIR/release/flowswitch) TCPREPLAY_ALL.
set -euo pipefail

REPS=${REPS:-3}
T=${T:-10}
IPERF_T=${IPERF_T:-5}
SIZE=${SIZE:-60}
FLOWS=${FLOWS:-1}
BLAST_KIND=${BLAST_KIND:-afxdp}
SENDER_CPU=${SENDER_CPU:-0}
SWITCH_CPU=${SWITCH_CPU:-1}
PMD_MASK=${PMD_MASK:-0x2}
SWITCHES=${SWITCHES:-fs-afpacket fs-afxdp ovs-netdev ovs-afxdp linux-bridge}
TCPREPLAY_ALL=${TCPREPLAY_ALL:-0}
P=${PREFIX:-pss}
NS1=$P-ns1
NS2=$P-ns2
NSW=$P-sw
REPO=$(cd "$(dirname "$0")/.." && pwd)
FS=${FLOWSWITCH:-${CARGO_TARGET_DIR:-$REPO/target}/release/flowswitch}
SCHEMA=${SCHEMA:-/usr/share/openvswitch/vswitch.ovsschema}

[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
[ -x "$FS" ] || { echo "$FS missing: cargo build --release -p flowswitch (or set FLOWSWITCH)" >&2; exit 1; }
for c in ip ethtool taskset iperf3 python3; do
  command -v $c >/dev/null || { echo "$c not installed" >&2; exit 1; }
done
for ns in $NS1 $NS2 $NSW; do
  if ip netns list | grep -qw "$ns"; then
    echo "namespace $ns exists already (another run?); set PREFIX or remove it" >&2
    exit 1
  fi
done

W=$(mktemp -d /tmp/ports-sbs.XXXXXX)
RES=$W/results.tsv
: > "$RES"
PIDS=()          # background processes we started, stopped by PID
OVS_DIR=""       # the running private OVS instance, if any
CREATED_NS=()

# stop_pid PID [SIGNAL]: signal, wait up to 10 s, then SIGKILL.
stop_pid() {
  local pid=$1 sig=${2:-TERM}
  kill -0 "$pid" 2>/dev/null || return 0
  kill -"$sig" "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

stop_ovs() {
  [ -n "$OVS_DIR" ] || return 0
  local f
  for f in "$OVS_DIR"/ovs-vswitchd.pid "$OVS_DIR"/ovsdb-server.pid; do
    [ -f "$f" ] && stop_pid "$(cat "$f")"
    rm -f "$f"
  done
  OVS_DIR=""
  # OVS netdev leaves its bridge taps persistent: remove them (they live only in NSW).
  del_taps
}

del_taps() {
  local t
  for t in $(ip -n "$NSW" -o link show type tun 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip -n "$NSW" link del "$t" 2>/dev/null || true
  done
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  stop_ovs
  ip -n "$NSW" link del "${P}br" 2>/dev/null
  del_taps
  for ns in "${CREATED_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

note() { echo "# $*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
now() { date +%s.%N; }
ctr() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }
# CPU time (user+system, clock ticks) of process $1 and its threads; 0 if none.
pticks() {
  if [ "$1" != 0 ] && [ -r "/proc/$1/stat" ]; then
    awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$1/stat"
  else
    echo 0
  fi
}
# "busy softirq steal" ticks of CPU $1 from /proc/stat.
cputicks() { awk -v c="cpu$1" '$1 == c {print $2+$3+$4+$7+$8+$9, $8, $9}' /proc/stat; }

# ---- topology ----
for ns in $NS1 $NS2 $NSW; do ip netns add "$ns"; CREATED_NS+=("$ns"); done
for i in 1 2; do
  ns=$P-ns$i
  ip -n "$NSW" link add veth$i type veth peer name v$i netns "$ns"
  ip -n "$ns" addr add 10.0.0.$i/24 dev v$i
  ip -n "$ns" link set lo up
  ip -n "$ns" link set v$i up
  ip -n "$NSW" link set veth$i up
  ip netns exec "$ns" ethtool -K v$i tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
  ip netns exec "$NSW" ethtool -K veth$i tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
done
ip -n "$NSW" link set lo up
MAC1=$(ip netns exec "$NS1" cat /sys/class/net/v1/address)
MAC2=$(ip netns exec "$NS2" cat /sys/class/net/v2/address)
ip -n "$NS1" neigh replace 10.0.0.2 lladdr "$MAC2" dev v1
ip -n "$NS2" neigh replace 10.0.0.1 lladdr "$MAC1" dev v2

# UDP sinks in NS2 on every port the blaster's flows use (netdev::generator's UDP_DPORTS)
# and the pcap's: bound, never read, with the smallest receive buffer, so the far side drops
# the flood on a full socket queue instead of answering each frame with an ICMP port
# unreachable (whose route lookups cost more than switching it). The rx_packets counter on
# v2 is taken before any of this.
ip netns exec "$NS2" python3 -c '
import socket, time
ss = []
for port in (53, 80, 123, 443, 4789, 5000, 8080):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
    s.bind(("10.0.0.2", port))
    ss.append(s)
time.sleep(1e9)
' &
PIDS+=("$!")

# One-frame pcap for tcpreplay: the blaster's flow 0 (60-byte UDP 10.0.0.1 -> 10.0.0.2).
PCAP=$W/one.pcap
python3 - "$PCAP" "$MAC1" "$MAC2" "$SIZE" <<'EOF'
import struct, sys
path, src, dst, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
mac = lambda s: bytes(int(x, 16) for x in s.split(':'))
payload = bytes(max(0, size - 42))
udp = struct.pack('!HHHH', 4000, 5000, 8 + len(payload), 0) + payload
ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 1, 0x4000, 64, 17, 0,
                 bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
s = sum(struct.unpack('!10H', ip)); s = (s & 0xffff) + (s >> 16); s = (s & 0xffff) + (s >> 16)
ip = ip[:10] + struct.pack('!H', ~s & 0xffff) + ip[12:]
f = mac(dst) + mac(src) + b'\x08\x00' + ip + udp
with open(path, 'wb') as o:
    o.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    o.write(struct.pack('<IIII', 0, 0, len(f), len(f)) + f)
EOF

# ---- switches: start_X sets SW_PID (0 for none) and APPCTL (pmd-stats command or "") ----
SW_PID=0
APPCTL=()
MGMT=""
OVS_AFXDP_NOTE=""

start_fs() {  # start_fs KIND
  local kind=$1 rd=$W/fs-run
  mkdir -p "$rd"
  ip netns exec "$NSW" taskset -c "$SWITCH_CPU" "$FS" switch --bridge "${P}fs" \
    --port "$kind:veth1" --port "$kind:veth2" --pmd-cpu-mask "$PMD_MASK" --rundir "$rd" \
    >>"$W/fs-$kind.log" 2>&1 &
  SW_PID=$!
  PIDS+=("$SW_PID")
  APPCTL=(ovs-appctl -t "$rd/ovs-vswitchd.$SW_PID.ctl")
  MGMT=unix:$rd/${P}fs.mgmt
}

start_ovs() {  # start_ovs TYPE ("" for system ports)
  local type=$1 d=$W/ovs
  rm -rf "$d"; mkdir -p "$d"
  OVS_DIR=$d
  ovsdb-tool create "$d/conf.db" "$SCHEMA"
  ip netns exec "$NSW" ovsdb-server --no-chdir --remote=punix:"$d/db.sock" \
    --unixctl="$d/ovsdb-server.ctl" --log-file="$d/ovsdb-server.log" -vconsole:off \
    --pidfile="$d/ovsdb-server.pid" --detach "$d/conf.db" 2>>"$d/stderr.log"
  local vs=(ovs-vsctl --db=unix:"$d/db.sock")
  "${vs[@]}" --no-wait init
  "${vs[@]}" --no-wait set Open_vSwitch . other_config:pmd-cpu-mask="${PMD_MASK#0x}"
  OVS_RUNDIR=$d OVS_LOGDIR=$d OVS_DBDIR=$d ip netns exec "$NSW" taskset -c "$SWITCH_CPU" \
    ovs-vswitchd unix:"$d/db.sock" --no-chdir --pidfile="$d/ovs-vswitchd.pid" \
    --unixctl="$d/ovs-vswitchd.ctl" --log-file="$d/ovs-vswitchd.log" -vconsole:off --detach \
    2>>"$d/stderr.log"
  SW_PID=$(cat "$d/ovs-vswitchd.pid")
  APPCTL=(ovs-appctl -t "$d/ovs-vswitchd.ctl")
  MGMT=unix:$d/${P}ovs.mgmt
  "${vs[@]}" add-br "${P}ovs" -- set bridge "${P}ovs" datapath_type=netdev
  local i
  for i in 1 2; do
    if [ -n "$type" ]; then
      "${vs[@]}" add-port "${P}ovs" veth$i -- set interface veth$i type="$type" ofport_request=$i
    else
      "${vs[@]}" add-port "${P}ovs" veth$i -- set interface veth$i ofport_request=$i
    fi
  done
  local err
  err=$("${vs[@]}" get interface veth1 error 2>/dev/null || true)
  if [ -n "$err" ] && [ "$err" != "[]" ]; then
    note "OVS ${type:-system} port error: $err"
    [ "$type" = afxdp ] && OVS_AFXDP_NOTE="OVS type=afxdp failed: $err"
    return 1
  fi
  cp "$d/ovs-vswitchd.log" "$W/ovs-${type:-system}.last.log" 2>/dev/null || true
}

start_bridge() {
  ip -n "$NSW" link add "${P}br" type bridge stp_state 0
  ip -n "$NSW" link set veth1 master "${P}br"
  ip -n "$NSW" link set veth2 master "${P}br"
  ip -n "$NSW" link set "${P}br" up
  SW_PID=0
  APPCTL=()
}

start_switch() {
  case $1 in
    fs-afpacket) start_fs afpacket ;;
    fs-afxdp) start_fs afxdp ;;
    ovs-netdev) start_ovs "" ;;
    ovs-afxdp) start_ovs afxdp ;;
    linux-bridge) start_bridge ;;
    *) echo "unknown switch $1" >&2; return 1 ;;
  esac
}

stop_switch() {
  case $1 in
    fs-*) stop_pid "$SW_PID" INT ;;
    ovs-*) stop_ovs ;;
    linux-bridge) ip -n "$NSW" link del "${P}br" 2>/dev/null || true ;;
  esac
  SW_PID=0
  APPCTL=()
  # The veth ends must be back to plain interfaces before the next switch.
  sleep 0.5
}

# wait_path: ping both ways until the switch forwards (it also learns both MACs).
wait_path() {
  local i
  for i in $(seq 40); do
    if ip netns exec "$NS1" ping -c1 -W1 -q 10.0.0.2 >/dev/null 2>&1 &&
       ip netns exec "$NS2" ping -c1 -W1 -q 10.0.0.1 >/dev/null 2>&1; then
      return 0
    fi
    if [ "$SW_PID" != 0 ] && ! kill -0 "$SW_PID" 2>/dev/null; then return 1; fi
    sleep 0.25
  done
  return 1
}

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RES"; }

# far_side ROUND SWITCH SENDER: run SENDER in NS1 (background), measure over T seconds.
far_side() {
  local r=$1 sw=$2 sender=$3 pid s0 r0 t0 s1 r1 t1
  case $sender in
    blast)
      ip netns exec "$NS1" taskset -c "$SENDER_CPU" "$FS" blast --port "$BLAST_KIND:v1" \
        --dst-mac "$MAC2" --src-ip 10.0.0.1 --dst-ip 10.0.0.2 --size "$SIZE" \
        --flows "$FLOWS" --seconds $((T + 3)) >"$W/$sw.r$r.blast.out" 2>&1 &
      ;;
    tcpreplay)
      ip netns exec "$NS1" taskset -c "$SENDER_CPU" tcpreplay -q -K --topspeed --loop=0 \
        -i v1 "$PCAP" >"$W/$sw.r$r.tcpreplay.out" 2>&1 &
      ;;
  esac
  pid=$!
  PIDS+=("$pid")
  sleep 1.5
  [ ${#APPCTL[@]} -gt 0 ] && { "${APPCTL[@]}" dpif-netdev/pmd-stats-clear >/dev/null 2>&1 || true; }
  local sw0 snd0 c00 c10 sw1 snd1 c01 c11
  sw0=$(pticks "$SW_PID"); snd0=$(pticks "$pid")
  c00=$(cputicks "$SENDER_CPU"); c10=$(cputicks "$SWITCH_CPU")
  s0=$(ctr "$NS1" v1 tx_packets); r0=$(ctr "$NS2" v2 rx_packets); t0=$(now)
  sleep "$T"
  s1=$(ctr "$NS1" v1 tx_packets); r1=$(ctr "$NS2" v2 rx_packets); t1=$(now)
  sw1=$(pticks "$SW_PID"); snd1=$(pticks "$pid")
  c01=$(cputicks "$SENDER_CPU"); c11=$(cputicks "$SWITCH_CPU")
  if [ ${#APPCTL[@]} -gt 0 ]; then
    "${APPCTL[@]}" dpif-netdev/pmd-stats-show >"$W/$sw.r$r.$sender.pmd" 2>&1 || true
    ovs-ofctl dump-ports "$MGMT" >"$W/$sw.r$r.$sender.ports" 2>&1 || true
  fi
  if [ "$sender" = tcpreplay ]; then stop_pid "$pid" INT; fi
  wait "$pid" 2>/dev/null || true
  local dt far sent
  dt=$(python3 -c "print($t1 - $t0)")
  far=$(python3 -c "print(round(($r1 - $r0) / $dt))")
  sent=$(python3 -c "print(round(($s1 - $s0) / $dt))")
  record "$r" "$sw" "far_pps_$sender" "$far"
  record "$r" "$sw" "sent_pps_$sender" "$sent"
  local tck cpus
  tck=$(getconf CLK_TCK)
  # Percent of one CPU over the interval: switch process, sender process, and for the
  # sender's and the switch's CPUs: busy (all but idle/iowait), of which softirq, and steal.
  cpus=$(python3 -c "
dt, t = $dt, $tck
a0, a1 = '$c00'.split(), '$c01'.split()
b0, b1 = '$c10'.split(), '$c11'.split()
p = lambda x0, x1: 100 * (int(x1) - int(x0)) / t / dt
print(f'{p($sw0, $sw1):.0f} {p($snd0, $snd1):.0f}',
      ' '.join(f'{p(x, y):.0f}' for x, y in zip(a0 + b0, a1 + b1)))")
  set -- $cpus
  record "$r" "$sw" "swcpu_$sender" "$1"
  record "$r" "$sw" "sndcpu_$sender" "$2"
  record "$r" "$sw" "cpu0_$sender" "$3/$4/$5"
  record "$r" "$sw" "cpu1_$sender" "$6/$7/$8"
  note "round $r $sw $sender: sent $sent pps, far side $far pps; CPU % switch $1, sender $2; CPU$SENDER_CPU busy/softirq/steal $3/$4/$5, CPU$SWITCH_CPU $6/$7/$8"
}

tcp() {
  local r=$1 sw=$2 spid bps
  ip netns exec "$NS2" taskset -c "$SENDER_CPU" iperf3 -s -1 -p 5216 >/dev/null 2>&1 &
  spid=$!
  PIDS+=("$spid")
  sleep 0.5
  if ip netns exec "$NS1" taskset -c "$SENDER_CPU" iperf3 -c 10.0.0.2 -p 5216 -t "$IPERF_T" -J \
       >"$W/$sw.r$r.iperf.json" 2>&1; then
    bps=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['end']['sum_received']['bits_per_second']))" "$W/$sw.r$r.iperf.json")
  else
    bps=0
  fi
  stop_pid "$spid"
  wait "$spid" 2>/dev/null || true
  record "$r" "$sw" tcp_bps "$bps"
  note "round $r $sw: TCP $(python3 -c "print(f'{$bps/1e9:.2f}')") Gbit/s"
}

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  COMMIT="$COMMIT+dirty"
fi
START_LOAD=$(load)
HAVE_TCPREPLAY=0
command -v tcpreplay >/dev/null && HAVE_TCPREPLAY=1
note "logs in $W; switches: $SWITCHES; REPS=$REPS T=$T IPERF_T=$IPERF_T SIZE=$SIZE FLOWS=$FLOWS sender=$BLAST_KIND"

for r in $(seq 1 "$REPS"); do
  for sw in $SWITCHES; do
    record "$r" "$sw" load1 "$(cut -d' ' -f1 /proc/loadavg)"
    if ! start_switch "$sw" || ! wait_path; then
      note "round $r $sw: does not forward (see $W); skipped"
      record "$r" "$sw" failed 1
      stop_switch "$sw"
      continue
    fi
    far_side "$r" "$sw" blast
    if [ "$HAVE_TCPREPLAY" = 1 ] && { [ "$sw" = ovs-netdev ] || [ "$TCPREPLAY_ALL" = 1 ]; }; then
      far_side "$r" "$sw" tcpreplay
    fi
    tcp "$r" "$sw"
    stop_switch "$sw"
  done
done
END_LOAD=$(load)

[ "$HAVE_TCPREPLAY" = 1 ] || note "tcpreplay not installed (apt-get install -y tcpreplay): no tcpreplay figures"
python3 - "$RES" "$COMMIT" "$START_LOAD" "$END_LOAD" "$OVS_AFXDP_NOTE" "$SWITCHES" \
  "$T" "$IPERF_T" "$SIZE" "$FLOWS" "$BLAST_KIND" "$REPS" "$SENDER_CPU" "$SWITCH_CPU" <<'EOF'
import sys, statistics, collections, platform, os, datetime
res, commit, l0, l1, afxdp_note, switches, T, IT, size, flows, kind, reps, scpu, wcpu = sys.argv[1:]
d = collections.defaultdict(list)
for line in open(res):
    r, sw, k, v = line.rstrip('\n').split('\t')
    d[(sw, k)].append(v if '/' in v else float(v))
med = lambda sw, k: statistics.median(d[(sw, k)]) if d.get((sw, k)) else None
sws = switches.split()
def fmt_pps(v): return '–' if v is None else f'{v/1e3:,.0f} k'
def fmt_bps(v): return '–' if v is None else f'{v/1e9:.2f}'
def ratio(a, b): return '–' if a is None or not b else f'{a/b:.2f}×'
ovs_far, br_far = med('ovs-netdev', 'far_pps_blast'), med('linux-bridge', 'far_pps_blast')
ovs_tcp, br_tcp = med('ovs-netdev', 'tcp_bps'), med('linux-bridge', 'tcp_bps')
cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), '?')
print(f'ports side by side — {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit}, '
      f'kernel {platform.release()}, {os.cpu_count()} CPUs ({cpu})')
print(f'medians of {reps} interleaved rounds; sender `flowswitch blast --port {kind}:v1 --size {size} '
      f'--flows {flows}` on CPU {scpu}, switch on CPU {wcpu}; far side = ns2 v2 rx_packets over {T} s; '
      f'TCP = iperf3 -t {IT}, 1 stream')
print(f'load average (1/5/15 min) at start {l0}, at end {l1}')
print()
print('| switch | sent pps | far-side pps | × OVS netdev | × Linux bridge | TCP Gbit/s | × OVS netdev | × Linux bridge | switch CPU % | load1 | runs |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
for sw in sws:
    f, s, t = med(sw, 'far_pps_blast'), med(sw, 'sent_pps_blast'), med(sw, 'tcp_bps')
    loads = d.get((sw, 'load1'), [])
    lr = f'{min(loads):.1f}–{max(loads):.1f}' if loads else '–'
    n = len(d.get((sw, 'far_pps_blast'), []))
    nf = len(d.get((sw, 'failed'), []))
    runs = f'{n}' + (f' ({nf} failed)' if nf else '')
    c = med(sw, 'swcpu_blast')
    cpu_s = '–' if c is None or sw == 'linux-bridge' else f'{c:.0f}'
    print(f'| {sw} | {fmt_pps(s)} | {fmt_pps(f)} | {ratio(f, ovs_far)} | {ratio(f, br_far)} | '
          f'{fmt_bps(t)} | {ratio(t, ovs_tcp)} | {ratio(t, br_tcp)} | {cpu_s} | {lr} | {runs} |')
tr = [sw for sw in sws if d.get((sw, 'far_pps_tcpreplay'))]
if tr:
    print()
    print('tcpreplay --topspeed (one 60-byte frame looped) as the sender instead:')
    for sw in tr:
        print(f'  {sw}: sent {fmt_pps(med(sw, "sent_pps_tcpreplay"))}pps, far side '
              f'{fmt_pps(med(sw, "far_pps_tcpreplay"))}pps')
print()
print('per round (far-side pps blast / TCP Gbit/s):')
for sw in sws:
    fs = ' '.join(f'{v/1e3:.0f}k' for v in d.get((sw, 'far_pps_blast'), []))
    ts = ' '.join(f'{v/1e9:.2f}' for v in d.get((sw, 'tcp_bps'), []))
    print(f'  {sw}: {fs or "-"} / {ts or "-"}')
print()
print('CPU during the far-side interval (% of one CPU; per round): switch process, sender process;')
print(f'sender CPU {scpu} and switch CPU {wcpu} as busy/softirq/steal (busy includes softirq):')
for sw in sws:
    if not d.get((sw, 'swcpu_blast')):
        continue
    c = lambda k: ' '.join(f'{v:.0f}' if isinstance(v, float) else v for v in d.get((sw, k), []))
    print(f'  {sw}: switch {c("swcpu_blast")}; sender {c("sndcpu_blast")}; '
          f'CPU{scpu} {c("cpu0_blast")}; CPU{wcpu} {c("cpu1_blast")}')
if 'ovs-afxdp' in sws:
    if afxdp_note:
        print(afxdp_note)
    elif not d.get(('ovs-afxdp', 'far_pps_blast')):
        print('OVS type=afxdp: no figure (did not forward; see logs)')
EOF
note "logs and raw results in $W"
