//! A corpus of `ovs-ofctl` flow strings: a hand-written list covering every match field and
//! action the switch supports (plus deliberately invalid ones), and a seeded generator that
//! composes random, mostly valid flows from the same pieces while respecting prerequisites
//! (`tp_src` only after `tcp`/`udp`/`sctp`, `nd_target` only with `icmp6,icmp_type=135/136`,
//! `mod_nw_*` only on IP flows, ...).
//!
//! OVS's verdicts for this corpus are recorded in `data/parse_flow_golden*.tsv`
//! (see [`crate::golden`]). Invariant: `generated(seed, n)` is a pure function of its
//! arguments (it uses [`TestRng`]), so the golden files stay reproducible.

use crate::rng::TestRng;

/// The hand-written corpus (valid and invalid flows). Order is stable; append only.
pub fn hand_written() -> Vec<&'static str> {
    vec![
        // --- basics, flow-mod fields
        "actions=drop",
        "priority=0,actions=drop",
        "priority=65535,actions=drop",
        "table=0,actions=drop",
        "table=1,priority=100,actions=drop",
        "table=254,actions=drop",
        "cookie=0x1234,actions=drop",
        "cookie=0xffffffffffffffff,actions=drop",
        "idle_timeout=10,actions=drop",
        "hard_timeout=60,actions=drop",
        "table=3,priority=5,cookie=0x10,idle_timeout=10,hard_timeout=20,ip,actions=drop",
        "priority=10 actions=drop",
        "in_port=1 actions=output:2",
        // --- L2
        "in_port=1,actions=output:2",
        "in_port=65534,actions=drop",
        "in_port=LOCAL,actions=drop",
        "dl_src=00:11:22:33:44:55,actions=drop",
        "dl_dst=ff:ff:ff:ff:ff:ff,actions=drop",
        "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
        "dl_src=00:11:22:00:00:00/ff:ff:ff:00:00:00,actions=drop",
        "dl_dst=00:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
        "eth_src=aa:bb:cc:dd:ee:ff,eth_dst=00:00:00:00:00:01,actions=drop",
        "dl_type=0x0800,actions=drop",
        "dl_type=0x86dd,actions=drop",
        "dl_type=0x0806,actions=drop",
        "dl_type=0x1234,actions=drop",
        "eth_type=0x88cc,actions=drop",
        "dl_vlan=10,actions=drop",
        "dl_vlan=0,actions=drop",
        "dl_vlan=4095,actions=drop",
        "dl_vlan=0xffff,actions=drop",
        "dl_vlan_pcp=3,actions=drop",
        "dl_vlan=10,dl_vlan_pcp=5,actions=drop",
        "vlan_tci=0,actions=drop",
        "vlan_tci=0x100a,actions=drop",
        "vlan_tci=0x1000/0x1000,actions=drop",
        "vlan_tci=0x0000/0x1000,actions=drop",
        "vlan_tci=0xf00a/0xefff,actions=drop",
        "vlan_vid=0x100a,actions=drop",
        "vlan_pcp=2,actions=drop",
        // --- protocol shorthands
        "ip,actions=drop",
        "ipv6,actions=drop",
        "tcp,actions=drop",
        "udp,actions=drop",
        "sctp,actions=drop",
        "icmp,actions=drop",
        "icmp6,actions=drop",
        "arp,actions=drop",
        "rarp,actions=drop",
        "tcp6,actions=drop",
        "udp6,actions=drop",
        "sctp6,actions=drop",
        // --- IPv4
        "ip,nw_src=10.0.0.1,actions=drop",
        "ip,nw_dst=10.0.0.2,actions=drop",
        "ip,nw_src=10.0.0.0/8,nw_dst=192.168.0.0/16,actions=drop",
        "ip,nw_dst=192.168.1.0/255.255.255.0,actions=drop",
        "ip,nw_src=10.0.0.0/255.0.255.0,actions=drop",
        "ip,nw_src=10.1.2.3/32,actions=drop",
        "ip,nw_src=0.0.0.0/0,actions=drop",
        "ip,ip_src=1.2.3.4,ip_dst=5.6.7.8,actions=drop",
        "ip,nw_proto=47,actions=drop",
        "ip,nw_proto=6,actions=drop",
        "ip,nw_tos=16,actions=drop",
        "ip,nw_tos=252,actions=drop",
        "ip,nw_ecn=3,actions=drop",
        "ip,ip_ecn=1,actions=drop",
        "ip,ip_dscp=46,actions=drop",
        "ip,nw_ttl=64,actions=drop",
        "ip,nw_ttl=0,actions=drop",
        "ip,ip_frag=no,actions=drop",
        "ip,ip_frag=yes,actions=drop",
        "ip,ip_frag=first,actions=drop",
        "ip,ip_frag=later,actions=drop",
        "ip,ip_frag=not_later,actions=drop",
        "ip,nw_frag=later,actions=drop",
        "ipv6,ip_frag=first,actions=drop",
        // --- IPv6
        "ipv6,ipv6_src=2001:db8::1,actions=drop",
        "ipv6,ipv6_dst=2001:db8::/32,actions=drop",
        "ipv6,ipv6_src=fe80::/ffff:ffff:ffff:ffff::,actions=drop",
        "ipv6,ipv6_label=0x12345,actions=drop",
        "ipv6,ipv6_label=0x1/0xf,actions=drop",
        "ipv6,nw_tos=8,nw_ttl=255,actions=drop",
        "ipv6,nw_proto=17,actions=drop",
        "ipv6,ipv6_src=::1,ipv6_dst=::,actions=drop",
        // --- TCP / UDP / SCTP
        "tcp,tp_src=80,actions=drop",
        "tcp,tp_dst=443,actions=drop",
        "tcp,tcp_src=1234,tcp_dst=5678,actions=drop",
        "tcp,tp_src=0x1000/0xf000,actions=drop",
        "tcp,tp_dst=0/0xfc00,actions=drop",
        "tcp,tcp_flags=+syn-ack,actions=drop",
        "tcp,tcp_flags=+syn+ack,actions=drop",
        "tcp,tcp_flags=-syn-fin-rst,actions=drop",
        "tcp,tcp_flags=0x012/0x0ff,actions=drop",
        "tcp,tcp_flags=0x002,actions=drop",
        "tcp,tcp_flags=+ns+cwr+ece+urg+psh,actions=drop",
        "tcp6,tp_dst=22,actions=drop",
        "tcp6,tcp_flags=+rst,actions=drop",
        "udp,tp_src=53,actions=drop",
        "udp,udp_src=67,udp_dst=68,actions=drop",
        "udp,tp_dst=4789/0xfff0,actions=drop",
        "udp6,tp_dst=546,actions=drop",
        "sctp,tp_src=9,actions=drop",
        "sctp,sctp_src=1,sctp_dst=2,actions=drop",
        "sctp6,sctp_dst=36412,actions=drop",
        // --- ICMP / ICMPv6 / ND
        "icmp,icmp_type=8,actions=drop",
        "icmp,icmp_type=3,icmp_code=1,actions=drop",
        "icmp,icmp_code=0,actions=drop",
        "icmp6,icmp_type=128,actions=drop",
        "icmp6,icmpv6_type=129,icmpv6_code=0,actions=drop",
        "icmp6,icmp_type=135,nd_target=fe80::1,actions=drop",
        "icmp6,icmp_type=135,nd_sll=00:11:22:33:44:55,actions=drop",
        "icmp6,icmp_type=136,nd_target=2001:db8::1,nd_tll=66:77:88:99:aa:bb,actions=drop",
        "icmp6,icmp_type=135,nd_target=fe80::/64,actions=drop",
        "icmp6,icmp_type=136,nd_tll=00:00:00:00:00:00,actions=drop",
        "icmp6,icmp_type=135,nd_sll=00:11:22:00:00:00/ff:ff:ff:00:00:00,actions=drop",
        // --- ARP
        "arp,arp_op=1,actions=drop",
        "arp,arp_op=2,arp_spa=10.0.0.1,arp_tpa=10.0.0.2,actions=drop",
        "arp,arp_spa=10.0.0.0/24,actions=drop",
        "arp,arp_sha=00:11:22:33:44:55,arp_tha=00:00:00:00:00:00,actions=drop",
        "arp,arp_sha=00:11:22:00:00:00/ff:ff:ff:00:00:00,actions=drop",
        "rarp,arp_op=3,actions=drop",
        "arp,nw_src=10.0.0.1,actions=drop",
        // --- metadata
        "recirc_id=0,actions=drop",
        "recirc_id=5,ip,actions=drop",
        "dp_hash=0x1234/0xffff,actions=drop",
        "metadata=0x1,actions=drop",
        "metadata=0x10/0xff,actions=drop",
        "reg0=5,actions=drop",
        "reg1=0x1/0x1,actions=drop",
        "reg7=0xffffffff,actions=drop",
        "reg8=0x80000000/0x80000000,actions=drop",
        "reg15=1,reg14=2,actions=drop",
        "xreg0=0x100000001,actions=drop",
        "pkt_mark=5,actions=drop",
        "pkt_mark=0x1/0xff,actions=drop",
        "ct_state=+trk,actions=drop",
        "ct_state=-trk,actions=drop",
        "ct_state=+trk+new,actions=drop",
        "ct_state=+trk+est-new,actions=drop",
        "ct_state=+trk+rel,actions=drop",
        "ct_state=+trk+inv,actions=drop",
        "ct_state=+trk+rpl+est,actions=drop",
        "ct_state=+trk+snat+dnat,actions=drop",
        "ct_state=0x21/0x21,actions=drop",
        "ct_zone=5,actions=drop",
        "ct_mark=0x1,actions=drop",
        "ct_mark=0x1/0xff,actions=drop",
        "ct_label=0x1,actions=drop",
        "ct_label=0x1/0xffff,actions=drop",
        "ct_label=0x10000000000000000000000000000000/0xf0000000000000000000000000000000,actions=drop",
        // --- output actions
        "actions=output:1",
        "actions=output:1,output:2,output:3",
        "actions=1,2",
        "actions=NORMAL",
        "actions=FLOOD",
        "actions=ALL",
        "actions=IN_PORT",
        "actions=CONTROLLER",
        "actions=CONTROLLER:128",
        "actions=controller(max_len=64)",
        "actions=LOCAL",
        "actions=output:LOCAL",
        "actions=output:NXM_NX_REG0[]",
        "actions=output:reg1[0..15]",
        // --- resubmit / goto
        "actions=resubmit(,1)",
        "actions=resubmit(2,3)",
        "actions=resubmit(2)",
        "actions=resubmit:3",
        "actions=resubmit(,1),resubmit(,2)",
        "actions=goto_table:1",
        "actions=output:1,goto_table:5",
        // --- field modification
        "ip,actions=set_field:10.0.0.1->ip_src",
        "ip,actions=set_field:10.0.0.1->nw_dst",
        "actions=set_field:00:11:22:33:44:55->eth_dst",
        "actions=set_field:00:11:22:33:44:55->eth_src",
        "actions=set_field:5->reg0",
        "actions=set_field:0x1/0xf->reg1",
        "tcp,actions=set_field:80->tcp_dst",
        "udp,actions=set_field:53->udp_src",
        "actions=set_field:100->vlan_vid",
        "actions=set_field:4196->vlan_vid",
        "ipv6,actions=set_field:fe80::1->ipv6_src",
        "actions=set_field:0x1->metadata",
        "actions=set_field:7->pkt_mark",
        "ip,actions=set_field:10->ip_dscp",
        "ip,actions=set_field:64->nw_ttl",
        "actions=load:1->NXM_NX_REG0[]",
        "actions=load:0x5->NXM_NX_REG0[0..15]",
        "actions=load:0x1->reg0[0..15]",
        "actions=load:0xffff->reg2[16..31]",
        "actions=load:0x001122334455->NXM_OF_ETH_DST[]",
        "ip,actions=load:0x0a000001->NXM_OF_IP_SRC[]",
        "actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
        "actions=move:reg0[0..15]->reg1[16..31]",
        "actions=move:NXM_NX_REG0[]->NXM_NX_REG1[]",
        "ip,actions=move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[]",
        "actions=mod_dl_src:00:11:22:33:44:55",
        "actions=mod_dl_dst:66:77:88:99:aa:bb",
        "ip,actions=mod_nw_src:1.2.3.4",
        "ip,actions=mod_nw_dst:5.6.7.8",
        "ip,actions=mod_nw_tos:8",
        "tcp,actions=mod_tp_src:80",
        "udp,actions=mod_tp_dst:53",
        "actions=mod_vlan_vid:10",
        "actions=mod_vlan_pcp:3",
        "actions=strip_vlan",
        "actions=push_vlan:0x8100",
        "actions=push_vlan:0x88a8,set_field:4196->vlan_vid",
        "actions=pop_vlan",
        "ip,actions=dec_ttl",
        "ipv6,actions=dec_ttl,output:1",
        "ip,actions=dec_ttl(1,2)",
        // --- conntrack
        "ip,actions=ct(commit)",
        "ip,actions=ct(commit,zone=5)",
        "ip,actions=ct(table=1)",
        "ip,actions=ct(zone=NXM_NX_REG0[0..15],table=2)",
        "ip,actions=ct(commit,nat(src=10.0.0.1))",
        "ip,actions=ct(nat)",
        "ip,actions=ct(nat,table=3)",
        "tcp,actions=ct(commit,nat(dst=10.0.0.1:80))",
        "ip,actions=ct(commit,nat(src=10.0.0.1-10.0.0.10:1000-2000,random))",
        "ipv6,actions=ct(commit,nat(src=[2001:db8::1]))",
        "ipv6,actions=ct(commit,nat(dst=[2001:db8::1]-[2001:db8::5]:80-90))",
        "ip,actions=ct(commit,exec(set_field:1->ct_mark))",
        "ip,actions=ct(commit,exec(set_field:0x1/0x1->ct_mark,set_field:0x2->ct_label))",
        "ip,actions=ct(commit,exec(load:1->NXM_NX_CT_MARK[]))",
        "ip,actions=ct(commit,force)",
        "ip,actions=ct(commit,zone=5,table=3,nat(src=10.0.0.1-10.0.0.5:100-200),exec(set_field:1->ct_mark))",
        "ct_state=-trk,ip,actions=ct(table=0)",
        "ct_state=+trk+est,ip,actions=ct_clear,output:1",
        "actions=ct_clear",
        // --- note, combinations
        "actions=note:01.02",
        "actions=note:",
        "actions=note:0123456789abcdef,output:1",
        "in_port=1,dl_vlan=5,actions=strip_vlan,mod_dl_src:00:00:00:00:00:01,output:2",
        "table=1,priority=200,tcp,nw_dst=10.0.0.0/24,tp_dst=80,actions=set_field:10.0.0.9->ip_dst,dec_ttl,resubmit(,2)",
        "priority=10,in_port=2,ip,ct_state=-trk,actions=ct(zone=1,table=1)",
        "priority=100,arp,arp_tpa=10.0.0.1,arp_op=1,actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],mod_dl_src:00:00:00:00:00:01,load:0x2->NXM_OF_ARP_OP[],IN_PORT",
        "cookie=0x5,table=2,icmp6,icmp_type=135,nd_target=fe80::1,actions=NORMAL",
        // --- invalid on purpose
        "foo=1,actions=drop",
        "",
        "in_port=1",
        "tp_src=80,actions=drop",
        "nw_src=10.0.0.1,actions=drop",
        "icmp_type=8,actions=drop",
        "nd_target=fe80::1,actions=drop",
        "icmp6,nd_target=fe80::1,actions=drop",
        "arp_op=1,actions=drop",
        "ip,nw_src=300.0.0.1,actions=drop",
        "ip,nw_src=10.0.0.0/33,actions=drop",
        "dl_vlan=5000,actions=drop",
        "dl_vlan_pcp=8,actions=drop",
        "dl_src=00:11:22:33:44,actions=drop",
        "tcp,tp_src=70000,actions=drop",
        "ip,nw_tos=3,actions=drop",
        "ip,ip_dscp=64,actions=drop",
        "ip,ip_frag=maybe,actions=drop",
        "ct_state=+foo,actions=drop",
        "tcp,tcp_flags=+bogus,actions=drop",
        "priority=70000,actions=drop",
        "table=300,actions=drop",
        "cookie=0x1/0xff,actions=drop",
        "reg16=1,actions=drop",
        "actions=foo",
        "actions=output:",
        "actions=resubmit(,300)",
        "actions=drop,output:1",
        "actions=set_field:1->nonexistent",
        "actions=set_field:1->ct_mark",
        "actions=mod_tp_src:80",
        "actions=mod_nw_src:1.2.3.4",
        "ip,actions=ct(commit,exec(set_field:1->reg0))",
        "actions=ct(commit,nat(src=10.0.0.1))",
        "actions=note:hello",
        "actions=load:1->NXM_NX_REG0[0..40]",
        "actions=move:reg0[]->reg1[0..7]",
        "actions=push_vlan:0x0800",
        "ip,,actions=drop",
        "ip actions=drop garbage",
    ]
}

