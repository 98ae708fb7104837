//! Sequences of (packet bytes, time step, zone, ct action) through the connection tracker:
//! never panics, and the established fast path (per-PMD cache) agrees with the full path
//! packet by packet and in the connection table after every step (ARCHITECTURE.md
//! invariant 6). The decoding of the bytes lives in `conntrack::fuzzing`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    conntrack::fuzzing::fuzz_sequence(data);
});
