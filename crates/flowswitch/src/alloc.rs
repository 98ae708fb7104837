//! The process's allocator: mimalloc, and the one policy of it we change.
//!
//! The control-plane commands (northd above all) allocate millions of small strings and
//! maps; mimalloc does that several times faster than glibc's malloc. The datapath's packet
//! path does not allocate in its steady state, so it is unaffected.
//!
//! This is the only module of the binary with `unsafe`: one call into the allocator's C
//! interface at startup, before any thread is started.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc 3's `mi_option_page_reclaim_on_free` (its position in `mi_option_e`; the
/// `-sys` crate names only the older options). The check below ties it to the enum this
/// crate version was built with: a version that moves the options fails to compile here.
const PAGE_RECLAIM_ON_FREE: libmimalloc_sys::mi_option_t = 35;
const _: () = assert!(libmimalloc_sys::_mi_option_last == 47);

/// Lets a thread that frees a block on a page of a thread that has exited take that page
/// over (mimalloc's default: only pages that came from its own heap). northd builds its
/// flows on scoped threads that are gone when the main thread frees the last round's flows
/// (≈ 270,000 strings at 800 nodes); with the default, every one of those frees took the
/// slow cross-thread path, and dropping a 2-thread round's flows cost twice a 1-thread
/// round's (≈ 60 vs 30 ms, all of it on the path of the next `--wait=sb`).
pub fn tune() {
    // SAFETY: `mi_option_set` stores a value in mimalloc's option table; it takes no
    // pointers and is called before any other thread of ours exists.
    unsafe { libmimalloc_sys::mi_option_set(PAGE_RECLAIM_ON_FREE, 1) };
}