struct Gen<'a> {
    rng: &'a mut TestRng,
}

impl Gen<'_> {
    fn pick<'b>(&mut self, items: &[&'b str]) -> &'b str {
        self.rng.pick(items).copied().unwrap_or("")
    }

    fn mac(&mut self) -> String {
        let b = self.rng.bytes(6);
        format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }

    fn ip4(&mut self) -> String {
        let b = self.rng.bytes(4);
        format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
    }

    fn ip4_masked(&mut self) -> String {
        match self.rng.below(4) {
            0 => self.ip4(),
            1 => format!("{}/{}", self.ip4(), self.rng.range(0, 32)),
            2 => format!("{}/255.255.{}.0", self.ip4(), self.rng.next_u8()),
            _ => format!("{}/{}", self.ip4(), self.rng.range(8, 31)),
        }
    }

    fn ip6(&mut self) -> String {
        match self.rng.below(4) {
            0 => format!("2001:db8::{:x}", self.rng.next_u16()),
            1 => format!("fe80::{:x}:{:x}", self.rng.next_u16(), self.rng.next_u16()),
            2 => "::".to_string(),
            _ => {
                let w: Vec<String> = (0..8)
                    .map(|_| format!("{:x}", self.rng.next_u16()))
                    .collect();
                w.join(":")
            }
        }
    }

    fn ip6_masked(&mut self) -> String {
        match self.rng.below(3) {
            0 => self.ip6(),
            _ => format!("{}/{}", self.ip6(), self.rng.range(0, 128)),
        }
    }

    fn port_masked(&mut self) -> String {
        match self.rng.below(3) {
            0 => format!("0x{:x}/0x{:x}", self.rng.next_u16(), self.rng.next_u16()),
            _ => self.rng.next_u16().to_string(),
        }
    }

    fn hex_masked(&mut self, bits: u32) -> String {
        let m = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let v = self.rng.next_u64() & m;
        if self.rng.chance(1, 2) {
            format!("0x{v:x}")
        } else {
            let mask = self.rng.next_u64() & m;
            format!("0x{:x}/0x{mask:x}", v & mask)
        }
    }

    fn ct_state(&mut self) -> String {
        let mut s = String::new();
        for f in ["new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"] {
            match self.rng.below(4) {
                0 => {
                    s.push('+');
                    s.push_str(f);
                }
                1 => {
                    s.push('-');
                    s.push_str(f);
                }
                _ => {}
            }
        }
        if s.is_empty() {
            s.push_str("+trk");
        }
        s
    }

    fn tcp_flags(&mut self) -> String {
        if self.rng.chance(1, 3) {
            return format!(
                "0x{:03x}/0x{:03x}",
                self.rng.next_u16() & 0xfff & 0x0ff,
                self.rng.next_u16() & 0x0fff
            );
        }
        let mut s = String::new();
        for f in ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns"] {
            match self.rng.below(5) {
                0 => {
                    s.push('+');
                    s.push_str(f);
                }
                1 => {
                    s.push('-');
                    s.push_str(f);
                }
                _ => {}
            }
        }
        if s.is_empty() {
            s.push_str("+syn");
        }
        s
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum L3 {
    None,
    Ip4,
    Ip6,
    Arp,
}

