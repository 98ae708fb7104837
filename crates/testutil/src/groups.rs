//! Random pipelines with OpenFlow groups, for the megaflow soundness property and the
//! differential tests (`ofproto/tests/megaflow_soundness_groups.rs`).
//!
//! A pipeline is a list of `ovs-ofctl add-group` texts and `add-flows` lines over ports 1..4:
//! groups of every type (`all`, `indirect`, `fast_failover` with live and dead watch ports
//! and watched groups, `select` with the default method, `dp_hash` or `hash` over random
//! fields, random weights including 0), buckets with outputs, rewrites, `resubmit`s and
//! chains to other groups (loops included, which end at the depth limit); flows in two
//! tables matching on addresses, protocols and ports, whose actions use groups before and
//! after other actions. Packets are TCP, UDP and ICMP frames whose fields are drawn from
//! small pools so that rules hit. Written independently of the code under test.

use crate::packets::{Ipv4Spec, TcpSpec, ethernet, icmp4, ipv4, tcp, udp};
use crate::rng::TestRng;

/// A random pipeline with groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPipeline {
    /// `add-group` texts, in the order to add them.
    pub groups: Vec<String>,
    /// `add-flows` lines.
    pub flows: Vec<String>,
}

const FIELDS: &[&str] = &[
    "ip_src", "ip_dst", "tcp_src", "tcp_dst", "udp_src", "udp_dst", "eth_src", "eth_dst",
    "nw_proto",
];
const DSTS: &[&str] = &["10.0.0.1", "10.0.0.2", "10.0.1.1", "172.16.0.1"];
const PORTS: &[u16] = &[22, 53, 80, 443];

fn bucket_action(rng: &mut TestRng, n_groups: u32, me: u32) -> String {
    let out = format!("output:{}", rng.range(1, 5));
    match rng.below(9) {
        0 => format!("mod_dl_src:00:00:00:00:00:{:02x},{out}", rng.next_u8()),
        1 => format!(
            "set_field:10.9.{}.{}->ip_dst,{out}",
            rng.next_u8(),
            rng.next_u8()
        ),
        2 => "resubmit(,1)".into(),
        3 if n_groups > 1 => {
            // Mostly chains to other groups; now and then to itself (a loop).
            let g = if rng.chance(1, 6) {
                me
            } else {
                1 + rng.below(u64::from(n_groups)) as u32
            };
            format!("group:{g}")
        }
        4 => format!("dec_ttl,{out}"),
        5 => format!("{out},output:{}", rng.range(1, 5)),
        6 => "mod_nw_tos:8".into(),
        _ => out,
    }
}

