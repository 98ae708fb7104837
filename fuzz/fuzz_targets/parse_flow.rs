//! Flow text → parse: never panics; an error's column lies inside the text; what parses prints
//! in a form that parses again to the same flow.
#![no_main]
use flow::FieldId;
use flow::ofp::FlowSpec;
use libfuzzer_sys::fuzz_target;

/// OVS names an nw_frag match by its two bits, and two masks share a name: value 0 under the
/// one-bit mask "is a fragment" and under both bits print `nw_frag=no`; value "later" under
/// the one-bit mask "later" and "fragment + later" under both print `nw_frag=later`. A name
/// parses to its two-bit meaning (the first entry of OVS's `all_frags` table), so the one-bit
/// forms come back two-bit. OVS 3.1 does the same: on a live bridge `ip,nw_frag[0]:0` and
/// `ip,nw_frag=no` are two flows that `dump-flows` prints alike. We print as OVS does, so
/// these do not round-trip either (found by this target, 2026-11-25, from
/// `ip6,tcp,tcp_flags:30/1()ip,nw_frag[00]:0`; kept as seed nw-frag-one-bit-mask).
/// True when `again`'s nw_frag is `spec`'s with exactly that change.
fn frag_name_change(spec: &FlowSpec, again: &FlowSpec) -> bool {
    let f = FieldId::NwFrag;
    let (v, m) = (spec.match_.value(f) & 3, spec.match_.mask_of(f) & 3);
    let (v2, m2) = (again.match_.value(f) & 3, again.match_.mask_of(f) & 3);
    matches!((m, v, m2, v2), (1, 0, 3, 0) | (2, 2, 3, 3))
}

/// OpenFlow 1.0 cannot match "no 802.1Q header" with VID or PCP bits set: OVS's OF1.0
/// conversion turns `vlan_tci=0x0003` (CFI clear) into `vlan_tci=0x0000`. A flow that needed
/// NXM for another field keeps `vlan_tci=0x0003` and prints it without that field; the printed
/// text alone is OF1.0-usable and reads back as `vlan_tci=0x0000`. `ovs-ofctl parse-flow` (OVS
/// 3.1) does the same: `,ipv6_src=::0,vlan_tci=3,actions=10` prints `vlan_tci=0x0003`, which
/// prints `vlan_tci=0x0000` (found by this target, 2026-11-25, seed of10-vlan-tci-without-cfi).
/// True when `again`'s vlan_tci is `spec`'s with exactly that change.
fn of10_vlan_tci_change(spec: &FlowSpec, again: &FlowSpec) -> bool {
    let f = FieldId::Vlan0Tci;
    let cfi = 0x1000;
    let (v, m) = (spec.match_.value(f), spec.match_.mask_of(f));
    let lost = m & cfi != 0 && v & cfi == 0 && v != 0;
    lost && again.match_.value(f) == 0
}

/// `tcp_flags` is a 16-bit field of which TCP uses 12 bits. OVS prints a match on all 12 by
/// the flags' names whether or not the mask also covers the top 4 bits (`tcp_flags[]:002`,
/// 12 bits, and `tcp_flags=syn`, 16, both print `tcp_flags=syn`), and a name parses to the
/// 16-bit mask: `ovs-ofctl parse-flow` (OVS 3.1) prints the same as we do. The top 4 bits are
/// 0 in every packet, so both masks match the same packets (found by this target after 594 s,
/// 2026-11-25, seed tcp-flags-12-bit-mask). True when `again`'s tcp_flags is `spec`'s with
/// only those mask bits changed.
fn tcp_flags_top_bits_change(spec: &FlowSpec, again: &FlowSpec) -> bool {
    let f = FieldId::TcpFlags;
    let (v, m) = (spec.match_.value(f), spec.match_.mask_of(f));
    let (v2, m2) = (again.match_.value(f), again.match_.mask_of(f));
    v == v2 && m | 0xf000 == m2 | 0xf000
}

/// True when `again` is `spec` with only the changes above, in any combination (one text may
/// hold several: found by this target, 2026-11-25, seed frag-name-and-tcp-flags-top-bits):
/// each field whose change is of its allowed kind takes `again`'s value, and then the two
/// must be equal.
fn same_but_printing_losses(spec: &FlowSpec, again: &FlowSpec) -> bool {
    let mut patched = spec.clone();
    for (f, allowed) in [
        (FieldId::NwFrag, frag_name_change as fn(&FlowSpec, &FlowSpec) -> bool),
        (FieldId::Vlan0Tci, of10_vlan_tci_change),
        (FieldId::TcpFlags, tcp_flags_top_bits_change),
    ] {
        if allowed(spec, again) {
            patched
                .match_
                .set_storage(f, again.match_.value(f), again.match_.mask_of(f));
        }
    }
    patched == *again
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match flow::text::parse_flow(text) {
        Ok(spec) => {
            let printed = flow::text::format_flow_add(&spec);
            match flow::text::parse_flow(&printed) {
                Ok(again) if again == spec => {}
                Ok(again) => assert!(
                    same_but_printing_losses(&spec, &again),
                    "round trip changed {text:?} (printed {printed:?}): {spec:?} became {again:?}"
                ),
                // OVS prints an ICMP match's tp_src/tp_dst as icmp_type/icmp_code even when
                // the value does not fit their 8 bits (`ovs-ofctl parse-flow
                // 'ip,tp_dst=806,nw_proto=1,actions=drop'` prints `icmp,icmp_code=806`) and
                // then refuses that text itself; we print as OVS does, so this one text does
                // not round-trip (found by this target, 2026-11-22).
                Err(e) if e.message.contains("value too large for 1-byte field icmp_") => {}
                // An exact nw_frag whose value has the "later" bit without the "is a
                // fragment" bit (`ip,nw_frag[]:0002`, set through the subfield syntax) has no
                // name: OVS 3.1 accepts the text and prints `nw_frag=<error>` (`ovs-ofctl
                // parse-flow 'ip,nw_frag[]:0002,actions=drop'`), which neither OVS nor we
                // parse back. We print as OVS does, so this text does not round-trip either
                // (found by this target, 2026-11-25; kept as seed nw-frag-later-without-fragment).
                Err(_) if printed.contains("nw_frag=<error>") => {}
                Err(e) => panic!("printed form does not parse: {printed:?}: {e}"),
            }
        }
        Err(e) => assert!(e.column <= text.chars().count() + 1, "column {} out of {text:?}", e.column),
    }
});
