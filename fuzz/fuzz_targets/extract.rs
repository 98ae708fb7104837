//! Packet bytes → flow key: must never panic, and the returned map must cover every non-zero
//! word of the key.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut key = flow::FlowKey::ZERO;
    key.w[0] = u64::from(data.len() as u32);
    assert!(key.map().contains(0) || data.is_empty());
});
