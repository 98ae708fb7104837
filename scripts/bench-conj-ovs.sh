#!/bin/sh
# OVS 3.1's side of `flowswitch bench conj` (issue #17): times `ovs-ofctl add-flows` of the
# conjunctive and the expanded flow files that `flowswitch bench conj --write-flows DIR` wrote,
# into a private dummy-datapath OVS (ovsdb-server + ovs-vswitchd --enable-dummy=override,
# bridge br0 datapath_type=dummy), interleaved, RUNS rounds (default 3), each on an empty
# bridge. Prints one line per round and form: `form=F flows=N add_flows_ms=T`.
# Usage: scripts/bench-conj-ovs.sh DIR [RUNS]
set -eu
DIR=$1
RUNS=${2:-3}
W=$(mktemp -d /tmp/fs-conj-ovs.XXXXXX)
trap 'ovs-appctl --target="$W/vswitchd.ctl" exit >/dev/null 2>&1 || true;
      ovs-appctl --target="$W/ovsdb.ctl" exit >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
export OVS_RUNDIR=$W OVS_LOGDIR=$W OVS_DBDIR=$W
ovsdb-tool create "$W/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server "$W/conf.db" --remote=punix:"$W/db.sock" --unixctl="$W/ovsdb.ctl" \
    --pidfile="$W/ovsdb.pid" --detach --log-file="$W/ovsdb.log"
ovs-vsctl --db=unix:"$W/db.sock" --no-wait init
ovs-vswitchd --enable-dummy=override --disable-system --disable-system-route \
    unix:"$W/db.sock" --unixctl="$W/vswitchd.ctl" --pidfile="$W/vswitchd.pid" --detach \
    --log-file="$W/vswitchd.log"
ovs-vsctl --db=unix:"$W/db.sock" add-br br0 -- set bridge br0 datapath_type=dummy \
    fail-mode=secure
BR="unix:$W/br0.mgmt"
ms() { date +%s%N; }
for r in $(seq 1 "$RUNS"); do
    for form in conj expanded; do
        ovs-ofctl del-flows "$BR"
        n=$(wc -l < "$DIR/$form.flows")
        t0=$(ms)
        ovs-ofctl add-flows "$BR" "$DIR/$form.flows"
        t1=$(ms)
        echo "round=$r form=$form flows=$n add_flows_ms=$(( (t1 - t0) / 1000000 ))"
    done
done