/// A random pipeline with up to `max_groups` groups.
pub fn random_group_pipeline(rng: &mut TestRng, max_groups: u32) -> GroupPipeline {
    let n = 1 + rng.below(u64::from(max_groups.max(1))) as u32;
    let mut groups = Vec::new();
    for id in 1..=n {
        let nb = 1 + rng.below(4) as usize;
        let (ty, head) = match rng.below(6) {
            0 => ("all", String::new()),
            1 => ("indirect", String::new()),
            2 => ("ff", String::new()),
            3 => ("select", ",selection_method=dp_hash".to_string()),
            4 => {
                let mut f: Vec<&str> = Vec::new();
                for _ in 0..1 + rng.below(3) {
                    let x = *rng.pick(FIELDS).unwrap_or(&"ip_src");
                    if !f.contains(&x) {
                        f.push(x);
                    }
                }
                let param = if rng.chance(1, 2) {
                    format!(",selection_method_param={}", rng.below(1000))
                } else {
                    String::new()
                };
                (
                    "select",
                    format!(",selection_method=hash{param},fields({})", f.join(",")),
                )
            }
            _ => ("select", String::new()),
        };
        let nb = if ty == "indirect" { 1 } else { nb };
        let mut s = format!("group_id={id},type={ty}{head}");
        for _ in 0..nb {
            s.push_str(",bucket=");
            if ty == "select" && rng.chance(2, 3) {
                // Weights from 0 to 400: sometimes too uneven for a dp_hash table.
                let w = if rng.chance(1, 8) {
                    0
                } else {
                    rng.range(1, 401)
                };
                s.push_str(&format!("weight:{w},"));
            }
            if ty == "ff" {
                if rng.chance(1, 3) && n > 1 {
                    s.push_str(&format!("watch_group:{},", 1 + rng.below(u64::from(n))));
                } else {
                    // Ports 1..4 exist; 7..9 do not (dead).
                    let p = *rng.pick(&[1u64, 2, 3, 4, 7, 8, 9]).unwrap_or(&1);
                    s.push_str(&format!("watch_port:{p},"));
                }
            }
            s.push_str("actions=");
            s.push_str(&bucket_action(rng, n, id));
        }
        groups.push(s);
    }
    let mut flows = vec!["table=0,priority=0,actions=drop".to_string()];
    let g = |rng: &mut TestRng| format!("group:{}", 1 + rng.below(u64::from(n)));
    for _ in 0..2 + rng.below(6) {
        let m = match rng.below(5) {
            0 => format!("ip,nw_dst={}", rng.pick(DSTS).unwrap_or(&"10.0.0.1")),
            1 => format!("tcp,tp_dst={}", rng.pick(PORTS).unwrap_or(&80)),
            2 => format!("udp,tp_src={}", rng.pick(PORTS).unwrap_or(&53)),
            3 => "icmp".to_string(),
            _ => format!("in_port={}", rng.range(1, 5)),
        };
        let acts = match rng.below(5) {
            0 => format!("{},output:{}", g(rng), rng.range(1, 5)),
            1 => format!("mod_dl_dst:00:00:00:00:00:0{},{}", rng.below(10), g(rng)),
            2 => "resubmit(,1)".to_string(),
            3 => format!("{},{}", g(rng), g(rng)),
            _ => g(rng),
        };
        flows.push(format!(
            "table=0,priority={},{m},actions={acts}",
            rng.range(1, 100)
        ));
    }
    for _ in 0..1 + rng.below(3) {
        let m = match rng.below(3) {
            0 => format!("tcp,tp_src={}", rng.pick(PORTS).unwrap_or(&80)),
            1 => "udp".to_string(),
            _ => format!("ip,nw_src=10.1.0.{}", rng.below(4)),
        };
        flows.push(format!(
            "table=1,priority={},{m},actions={},output:{}",
            rng.range(1, 100),
            g(rng),
            rng.range(1, 5)
        ));
    }
    GroupPipeline { groups, flows }
}

/// `n` random frames (in_port, bytes) for a group pipeline: TCP, UDP and ICMP over IPv4
/// with addresses and ports from the pools the flows match on.
pub fn random_group_packets(rng: &mut TestRng, n: usize) -> Vec<(u32, Vec<u8>)> {
    (0..n)
        .map(|_| {
            let in_port = rng.range(1, 5) as u32;
            let src = [10, 1, 0, rng.below(4) as u8];
            let dst: std::net::Ipv4Addr = rng
                .pick(DSTS)
                .and_then(|d| d.parse().ok())
                .unwrap_or(std::net::Ipv4Addr::new(10, 0, 0, 1));
            let dst = dst.octets();
            let mac = |x: u8| [0x00, 0x16, 0x3e, 0, 0, x];
            let (sp, dp) = (
                *rng.pick(PORTS).unwrap_or(&80),
                *rng.pick(PORTS).unwrap_or(&80),
            );
            let l3 = match rng.below(3) {
                0 => {
                    let ip = Ipv4Spec::new(src, dst, 6);
                    ipv4(&ip, &tcp(ip.pseudo(), &TcpSpec::new(sp, dp, 0x02), &[]))
                }
                1 => {
                    let ip = Ipv4Spec::new(src, dst, 17);
                    ipv4(&ip, &udp(ip.pseudo(), sp, dp, &[0; 8]))
                }
                _ => {
                    let ip = Ipv4Spec::new(src, dst, 1);
                    ipv4(&ip, &icmp4(8, 0, &[0; 8]))
                }
            };
            let frame = ethernet(
                mac(rng.below(4) as u8),
                mac(0x10 + rng.below(4) as u8),
                &[],
                0x0800,
                &l3,
            );
            (in_port, frame)
        })
        .collect()
}
