//! Packet bytes → flow key: never panics, the returned map covers every non-zero word, and the
//! batch path with hashing agrees with the single-packet path.
#![no_main]
use flow::extract::{PacketMeta, extract, extract_hash_batch};
use flow::{FlowKey, WordMap};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let meta = PacketMeta::port(1);
    let mut key = FlowKey::ZERO;
    let map = extract(data, &meta, &mut key);
    assert_eq!(key.map().0 & !map.0, 0, "map misses a non-zero word");

    let mut keys = [FlowKey::ZERO; 1];
    let mut maps = [WordMap::EMPTY; 1];
    let mut hashes = [0u32; 1];
    extract_hash_batch(&[data], &[meta], &mut keys, &mut maps, &mut hashes, 0);
    assert_eq!(keys[0], key);
    assert_eq!(hashes[0], flow::hash::hash_key(&key, maps[0], 0));
    let _ = flow::text::format_flow_line(&key);
});
