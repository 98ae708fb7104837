//! Texts of the trickier flows, as ovn-northd 23.03 prints them.

use super::*;

#[test]
fn solicited_node_and_nd_match() {
    let a: Ipv6Addr = "fe80::858:acff:fe12:2".parse().unwrap();
    assert_eq!(
        nd_ns_match(a),
        "nd_ns && ip6.dst == {fe80::858:acff:fe12:2, ff02::1:ff12:2} && nd.target == fe80::858:acff:fe12:2"
    );
    let b: Ipv6Addr = "fd00:1::10".parse().unwrap();
    assert_eq!(solicited_node(b).to_string(), "ff02::1:ff00:10");
}

#[test]
fn quoting() {
    assert_eq!(quoted("ns0_pod-0-0"), "\"ns0_pod-0-0\"");
    assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
}

#[test]
fn arp_reply_text() {
    assert_eq!(
        arp_reply("0a:58:ac:12:00:02", "172.18.0.2"),
        "eth.dst = eth.src; eth.src = 0a:58:ac:12:00:02; arp.op = 2; /* ARP reply */ \
         arp.tha = arp.sha; arp.sha = 0a:58:ac:12:00:02; arp.tpa = arp.spa; \
         arp.spa = 172.18.0.2; outport = inport; flags.loopback = 1; output;"
    );
}

#[test]
fn mcast_unregistered_spacing() {
    // The relay clone keeps a trailing space; the static flood has none after '='.
    assert_eq!(
        mcast_unregistered_action(true, false),
        "clone { outport = \"_MC_mrouter_flood\"; output; }; "
    );
    assert_eq!(
        mcast_unregistered_action(false, true),
        "outport =\"_MC_static\"; output;"
    );
    assert_eq!(
        mcast_unregistered_action(true, true),
        "clone { outport = \"_MC_mrouter_flood\"; output; }; outport =\"_MC_static\"; output;"
    );
    assert_eq!(mcast_unregistered_action(false, false), "drop;");
}

#[test]
fn router_forwarding_clone_spacing() {
    assert_eq!(
        router_forward_action("\"stor-node-0\"", true),
        "clone {outport = \"stor-node-0\"; output; }; outport = \"_MC_flood_l2\"; output;"
    );
    assert_eq!(
        router_forward_action("\"jtor-GR_node-0\"", false),
        "outport = \"jtor-GR_node-0\"; output;"
    );
}

#[test]
fn lb_vips_inside_a_network() {
    let ips: Vec<Ipv4Addr> = ["10.0.0.1", "172.18.0.2", "172.18.255.255", "172.19.0.1"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let net = crate::addr::parse_ipv4_net("172.18.0.5/16").unwrap();
    assert_eq!(v4_in(&ips, net), &ips[1..3]);
    let v6: Vec<Ipv6Addr> = ["fd00:8::200", "fd00:9::", "fd00:9::200", "fd00:a::1"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let net = crate::addr::parse_ipv6_net("fd00:9::1/64").unwrap();
    assert_eq!(v6_in(&v6, net), &v6[1..3]);
    let host = crate::addr::parse_ipv6_net("fd00:a::1/128").unwrap();
    assert_eq!(v6_in(&v6, host), &v6[3..4]);
}

#[test]
fn lb_vip_keys() {
    use crate::build::lb_vip_ip;
    assert_eq!(
        lb_vip_ip("172.30.0.1:80"),
        Some("172.30.0.1".parse().unwrap())
    );
    assert_eq!(lb_vip_ip("172.30.0.1"), Some("172.30.0.1".parse().unwrap()));
    assert_eq!(lb_vip_ip("[fd00::a]:80"), Some("fd00::a".parse().unwrap()));
    assert_eq!(lb_vip_ip("fd00::a"), Some("fd00::a".parse().unwrap()));
    assert_eq!(lb_vip_ip("bogus"), None);
}
