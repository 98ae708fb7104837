//! `ovs-appctl coverage/show` and `coverage/read-counter`: named event counters with their
//! average rates over the last 5 seconds, minute and hour, in OVS's layout.
//!
//! OVS's coverage counters are incremented where the events happen and folded every
//! 5 seconds by the main loop. Here the events are counters the daemon already keeps
//! (upcall outcomes, configuration passes, control requests, …): [`Coverage::sample`] is
//! given their totals every [`INTERVAL`] and keeps what the rates need — the last 12
//! five-second increments (the minute) and the last 60 minute sums (the hour). It is plain
//! data, no thread or clock inside: the daemon's sampler thread calls it, the tests call it
//! with made-up totals.
//!
//! Names are OVS's where our counter counts the same event (`bridge_reconfigure`,
//! `dpif_flow_put`, `unixctl_received`, …), so scripts that grep `coverage/show` find them;
//! OVS's counters with no equivalent here are not listed (OVS itself lists only the events
//! hit, then how many were never hit).

use std::time::Duration;

/// How often the totals are sampled (OVS's `COVERAGE_RUN_INTERVAL`).
pub const INTERVAL: Duration = Duration::from_secs(5);

/// Five-second slots in a minute.
const MIN_SLOTS: usize = 12;
/// Minute slots in an hour.
const HR_SLOTS: usize = 60;

/// The events, in the order they are listed (each counter's meaning is where its total is
/// read, `service::coverage_totals`).
pub const EVENTS: &[&str] = &[
    "bridge_reconfigure",
    "ofproto_update_port",
    "dpif_port_add",
    "dpif_port_del",
    "dpif_flow_put",
    "upcall_flow_limit_hit",
    "datapath_drop_upcall_error",
    "unixctl_received",
    "unixctl_replied",
];

/// One event's history.
#[derive(Debug, Clone)]
struct Event {
    /// Its total at the last sample.
    total: u64,
    /// Increments of the last [`MIN_SLOTS`] samples (a ring, `Coverage::n` picks the slot).
    min: [u64; MIN_SLOTS],
    /// Sums of the last [`HR_SLOTS`] completed minutes (a ring).
    hr: [u64; HR_SLOTS],
}

/// The events' rates (see the module doc).
#[derive(Debug, Clone)]
pub struct Coverage {
    events: Vec<(&'static str, Event)>,
    /// Samples taken so far.
    n: u64,
}

impl Default for Coverage {
    fn default() -> Self {
        Coverage::new(EVENTS)
    }
}

impl Coverage {
    /// Counters for `names`, all zero.
    pub fn new(names: &[&'static str]) -> Coverage {
        Coverage {
            events: names
                .iter()
                .map(|&n| {
                    let e = Event {
                        total: 0,
                        min: [0; MIN_SLOTS],
                        hr: [0; HR_SLOTS],
                    };
                    (n, e)
                })
                .collect(),
            n: 0,
        }
    }

    /// Takes one sample: each event's total now. An event left out keeps its total; a
    /// total below the last one (a counter cleared, a datapath restarted) counts as a
    /// fresh start, so the increment is the new total.
    pub fn sample(&mut self, totals: &[(&str, u64)]) {
        let slot = (self.n % MIN_SLOTS as u64) as usize;
        let minute_done = slot == MIN_SLOTS - 1;
        let hr_slot = ((self.n / MIN_SLOTS as u64) % HR_SLOTS as u64) as usize;
        for (name, e) in &mut self.events {
            let now = totals
                .iter()
                .find(|(n, _)| n == name)
                .map_or(e.total, |&(_, t)| t);
            let inc = if now >= e.total { now - e.total } else { now };
            e.total = now;
            e.min[slot] = inc;
            if minute_done {
                e.hr[hr_slot] = e.min.iter().sum();
            }
        }
        self.n += 1;
    }

    /// An event's total at the last sample (`None`: no such event).
    pub fn total(&self, name: &str) -> Option<u64> {
        self.events
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, e)| e.total)
    }

