#!/usr/bin/env python3
"""Writes sample_rules and sample_trace: a small rule set and header trace in ClassBench's
file formats (see README.md here), made by this script from a fixed seed, not by ClassBench.

    python3 data/classbench/make-sample.py     # rewrites the two files beside this script

Rules: 100 lines, first line highest priority, a mix of the shapes ACL sets have (host and
subnet prefixes, exact and ranged ports, TCP/UDP/any), and a catch-all last rule. Trace: 500
headers, each drawn inside a rule chosen at random (its last column, as in ClassBench: the
rule it was drawn from, not necessarily the first rule that matches), some repeated in bursts.
"""
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(11)


def prefix():
    length = rng.choice([0, 8, 16, 24, 24, 28, 32, 32, 32])
    addr = rng.getrandbits(32) & ((0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF if length else 0)
    return addr, length


def port_range():
    kind = rng.choice(["any", "any", "exact", "exact", "high", "range"])
    if kind == "any":
        return 0, 65535
    if kind == "high":
        return 1024, 65535
    if kind == "exact":
        p = rng.choice([22, 53, 80, 123, 443, 3306, 8080, rng.randrange(65536)])
        return p, p
    lo = rng.randrange(65000)
    return lo, lo + rng.randrange(1, 500)


def dotted(a):
    return ".".join(str(a >> s & 0xFF) for s in (24, 16, 8, 0))


rules = []
for _ in range(99):
    proto, pmask = rng.choice([(6, 0xFF), (6, 0xFF), (17, 0xFF), (0, 0)])
    rules.append((prefix(), prefix(), port_range(), port_range(), proto, pmask))
rules.append(((0, 0), (0, 0), (0, 65535), (0, 65535), 0, 0))

with open(os.path.join(HERE, "sample_rules"), "w") as f:
    for (sa, sl), (da, dl), (s0, s1), (d0, d1), proto, pmask in rules:
        f.write(f"@{dotted(sa)}/{sl}\t{dotted(da)}/{dl}\t{s0} : {s1}\t{d0} : {d1}\t"
                f"0x{proto:02X}/0x{pmask:02X}\t0x0000/0x0000\t\n")


def inside(addr, length):
    host = rng.getrandbits(32 - length) if length < 32 else 0
    return addr | host


headers = []
while len(headers) < 500:
    i = rng.randrange(len(rules))
    (sa, sl), (da, dl), (s0, s1), (d0, d1), proto, pmask = rules[i]
    h = (inside(sa, sl), inside(da, dl), rng.randint(s0, s1), rng.randint(d0, d1),
         proto if pmask else rng.choice([6, 17, 1]), 0, i)
    headers.extend([h] * rng.choice([1, 1, 1, 2, 5]))

with open(os.path.join(HERE, "sample_trace"), "w") as f:
    for h in headers[:500]:
        f.write("\t".join(str(x) for x in h) + "\n")
