//! Flow text → parse: never panics; an error's column lies inside the text; what parses prints
//! in a form that parses again to the same flow.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match flow::text::parse_flow(text) {
        Ok(spec) => {
            let printed = flow::text::format_flow_add(&spec);
            match flow::text::parse_flow(&printed) {
                Ok(again) => {
                    assert_eq!(again, spec, "round trip changed {text:?} (printed {printed:?})")
                }
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