/// `n` random flow strings from `seed`, composed from the pieces of [`hand_written`] with
/// prerequisites respected, so nearly all are valid for OVS (the golden file says which).
pub fn generated(seed: u64, n: usize) -> Vec<String> {
    let mut rng = TestRng::new(seed);
    let mut g = Gen { rng: &mut rng };
    (0..n).map(|_| one_flow(&mut g)).collect()
}

fn one_flow(g: &mut Gen<'_>) -> String {
    let mut m: Vec<String> = Vec::new();
    if g.rng.chance(1, 4) {
        m.push(format!("table={}", g.rng.range(0, 10)));
    }
    if g.rng.chance(1, 2) {
        m.push(format!("priority={}", g.rng.range(0, 65535)));
    }
    if g.rng.chance(1, 6) {
        m.push(format!("cookie=0x{:x}", g.rng.next_u64()));
    }
    if g.rng.chance(1, 8) {
        m.push(format!("idle_timeout={}", g.rng.range(0, 600)));
    }
    if g.rng.chance(1, 8) {
        m.push(format!("hard_timeout={}", g.rng.range(0, 600)));
    }
    let proto = g.pick(&[
        "",
        "",
        "ip",
        "ipv6",
        "tcp",
        "udp",
        "sctp",
        "icmp",
        "icmp6",
        "arp",
        "rarp",
        "tcp6",
        "udp6",
        "sctp6",
        "dl_type=0x0800",
        "dl_type=0x86dd",
        "dl_type=0x88cc",
    ]);
    let l3 = match proto {
        "ip" | "tcp" | "udp" | "sctp" | "icmp" | "dl_type=0x0800" => L3::Ip4,
        "ipv6" | "icmp6" | "tcp6" | "udp6" | "sctp6" | "dl_type=0x86dd" => L3::Ip6,
        "arp" | "rarp" => L3::Arp,
        _ => L3::None,
    };
    let l4 = match proto {
        "tcp" | "tcp6" => "tcp",
        "udp" | "udp6" => "udp",
        "sctp" | "sctp6" => "sctp",
        "icmp" => "icmp",
        "icmp6" => "icmp6",
        _ => "",
    };
    if !proto.is_empty() {
        m.push(proto.to_string());
    }
    // Metadata and L2 fields, any protocol.
    let n_meta = g.rng.below(3);
    for _ in 0..n_meta {
        let f = match g.rng.below(14) {
            0 => format!("in_port={}", g.rng.range(1, 100)),
            1 => format!("dl_src={}", g.mac()),
            2 => format!("dl_dst={}", g.mac()),
            3 => format!(
                "dl_dst={}/{}",
                g.mac(),
                g.pick(&[
                    "01:00:00:00:00:00",
                    "ff:ff:ff:00:00:00",
                    "ff:ff:ff:ff:ff:ff"
                ])
            ),
            4 => format!("dl_vlan={}", g.rng.range(0, 4095)),
            5 => format!("dl_vlan_pcp={}", g.rng.range(0, 7)),
            6 => format!("reg{}={}", g.rng.range(0, 15), g.hex_masked(32)),
            7 => format!("metadata={}", g.hex_masked(64)),
            8 => format!("pkt_mark={}", g.hex_masked(32)),
            9 => format!("ct_state={}", g.ct_state()),
            10 => format!("ct_zone={}", g.rng.range(0, 65535)),
            11 => format!("ct_mark={}", g.hex_masked(32)),
            12 => format!("recirc_id={}", g.rng.range(0, 1000)),
            _ => format!("dp_hash={}", g.hex_masked(32)),
        };
        let key = f.split('=').next().unwrap_or("").to_string();
        if !m.iter().any(|x| x.starts_with(&format!("{key}="))) {
            m.push(f);
        }
    }
    // L3 fields.
    let n_l3 = g.rng.below(3);
    for _ in 0..n_l3 {
        let f = match l3 {
            L3::Ip4 => match g.rng.below(8) {
                0 => format!("nw_src={}", g.ip4_masked()),
                1 => format!("nw_dst={}", g.ip4_masked()),
                2 => format!("nw_tos={}", g.rng.below(64) * 4),
                3 => format!("nw_ecn={}", g.rng.below(4)),
                4 => format!("nw_ttl={}", g.rng.below(256)),
                5 => format!(
                    "ip_frag={}",
                    g.pick(&["no", "yes", "first", "later", "not_later"])
                ),
                6 => format!("ip_dscp={}", g.rng.below(64)),
                _ if l4.is_empty() => format!("nw_proto={}", g.rng.below(256)),
                _ => format!("nw_ttl={}", g.rng.below(256)),
            },
            L3::Ip6 => match g.rng.below(7) {
                0 => format!("ipv6_src={}", g.ip6_masked()),
                1 => format!("ipv6_dst={}", g.ip6_masked()),
                2 => format!("ipv6_label=0x{:x}", g.rng.next_u32() & 0xf_ffff),
                3 => format!("nw_tos={}", g.rng.below(64) * 4),
                4 => format!("nw_ttl={}", g.rng.below(256)),
                5 => format!(
                    "ip_frag={}",
                    g.pick(&["no", "yes", "first", "later", "not_later"])
                ),
                _ => format!("nw_ecn={}", g.rng.below(4)),
            },
            L3::Arp => match g.rng.below(5) {
                0 => format!("arp_op={}", g.rng.range(1, 4)),
                1 => format!("arp_spa={}", g.ip4_masked()),
                2 => format!("arp_tpa={}", g.ip4_masked()),
                3 => format!("arp_sha={}", g.mac()),
                _ => format!("arp_tha={}", g.mac()),
            },
            L3::None => continue,
        };
        let key = f.split('=').next().unwrap_or("").to_string();
        if !m.iter().any(|x| x.starts_with(&format!("{key}="))) {
            m.push(f);
        }
    }
    // L4 fields.
    match l4 {
        "tcp" | "udp" | "sctp" => {
            if g.rng.chance(1, 2) {
                m.push(format!("tp_src={}", g.port_masked()));
            }
            if g.rng.chance(1, 2) {
                m.push(format!("tp_dst={}", g.port_masked()));
            }
            if l4 == "tcp" && g.rng.chance(1, 3) {
                m.push(format!("tcp_flags={}", g.tcp_flags()));
            }
        }
        "icmp" => {
            if g.rng.chance(2, 3) {
                m.push(format!("icmp_type={}", g.rng.below(256)));
            }
            if g.rng.chance(1, 3) {
                m.push(format!("icmp_code={}", g.rng.below(256)));
            }
        }
        "icmp6" => {
            if g.rng.chance(1, 2) {
                let ns = g.rng.chance(1, 2);
                m.push(format!("icmp_type={}", if ns { 135 } else { 136 }));
                m.push("icmp_code=0".to_string());
                if g.rng.chance(1, 2) {
                    m.push(format!("nd_target={}", g.ip6_masked()));
                }
                if g.rng.chance(1, 2) {
                    m.push(format!(
                        "{}={}",
                        if ns { "nd_sll" } else { "nd_tll" },
                        g.mac()
                    ));
                }
            } else if g.rng.chance(1, 2) {
                m.push(format!("icmp_type={}", g.rng.below(256)));
            }
        }
        _ => {}
    }
    // Actions.
    let actions = if g.rng.chance(1, 8) {
        "drop".to_string()
    } else {
        let n = g.rng.range(1, 4);
        let mut acts = Vec::new();
        for _ in 0..n {
            let a = match g.rng.below(22) {
                0 => format!("output:{}", g.rng.range(1, 100)),
                1 => g
                    .pick(&["NORMAL", "FLOOD", "ALL", "IN_PORT", "LOCAL", "CONTROLLER"])
                    .to_string(),
                2 => format!("CONTROLLER:{}", g.rng.range(0, 65535)),
                3 => format!("resubmit(,{})", g.rng.range(0, 254)),
                4 => format!("resubmit({},{})", g.rng.range(1, 100), g.rng.range(0, 254)),
                5 => format!("set_field:{}->reg{}", g.rng.next_u32(), g.rng.range(0, 15)),
                6 => format!(
                    "load:0x{:x}->NXM_NX_REG{}[0..15]",
                    g.rng.next_u16(),
                    g.rng.range(0, 15)
                ),
                7 => format!(
                    "move:reg{}[]->reg{}[]",
                    g.rng.range(0, 15),
                    g.rng.range(0, 15)
                ),
                8 => format!("mod_dl_src:{}", g.mac()),
                9 => format!("mod_dl_dst:{}", g.mac()),
                10 => format!("mod_vlan_vid:{}", g.rng.range(0, 4095)),
                11 => format!("mod_vlan_pcp:{}", g.rng.range(0, 7)),
                12 => g
                    .pick(&[
                        "strip_vlan",
                        "pop_vlan",
                        "push_vlan:0x8100",
                        "push_vlan:0x88a8",
                    ])
                    .to_string(),
                13 => format!("note:{:02x}.{:02x}", g.rng.next_u8(), g.rng.next_u8()),
                14 => format!("set_field:{}->eth_dst", g.mac()),
                15 if l3 == L3::Ip4 => {
                    format!("{}:{}", g.pick(&["mod_nw_src", "mod_nw_dst"]), g.ip4())
                }
                16 if l3 == L3::Ip4 || l3 == L3::Ip6 => match g.rng.below(3) {
                    0 => "dec_ttl".to_string(),
                    1 => format!("mod_nw_tos:{}", g.rng.below(64) * 4),
                    _ => format!("set_field:{}->ip_dscp", g.rng.below(64)),
                },
                17 if l4 == "tcp" || l4 == "udp" => format!(
                    "{}:{}",
                    g.pick(&["mod_tp_src", "mod_tp_dst"]),
                    g.rng.next_u16()
                ),
                18 if l3 == L3::Ip4 => {
                    format!("set_field:{}->{}", g.ip4(), g.pick(&["ip_src", "ip_dst"]))
                }
                19 if l3 == L3::Ip6 => format!(
                    "set_field:{}->{}",
                    g.ip6(),
                    g.pick(&["ipv6_src", "ipv6_dst"])
                ),
                20 if l3 == L3::Ip4 || l3 == L3::Ip6 => {
                    let mut parts = Vec::new();
                    if g.rng.chance(1, 2) {
                        parts.push("commit".to_string());
                    }
                    if g.rng.chance(1, 2) {
                        parts.push(format!("zone={}", g.rng.range(0, 65535)));
                    }
                    if g.rng.chance(1, 2) {
                        parts.push(format!("table={}", g.rng.range(0, 254)));
                    }
                    if l3 == L3::Ip4 && g.rng.chance(1, 3) {
                        parts.push(format!("nat(src={})", g.ip4()));
                    }
                    if parts.first().map(String::as_str) == Some("commit") && g.rng.chance(1, 3) {
                        parts.push(format!("exec(set_field:0x{:x}->ct_mark)", g.rng.next_u32()));
                    }
                    format!("ct({})", parts.join(","))
                }
                21 => "ct_clear".to_string(),
                _ => format!("output:{}", g.rng.range(1, 100)),
            };
            acts.push(a);
        }
        acts.join(",")
    };
    m.push(format!("actions={actions}"));
    m.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_sizes() {
        let h = hand_written();
        assert!(h.len() >= 150, "{}", h.len());
        let mut seen = std::collections::HashSet::new();
        for s in &h {
            assert!(seen.insert(*s), "duplicate corpus entry {s:?}");
        }
        let g = generated(1, 300);
        assert_eq!(g.len(), 300);
        assert_eq!(g, generated(1, 300));
        assert_ne!(g, generated(2, 300));
        assert!(g.iter().all(|f| f.contains("actions=")));
    }

    #[test]
    fn generated_respects_prerequisites() {
        for f in generated(9, 2000) {
            let has = |p: &str| f.split(',').any(|t| t == p);
            if f.contains("tp_src=") || f.contains("tp_dst=") {
                assert!(
                    ["tcp", "udp", "sctp", "tcp6", "udp6", "sctp6"]
                        .iter()
                        .any(|p| has(p)),
                    "{f}"
                );
            }
            if f.contains("nd_target=") {
                assert!(has("icmp6"), "{f}");
            }
            if f.contains("mod_nw_src") {
                assert!(
                    has("ip")
                        || has("tcp")
                        || has("udp")
                        || has("sctp")
                        || has("icmp")
                        || f.contains("dl_type=0x0800"),
                    "{f}"
                );
            }
        }
    }
}
