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
            let again = flow::text::parse_flow(&printed)
                .unwrap_or_else(|e| panic!("printed form does not parse: {printed:?}: {e}"));
            assert_eq!(again, spec, "round trip changed {text:?} (printed {printed:?})");
        }
        Err(e) => assert!(e.column <= text.chars().count() + 1, "column {} out of {text:?}", e.column),
    }
});
