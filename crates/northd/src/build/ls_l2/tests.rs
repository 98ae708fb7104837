//! Texts of the trickier flows.

use super::*;

#[test]
fn solicited_node_and_nd_match() {
    let a: Ipv6Addr = "fe80::858:acff:fe12:2".parse().unwrap();
    assert_eq!(
        nd_ns_match(a),
        "nd_ns && ip6.dst == {fe80::858:acff:fe12:2, ff02::1:ff12:2} && nd.target == fe80::858:acff:fe12:2"
    );
}

#[test]
fn quoting() {
    assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
}
