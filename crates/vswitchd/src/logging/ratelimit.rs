//! Rate limiting of log messages, as OVS's `VLOG_RATE_LIMIT_INIT(RATE, BURST)`.
//!
//! A [`RateLimiter`] is a token bucket: it allows `burst` messages at once and refills at
//! `rate` messages per minute (OVS's units: each message costs 60,000 tokens and `rate`
//! tokens arrive per millisecond). A message over the limit is counted, not logged; the first
//! message logged after some were dropped is preceded by OVS's report
//! `Dropped N log messages in last S seconds (most recently, T seconds ago) due to excessive
//! rate`, at the same level and target. As in OVS, a message whose level is disabled takes
//! no token and is not counted (the macros check `tracing::enabled!` first), and a module
//! whose rate limiting was turned off by `vlog/disable-rate-limit` logs every message.
//!
//! Time is passed in ([`RateLimiter::check_at`], milliseconds on any monotonic clock) so
//! tests need no sleeps; [`RateLimiter::check`] uses [`monotonic_ms`].
//!
//! ```
//! use vswitchd::logging::RateLimiter;
//! static RL: RateLimiter = RateLimiter::new(5, 20);
//! fn on_bad_packet(port: u32) {
//!     vswitchd::rl_warn!(RL, "port {port}: bad packet");
//! }
//! # on_bad_packet(1);
//! ```

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

/// Tokens one message costs (OVS's `VLOG_MSG_TOKENS`).
const MSG_TOKENS: u64 = 60 * 1000;

/// Milliseconds since the first call in this process (a monotonic clock).
pub fn monotonic_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

#[derive(Debug)]
struct Bucket {
    tokens: u64,
    last_fill: Option<u64>,
    first_dropped: u64,
    last_dropped: u64,
    n_dropped: u32,
}

/// A token bucket for one log call site (or a group of them); usually a `static`.
#[derive(Debug)]
pub struct RateLimiter {
    rate: u64,
    burst: u64,
    bucket: Mutex<Bucket>,
}

/// What to do with one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Over the limit: counted, not logged.
    Drop,
    /// Log it, after the report of the messages dropped before it, if any.
    Log(Option<String>),
}

impl RateLimiter {
    /// At most `burst` messages at once, refilled at `rate` messages per minute (OVS's
    /// `VLOG_RATE_LIMIT_INIT(rate, burst)`).
    pub const fn new(rate_per_minute: u32, burst: u32) -> RateLimiter {
        RateLimiter {
            rate: rate_per_minute as u64,
            burst: burst as u64 * MSG_TOKENS,
            bucket: Mutex::new(Bucket {
                tokens: 0,
                last_fill: None,
                first_dropped: 0,
                last_dropped: 0,
                n_dropped: 0,
            }),
        }
    }

    /// Takes a token at time `now_ms` (as OVS's `token_bucket_withdraw` + `vlog_should_drop`).
    pub fn check_at(&self, now_ms: u64) -> Verdict {
        let mut b = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        if b.tokens < MSG_TOKENS {
            let refill = match b.last_fill {
                None => Some(u64::MAX),
                Some(last) if now_ms > last => Some(self.rate.saturating_mul(now_ms - last)),
                Some(_) => None,
            };
            if let Some(add) = refill {
                b.tokens = b.tokens.saturating_add(add).min(self.burst);
                b.last_fill = Some(now_ms);
            }
        }
        let now_s = now_ms / 1000;
        if b.tokens < MSG_TOKENS {
            if b.n_dropped == 0 {
                b.first_dropped = now_s;
            }
            b.last_dropped = now_s;
            b.n_dropped = b.n_dropped.saturating_add(1);
            return Verdict::Drop;
        }
        b.tokens -= MSG_TOKENS;
        if b.n_dropped == 0 {
            return Verdict::Log(None);
        }
        let report = format!(
            "Dropped {} log messages in last {} seconds (most recently, {} seconds ago) due to excessive rate",
            b.n_dropped,
            now_s.saturating_sub(b.first_dropped),
            now_s.saturating_sub(b.last_dropped)
        );
        b.n_dropped = 0;
        Verdict::Log(Some(report))
    }

    /// [`RateLimiter::check_at`] now.
    pub fn check(&self) -> Verdict {
        self.check_at(monotonic_ms())
    }
}

