#!/usr/bin/env python3
"""One LSP add at a time through a long-lived NB client, as a CMS (ovn-kubernetes' libovsdb
client, ovn-nbctl's daemon mode) sends it: the same transaction `ovn-nbctl --wait=sb
lsp-add SW P -- lsp-set-addresses P "MAC IP"` sends (insert the port, add it to the switch,
NB_Global.nb_cfg += 1), then waits, as `--wait=sb` does, until NB_Global.sb_cfg reaches the
new nb_cfg, and prints what `--print-wait-time` prints, one line per add:

    add NAME delay_ms=D completion_ms=C wall_ms=W

delay = nb_cfg_timestamp - start, completion = sb_cfg_timestamp - start (both timestamps
written by the northd, wall-clock ms, as ovn-nbctl computes them), wall = until this client
saw sb_cfg (includes the northd's NB write of sb_cfg after the SB commit).

Why not ovn-nbctl itself: each ovn-nbctl run is a new client whose monitor request makes
ovsdb-server (3.1) send the whole NB, and the first transaction after a new monitor costs
that server 10-15 ms at 800 nodes (0.3-1 ms for the same transaction on a connection with
an old monitor or none), which both northds then see as "delay before processing".

usage: nb-lsp-add-latency.py NB_SOCKET SWITCH COUNT PREFIX [FIRST]
"""
import json
import socket
import sys
import time


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.buf = ""
        self.dec = json.JSONDecoder()
        self.next_id = 1
        self.nb_global = {}

    def _recv_one(self):
        while True:
            text = self.buf.lstrip()
            if text:
                try:
                    obj, end = self.dec.raw_decode(text)
                    self.buf = text[end:]
                    return obj
                except ValueError:
                    pass
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise SystemExit("NB server closed the connection")
            self.buf += chunk.decode()

    def _handle(self, msg):
        method = msg.get("method")
        if method == "echo":
            self.s.sendall(json.dumps({"id": msg["id"], "result": msg["params"]}).encode())
        elif method == "update2":
            self._apply(msg["params"][1])

    def _apply(self, updates):
        for uuid, change in updates.get("NB_Global", {}).items():
            for kind in ("initial", "insert", "modify"):
                if kind in change:
                    row = self.nb_global.setdefault(uuid, {})
                    row.update(change[kind])

    def call(self, method, params):
        i = self.next_id
        self.next_id += 1
        self.s.sendall(json.dumps({"method": method, "params": params, "id": i}).encode())
        while True:
            msg = self._recv_one()
            if msg.get("id") == i and "method" not in msg:
                if msg.get("error"):
                    raise SystemExit(f"{method}: {msg['error']}")
                return msg["result"]
            self._handle(msg)

    def wait_update(self):
        self._handle(self._recv_one())


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    path, switch, count, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    first = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    c = Conn(path)
    cols = ["nb_cfg", "sb_cfg", "nb_cfg_timestamp", "sb_cfg_timestamp"]
    res = c.call("monitor_cond", ["OVN_Northbound", "lat", {"NB_Global": [{"columns": cols}]}])
    c._apply(res)
    [(nbg_uuid, _)] = c.nb_global.items()
    found = c.call("transact", ["OVN_Northbound", {"op": "select", "table": "Logical_Switch",
                                                   "where": [["name", "==", switch]],
                                                   "columns": ["_uuid"]}])
    rows = found[0]["rows"]
    if not rows:
        raise SystemExit(f"no logical switch {switch!r}")
    ls = rows[0]["_uuid"]
    nbg = ["uuid", nbg_uuid]
    for k in range(first, first + count):
        name = f"{prefix}{k}"
        addr = f"0a:58:0a:80:{k // 256 % 256:02x}:{k % 256:02x} 10.{128 + k // 65536 % 64}.{k // 256 % 256}.{k % 256}"
        ops = [
            "OVN_Northbound",
            {"op": "insert", "table": "Logical_Switch_Port", "uuid-name": "newport",
             "row": {"name": name, "addresses": addr}},
            {"op": "mutate", "table": "Logical_Switch", "where": [["_uuid", "==", ls]],
             "mutations": [["ports", "insert", ["set", [["named-uuid", "newport"]]]]]},
            {"op": "mutate", "table": "NB_Global", "where": [["_uuid", "==", nbg]],
             "mutations": [["nb_cfg", "+=", 1]]},
            {"op": "select", "table": "NB_Global", "where": [["_uuid", "==", nbg]],
             "columns": ["nb_cfg"]},
        ]
        start_ms = time.time() * 1000.0
        t0 = time.perf_counter()
        result = c.call("transact", ops)
        for r in result:
            if isinstance(r, dict) and "error" in r:
                raise SystemExit(f"transaction failed: {result}")
        want = result[3]["rows"][0]["nb_cfg"]
        while c.nb_global[nbg_uuid].get("sb_cfg", 0) < want:
            c.wait_update()
        wall = (time.perf_counter() - t0) * 1000.0
        row = c.nb_global[nbg_uuid]
        print(f"add {name} delay_ms={row['nb_cfg_timestamp'] - start_ms:.0f} "
              f"completion_ms={row['sb_cfg_timestamp'] - start_ms:.0f} wall_ms={wall:.1f}",
              flush=True)
        time.sleep(0.05)


main()