    /// `coverage/show`'s text: a header, one line per event hit so far (rates over the last
    /// 5 s, minute and hour, and the total), then how many were never hit.
    pub fn show(&self) -> String {
        let slots_in_minute = (self.n % MIN_SLOTS as u64) as usize;
        let last = (self.n + MIN_SLOTS as u64 - 1) % MIN_SLOTS as u64;
        let mut hash = Fnv::default();
        let mut lines = String::new();
        let mut never = 0;
        for (name, e) in &self.events {
            if e.total == 0 {
                never += 1;
                continue;
            }
            let five = if self.n == 0 { 0 } else { e.min[last as usize] };
            let minute: u64 = e.min.iter().sum();
            // The hour: the completed minutes and the current one so far.
            let current: u64 = (0..slots_in_minute).map(|i| e.min[i]).sum();
            let hour: u64 = e.hr.iter().sum::<u64>() + current;
            hash.add(name.as_bytes());
            hash.add(&e.total.to_le_bytes());
            lines += &line(
                name,
                [
                    five as f64 / 5.0,
                    minute as f64 / 60.0,
                    hour as f64 / 3600.0,
                ],
                e.total,
            );
            lines.push('\n');
        }
        format!(
            "Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash={:08x}:\n{lines}{never} events never hit\n",
            hash.0
        )
    }
}

/// One event's line of `coverage/show` (no newline): its name, its average rates per
/// second over the last 5 s, minute and hour, and its total.
pub fn line(name: &str, rates: [f64; 3], total: u64) -> String {
    let [five, minute, hour] = rates;
    format!("{name:<24} {five:5.1}/sec {minute:9.3}/sec {hour:13.4}/sec   total: {total}")
}

/// 32-bit FNV-1a: the header's hash (it changes when the hit events or their totals do,
/// which is all a reader compares it for).
struct Fnv(u32);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0x811c_9dc5)
    }
}

impl Fnv {
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u32::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0193);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rates from a plain list of every sample's totals.
    fn twin(samples: &[u64]) -> (f64, f64, f64) {
        let incs: Vec<u64> = samples
            .iter()
            .scan(0u64, |last, &t| {
                let inc = if t >= *last { t - *last } else { t };
                *last = t;
                Some(inc)
            })
            .collect();
        let n = incs.len();
        let five = incs.last().copied().unwrap_or(0);
        let minute: u64 = incs[n.saturating_sub(MIN_SLOTS)..].iter().sum();
        // Whole minutes completed, the last 60 of them, plus the current one.
        let done = n / MIN_SLOTS * MIN_SLOTS;
        let first = done.saturating_sub(MIN_SLOTS * HR_SLOTS);
        let hour: u64 = incs[first..].iter().sum();
        (
            five as f64 / 5.0,
            minute as f64 / 60.0,
            hour as f64 / 3600.0,
        )
    }

    fn rates(c: &Coverage, name: &str) -> Option<(f64, f64, f64)> {
        let line = c.show().lines().find(|l| l.starts_with(name))?.to_owned();
        let v: Vec<f64> = line
            .split_whitespace()
            .filter_map(|w| w.strip_suffix("/sec")?.parse().ok())
            .collect();
        Some((v[0], v[1], v[2]))
    }

    #[test]
    fn layout_is_ovs_s() {
        let mut c = Coverage::new(&["bridge_reconfigure", "dpif_port_del", "txn_success"]);
        c.sample(&[("bridge_reconfigure", 2), ("txn_success", 3)]);
        let s = c.show();
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with(
            "Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash="
        ));
        // As `ovs-appctl coverage/show` printed it for the same counts (OVS 3.1).
        assert_eq!(
            lines[1],
            "bridge_reconfigure         0.4/sec     0.033/sec        0.0006/sec   total: 2"
        );
        assert_eq!(lines[3], "1 events never hit");
        assert_eq!(c.total("txn_success"), Some(3));
        assert_eq!(c.total("nope"), None);
    }

    #[test]
    fn rates_equal_a_plain_recount() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..20 {
            let mut c = Coverage::new(&["e"]);
            let mut totals = Vec::new();
            let mut t = 0u64;
            let n = (next() % 2000) as usize + 1;
            for _ in 0..n {
                // Mostly growing, now and then reset (a cleared counter).
                t = if next() % 50 == 0 {
                    next() % 10
                } else {
                    t + next() % 100
                };
                totals.push(t);
                c.sample(&[("e", t)]);
                if t > 0 {
                    let (a, b, h) = rates(&c, "e").unwrap();
                    let (x, y, z) = twin(&totals);
                    assert!((a - x).abs() < 0.05, "5 s: {a} vs {x}");
                    assert!((b - y).abs() < 0.0005, "minute: {b} vs {y}");
                    assert!((h - z).abs() < 0.00005, "hour: {h} vs {z}");
                }
            }
        }
    }
}