/// Logs through `tracing` at `$level` unless `$limiter` (a [`RateLimiter`]) says the rate is
/// exceeded; `target: "module",` may follow the limiter. Prefer [`rl_err!`](crate::rl_err),
/// [`rl_warn!`](crate::rl_warn), [`rl_info!`](crate::rl_info), [`rl_dbg!`](crate::rl_dbg).
#[macro_export]
macro_rules! rl_log {
    ($level:expr, $limiter:expr, target: $target:expr, $($arg:tt)+) => {{
        if $crate::logging::__tracing::enabled!(target: $target, $level)
            && $crate::logging::__wants($target, $level)
        {
            let verdict = if $crate::logging::__honors_rate_limits($target) {
                ($limiter).check()
            } else {
                $crate::logging::Verdict::Log(None)
            };
            if let $crate::logging::Verdict::Log(report) = verdict {
                if let Some(report) = report {
                    $crate::logging::__tracing::event!(target: $target, $level, "{}", report);
                }
                $crate::logging::__tracing::event!(target: $target, $level, $($arg)+);
            }
        }
    }};
    ($level:expr, $limiter:expr, $($arg:tt)+) => {
        $crate::rl_log!($level, $limiter, target: module_path!(), $($arg)+)
    };
}

/// A rate-limited `error!` (OVS's `VLOG_ERR_RL`): `rl_err!(LIMITER, [target: T,] fmt, …)`.
#[macro_export]
macro_rules! rl_err {
    ($limiter:expr, $($arg:tt)+) => {
        $crate::rl_log!($crate::logging::__tracing::Level::ERROR, $limiter, $($arg)+)
    };
}

/// A rate-limited `warn!` (OVS's `VLOG_WARN_RL`).
#[macro_export]
macro_rules! rl_warn {
    ($limiter:expr, $($arg:tt)+) => {
        $crate::rl_log!($crate::logging::__tracing::Level::WARN, $limiter, $($arg)+)
    };
}

/// A rate-limited `info!` (OVS's `VLOG_INFO_RL`).
#[macro_export]
macro_rules! rl_info {
    ($limiter:expr, $($arg:tt)+) => {
        $crate::rl_log!($crate::logging::__tracing::Level::INFO, $limiter, $($arg)+)
    };
}

/// A rate-limited `debug!` (OVS's `VLOG_DBG_RL`).
#[macro_export]
macro_rules! rl_dbg {
    ($limiter:expr, $($arg:tt)+) => {
        $crate::rl_log!($crate::logging::__tracing::Level::DEBUG, $limiter, $($arg)+)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate_then_report() {
        // 6 per minute = one per 10 s, burst 3.
        let rl = RateLimiter::new(6, 3);
        let t0 = 1_000_000;
        for i in 0..3 {
            assert_eq!(rl.check_at(t0 + i), Verdict::Log(None), "burst message {i}");
        }
        assert_eq!(rl.check_at(t0 + 10), Verdict::Drop);
        assert_eq!(rl.check_at(t0 + 2_000), Verdict::Drop);
        assert_eq!(rl.check_at(t0 + 4_000), Verdict::Drop);
        // 10 s after the last fill one token has come back.
        assert_eq!(rl.check_at(t0 + 9_000), Verdict::Drop);
        assert_eq!(
            rl.check_at(t0 + 10_010),
            Verdict::Log(Some(
                "Dropped 4 log messages in last 10 seconds (most recently, 1 seconds ago) due to excessive rate"
                    .into()
            ))
        );
        assert_eq!(rl.check_at(t0 + 10_011), Verdict::Drop);
        // A long quiet period refills only up to the burst.
        let later = t0 + 3_600_000;
        assert!(matches!(rl.check_at(later), Verdict::Log(Some(_))));
        assert_eq!(rl.check_at(later + 1), Verdict::Log(None));
        assert_eq!(rl.check_at(later + 2), Verdict::Log(None));
        assert_eq!(rl.check_at(later + 3), Verdict::Drop);
    }

    #[test]
    fn zero_rate_and_clock_going_back() {
        let rl = RateLimiter::new(0, 1);
        assert_eq!(rl.check_at(5), Verdict::Log(None));
        assert_eq!(rl.check_at(u64::MAX), Verdict::Drop);
        assert_eq!(rl.check_at(0), Verdict::Drop);
        let rl = RateLimiter::new(u32::MAX, u32::MAX);
        for t in [10, 5, 0, u64::MAX] {
            assert_eq!(rl.check_at(t), Verdict::Log(None));
        }
    }
}
