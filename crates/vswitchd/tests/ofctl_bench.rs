//! `ovs-ofctl add-flows` of 100,000 flows into our OpenFlow server and into a real
//! `ovs-vswitchd`, timed (issue 15: ours must be at least 5x faster). Ignored by default (it
//! takes a while); run with `cargo test -p vswitchd --test ofctl_bench -- --ignored
//! --nocapture`. Flow count from `OFCTL_BENCH_FLOWS` (default 100000);
//! `OFCTL_BENCH_BUNDLE=1` times `-O OpenFlow14 --bundle add-flows` instead.

mod ofctl_support;
use std::time::Instant;

use ofctl_support::{Pair, flow_file, ofctl};

#[test]
#[ignore]
fn add_flows_100k_vs_ovs() {
    let Some(p) = Pair::start() else { return };
    let n: usize = std::env::var("OFCTL_BENCH_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let flows: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "priority={},tcp,nw_src=10.{}.{}.{},tp_dst={},actions=output:{}",
                i % 1000 + 1,
                i >> 16 & 0xff,
                i >> 8 & 0xff,
                i & 0xff,
                i % 1024 + 1,
                i % 3 + 1
            )
        })
        .collect();
    let file = flow_file(&p.ours.dir, "bench.txt", &flows);
    let file = file.to_str().expect("utf-8");
    let bundle = std::env::var("OFCTL_BENCH_BUNDLE").is_ok_and(|v| v == "1");
    let how = if bundle {
        "-O OpenFlow14 --bundle add-flows"
    } else {
        "add-flows"
    };
    let mut times = Vec::new();
    for (who, sock) in [
        ("ours", p.ours.sock.clone()),
        ("ovs-vswitchd", p.ovs_sock()),
    ] {
        let cpu0 = self_cpu_ticks();
        let t = Instant::now();
        // `time` reports ovs-ofctl's own CPU use: ovs-ofctl sends each flow mod with a
        // barrier and waits for its reply, so the wall time is mostly round trips.
        let o = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "time ovs-ofctl --timeout=120 {how} unix:{} {file}",
                sock.display()
            ))
            .output()
            .expect("run ovs-ofctl");
        let dt = t.elapsed();
        if who == "ours" {
            eprintln!(
                "ours: server CPU {:.2}s",
                (self_cpu_ticks() - cpu0) as f64 / 100.0
            );
        }
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{who}: {stderr}");
        eprintln!(
            "{who}: ovs-ofctl {}",
            stderr.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        let agg = ofctl(&sock, &["dump-aggregate", "br0"]);
        assert!(
            agg.stdout.contains(&format!("flow_count={n}")),
            "{who}: {}",
            agg.stdout
        );
        eprintln!(
            "{who}: {how} of {n} flows in {dt:?} ({:.0} flows/s)",
            n as f64 / dt.as_secs_f64()
        );
        times.push(dt);
    }
    eprintln!(
        "speed-up: {:.1}x",
        times[1].as_secs_f64() / times[0].as_secs_f64()
    );
}

/// This process's user+system CPU time in clock ticks (1/100 s), from /proc/self/stat.
fn self_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // Fields 14 and 15 of stat; `after` starts at field 3.
    get(11) + get(12)
}
