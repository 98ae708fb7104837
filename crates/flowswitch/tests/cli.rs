//! The built `flowswitch` binary run as a user runs it: bad input gets a clear message and a
//! non-zero exit (never a panic, an abort or a runaway allocation), nothing is silently
//! adjusted, output behaves as Unix tools' does on a closed pipe, and the commands README shows
//! work from a clone (the sample data under `data/`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_flowswitch");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A private scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("flowswitch-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch dir");
        Scratch(d)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .expect("run flowswitch")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Refused with a message that contains every one of `needles`: a normal error exit (1, or 2
/// for a command-line error), not a panic (101) or an abort (signal).
#[track_caller]
fn refused(args: &[&str], needles: &[&str]) -> String {
    let o = run(args);
    let err = text(&o.stderr);
    let code = o.status.code();
    assert!(
        code == Some(1) || code == Some(2),
        "{args:?}: status {:?}\nstdout: {}\nstderr: {err}",
        o.status,
        text(&o.stdout)
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(!err.contains("memory allocation"), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: stderr lacks {n:?}:\n{err}");
    }
    err
}

#[track_caller]
fn ok(args: &[&str]) -> (String, String) {
    let o = run(args);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(
        o.status.success(),
        "{args:?}: {:?}\nstdout: {out}\nstderr: {err}",
        o.status
    );
    (out, err)
}

// ---- sizes: documented bounds, checked before anything is allocated ----------------------

#[test]
fn huge_flow_counts_are_refused_before_allocating() {
    let s = Scratch::new("huge");
    let out = s.path("out.pcap");
    let out = out.to_str().expect("utf-8 path");
    refused(
        &["gen-pcap", "--flows", "4294967295", out],
        &["--flows", "1000000"],
    );
    assert!(!Path::new(out).exists(), "nothing written");
    refused(&["demo", "--flows", "4294967295"], &["--flows", "1000000"]);
    refused(
        &[
            "bench",
            "datapath",
            "--flows",
            "4294967295",
            "--packets",
            "10",
        ],
        &["--flows", "10000000"],
    );
    refused(
        &["demo", "--packets", "18446744073709551615"],
        &["--packets"],
    );
    refused(
        &["bench", "datapath", "--packets", "18446744073709551615"],
        &["--packets"],
    );
    // Each bound within range, the product not: still refused before building frames.
    refused(
        &["gen-pcap", "--flows", "1000000", "--size", "1920", out],
        &["1 GiB"],
    );
    refused(&["bench", "datapath", "--seconds", "1e9"], &["--seconds"]);
    refused(&["bench", "datapath", "--warmup=-1"], &["--warmup"]);
}

#[test]
fn the_bounds_are_documented_in_help() {
    for (args, needle) in [
        (&["gen-pcap", "--help"][..], "1,000,000"),
        (&["gen-pcap", "--help"][..], "1920"),
        (&["demo", "--help"][..], "1,000,000,000"),
        (&["bench", "datapath", "--help"][..], "10,000,000"),
        (&["bench", "datapath", "--help"][..], "60,536"),
        (&["classbench", "--help"][..], "1 to 1000"),
        (&["bench", "flowmods", "--help"][..], "1 to 1,000,000"),
    ] {
        let (out, _) = ok(args);
        assert!(out.contains(needle), "{args:?} lacks {needle}:\n{out}");
    }
}

// ---- no silent adjustments -----------------------------------------------------------------

#[test]
fn demo_sends_exactly_the_packets_asked_for() {
    let (out, _) = ok(&["demo", "--packets", "1", "--flows", "10"]);
    assert!(out.contains("\n  packets received: 1\n"), "{out}");
    assert!(out.contains("demo: 1 packets in"), "{out}");
    let (out, _) = ok(&["demo", "--packets", "33", "--flows", "10"]);
    assert!(out.contains("\n  packets received: 33\n"), "{out}");
    refused(&["demo", "--packets", "0"], &["--packets"]);
}

#[test]
fn zero_and_out_of_range_values_are_refused_not_raised() {
    let s = Scratch::new("zero");
    let out = s.path("o.pcap");
    let out = out.to_str().expect("utf-8 path");
    refused(&["gen-pcap", "--size", "0", out], &["--size", "60"]);
    refused(&["gen-pcap", "--size", "59", out], &["--size"]);
    refused(&["gen-pcap", "--size", "1921", out], &["--size"]);
    refused(
        &["gen-pcap", "--ipv6-percent", "101", out],
        &["--ipv6-percent"],
    );
    let rules = "data/classbench/sample_rules";
    let trace = "data/classbench/sample_trace";
    refused(
        &[
            "classbench",
            "--rules",
            rules,
            "--trace",
            trace,
            "--passes",
            "0",
        ],
        &["--passes"],
    );
    refused(
        &[
            "classbench",
            "--rules",
            rules,
            "--trace",
            trace,
            "--wide-step",
            "0",
        ],
        &["--wide-step"],
    );
    refused(&["bench", "datapath", "--reps", "0"], &["--reps"]);
    refused(
        &["bench", "flowmods", "--rules", rules, "--batch", "0"],
        &["--batch"],
    );
    refused(&["bench", "datapath", "--dports", "70000"], &["--dports"]);
    refused(&["bench", "datapath", "--dports", "60537"], &["--dports"]);
}

#[test]
fn gen_pcap_says_when_headers_make_frames_longer() {
    let s = Scratch::new("longer");
    let p = s.path("v6.pcap");
    let (out, _) = ok(&[
        "gen-pcap",
        "--flows",
        "20",
        "--ipv6-percent",
        "100",
        "--mix",
        "0:1:0",
        p.to_str().expect("utf-8"),
    ]);
    assert!(out.contains("wrote 20 frames"), "{out}");
    // IPv6 + TCP headers are 74 bytes: every frame is longer than the 60 asked for.
    assert!(
        out.contains("note: 20 of them are longer than --size 60 (up to 74 bytes)"),
        "{out}"
    );
    let frames = netdev::read_pcap(&p).expect("pcap");
    assert!(frames.iter().all(|f| f.len() == 74));
    // A size every frame can have: no note, exact sizes.
    let p = s.path("v4.pcap");
    let (out, _) = ok(&[
        "gen-pcap",
        "--flows",
        "5",
        "--size",
        "128",
        p.to_str().expect("utf-8"),
    ]);
    assert!(!out.contains("note:"), "{out}");
    assert!(
        netdev::read_pcap(&p)
            .expect("pcap")
            .iter()
            .all(|f| f.len() == 128)
    );
}

#[test]
fn empty_classbench_files_are_errors_not_figures() {
    let s = Scratch::new("empty");
    let empty = s.path("empty");
    std::fs::write(&empty, "").expect("write");
    let empty = empty.to_str().expect("utf-8");
    refused(
        &[
            "classbench",
            "--rules",
            empty,
            "--trace",
            "data/classbench/sample_trace",
        ],
        &["no rules"],
    );
    refused(
        &[
            "classbench",
            "--rules",
            "data/classbench/sample_rules",
            "--trace",
            empty,
        ],
        &["no headers"],
    );
    refused(&["bench", "flowmods", "--rules", empty], &["no rules"]);
}

// ---- errors: said once, on stderr, never a crash -------------------------------------------

#[test]
fn missing_files_are_named_once() {
    for args in [
        &["pcap-flows", "nonexistent.pcap"][..],
        &[
            "bench",
            "datapath",
            "--pcap",
            "nonexistent.pcap",
            "--packets",
            "10",
        ][..],
        &["gen-pcap", "no/such/dir/out.pcap"][..],
    ] {
        let err = refused(args, &["No such file or directory"]);
        assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn shared_data_that_a_clone_lacks_is_explained() {
    let err = refused(
        &[
            "classbench",
            "--rules",
            "../shared/classbench/no_such_set.gz",
            "--trace",
            "data/classbench/sample_trace",
        ],
        &["not part of the repository", "data/classbench/", "shared"],
    );
    assert!(err.contains("no_such_set.gz"), "{err}");
    refused(
        &[
            "bench",
            "flowmods",
            "--rules",
            "../shared/classbench/no_such_set.gz",
        ],
        &["not part of the repository"],
    );
    refused(
        &["bench", "datapath", "--matrix", "--pcap-dir", "no/such/dir"],
        &["make-pcaps.sh", "not this repository"],
    );
}

#[test]
fn closed_stdout_ends_quietly_and_closed_stderr_does_not_crash() {
    let s = Scratch::new("pipe");
    let p = s.path("many.pcap");
    ok(&["gen-pcap", "--flows", "5000", p.to_str().expect("utf-8")]);
    // `pcap-flows X | head -0`: the reader is gone before the first write.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let o = Command::new(BIN)
        .args(["pcap-flows", p.to_str().expect("utf-8")])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stderr), "");
    // The same for a command that prints with a lock held (parse-flow), and for demo.
    for args in [
        &["parse-flow", "ip,actions=drop"][..],
        &["demo", "--packets", "100", "--flows", "10"][..],
    ] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let o = Command::new(BIN)
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
        assert_eq!(text(&o.stderr), "", "{args:?}");
    }
    // A long error with nobody reading stderr: exit 1, not a panic's 101.
    let long = format!(
        "ip,nw_dst=10.0.0.1,{}actions=drop",
        "frobnicate=1,".repeat(2000)
    );
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let o = Command::new(BIN)
        .args(["parse-flow", &long])
        .stdout(Stdio::null())
        .stderr(writer)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    // Notes on a broken stderr do not stop a run either.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let o = Command::new(BIN)
        .args([
            "classbench",
            "--rules",
            "data/classbench/sample_rules",
            "--trace",
            "data/classbench/sample_trace",
            "--passes",
            "1",
        ])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(writer)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o.stdout).contains("mismatches=0"));
}

// ---- pcap-flows: good packets first, errors on stderr with their record -------------------

#[test]
fn pcap_flows_reports_bad_records_by_number_on_stderr() {
    let s = Scratch::new("records");
    let udp = |d: u8| {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f[33] = d;
        f
    };
    // Record 2 is a runt: no flow line, a message naming record 2, exit 0.
    let p = s.path("runt.pcap");
    netdev::write_pcap(&p, [udp(1), vec![0u8; 10], udp(3)]).expect("pcap");
    let (out, err) = ok(&["pcap-flows", p.to_str().expect("utf-8")]);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.lines().all(|l| !l.contains("error")), "{out}");
    assert!(
        err.contains("record 2: Packet data too short for Ethernet (10 bytes)"),
        "{err}"
    );
    // Cut off inside record 3: records 1 and 2 are printed, then the error, exit 1.
    let p = s.path("cut.pcap");
    netdev::write_pcap(&p, [udp(1), udp(2), udp(3)]).expect("pcap");
    let bytes = std::fs::read(&p).expect("read");
    std::fs::write(&p, &bytes[..bytes.len() - 20]).expect("truncate");
    let o = run(&["pcap-flows", p.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stdout).lines().count(), 2, "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(err.contains("record 3"), "{err}");
    assert!(err.contains("truncated"), "{err}");
}

// ---- flow files: comments as ovs-ofctl add-flows reads them --------------------------------

#[test]
fn flow_files_take_trailing_comments() {
    let s = Scratch::new("comments");
    let f = s.path("flows.txt");
    std::fs::write(
        &f,
        "# the table\npriority=10,in_port=1,udp,actions=output:2   # to p2\n\
         priority=0,actions=drop#the rest\n",
    )
    .expect("write");
    let (out, _) = ok(&[
        "trace",
        "--flows",
        f.to_str().expect("utf-8"),
        "in_port=1,udp,nw_dst=10.1.1.1",
    ]);
    assert!(out.contains("Datapath actions: 2"), "{out}");
}

// ---- what the reports say ------------------------------------------------------------------

#[test]
fn classbench_reports_in_words_and_works_from_a_clone() {
    let (out, err) = ok(&[
        "classbench",
        "--rules",
        "data/classbench/sample_rules",
        "--trace",
        "data/classbench/sample_trace",
        "--passes",
        "2",
    ]);
    assert!(out.starts_with("headers=500 mismatches=0 "), "{out}");
    assert!(out.contains(" rules=100 "), "{out}");
    assert!(!err.contains("Config {"), "{err}");
    assert!(err.contains("collision limit 64 rules per bucket"), "{err}");
    assert!(err.contains("flags field ignored"), "{err}");
    let (out, _) = ok(&[
        "bench",
        "flowmods",
        "--rules",
        "data/classbench/sample_rules",
    ]);
    assert!(out.starts_with("flowmods rules=100 "), "{out}");
}

#[test]
fn bench_datapath_prints_tx_and_drops_beside_rx() {
    let (out, _) = ok(&["bench", "datapath", "--packets", "1000", "--flows", "10"]);
    assert!(
        out.contains("bench: rx 1000 tx 1000 drops 0 packets"),
        "{out}"
    );
    // Traffic the l3 rules drop (the generator's 10.128.0.0/24 destinations): rx = drops,
    // tx = 0 — a different line from a forwarding run, and still a passing one.
    let s = Scratch::new("drops");
    let p = s.path("other.pcap");
    ok(&["gen-pcap", "--flows", "10", p.to_str().expect("utf-8")]);
    let (out, _) = ok(&[
        "bench",
        "datapath",
        "--pcap",
        p.to_str().expect("utf-8"),
        "--packets",
        "500",
    ]);
    assert!(
        out.contains("bench: rx 500 tx 0 drops 500 packets"),
        "{out}"
    );
    // The timed run's summary line (the matrix's raw line format) carries them too.
    let (out, _) = ok(&[
        "bench",
        "datapath",
        "--flows",
        "10",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
    ]);
    let line = out
        .lines()
        .find(|l| l.contains(" rep1 "))
        .expect("summary line");
    assert!(line.contains(" rx="), "{line}");
    assert!(line.contains(" tx="), "{line}");
    assert!(line.contains(" drops=0"), "{line}");
}

#[test]
fn demo_prints_ovs_pmd_stats_lines_in_ovs_order() {
    let (out, _) = ok(&["demo", "--packets", "1000", "--flows", "10"]);
    let names: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("pmd thread"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.trim_start().split(':').next().unwrap_or(""))
        .collect();
    let ovs = datapath::pmd::OVS_PMD_STATS_LINES;
    assert_eq!(names[..ovs.len().min(names.len())], ovs, "{out}");
    assert_eq!(
        names[ovs.len().min(names.len())..],
        datapath::pmd::OWN_PMD_STATS_LINES,
        "{out}"
    );
}

#[test]
fn bench_help_needs_no_files_a_clone_lacks() {
    let (out, _) = ok(&["bench", "datapath", "--help"]);
    assert!(out.contains("not part of this repository"), "{out}");
    for line in out.lines() {
        for f in ["flows.sh", "gen_pcap.py", "matrix_dpdk.sh"] {
            if line.contains(f) {
                assert!(
                    out.contains("nothing here needs them"),
                    "help points at {f}: {line}"
                );
            }
        }
    }
}

#[test]
fn receive_and_bench_firewall_refuse_bad_input() {
    let s = Scratch::new("receive");
    let flows = s.path("flows.txt");
    std::fs::write(&flows, "in_port=1,actions=output:2\n").expect("flows");
    let script = s.path("script.txt");
    let fl = flows.to_str().expect("utf-8");
    let sc = script.to_str().expect("utf-8");
    for (body, needle) in [
        ("1 0011zz\n", "non-hex"),
        ("1 001\n", "odd number"),
        ("9 000000000000000000000000\n", "no port 9"),
        ("frobnicate\n", "unknown command"),
        ("ct-set-maxconns -1\n", "bad number"),
    ] {
        std::fs::write(&script, body).expect("script");
        let e = refused(&["receive", "--flows", fl, sc], &[needle]);
        assert!(e.contains("script.txt:1"), "names the line: {e}");
    }
    refused(
        &["receive", "--bridge-ports", "0", "--flows", fl, sc],
        &["--bridge-ports"],
    );
    refused(
        &["receive", "--flows", fl, "no-such-script"],
        &["no-such-script"],
    );
    // A good script: one line per frame, the table after it.
    std::fs::write(
        &script,
        "# a comment\n1 0200000000020200000000010800450000200001000040110000\n",
    )
    .expect("script");
    let o = run(&["receive", "--flows", fl, "--dump-conntrack", sc]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "2 -> 2\n");
    for (args, needle) in [
        (&["--conns", "0"][..], "--conns"),
        (&["--conns", "4000000"][..], "--conns"),
        (&["--seconds", "0"][..], "--seconds"),
        (&["--reps", "0"][..], "--reps"),
        (&["--warmup", "100"][..], "--warmup"),
    ] {
        let mut a = vec!["bench", "firewall"];
        a.extend_from_slice(args);
        refused(&a, &[needle]);
    }
}

/// `bench control` (issue #13): the last line has the fields in its order, and the
/// N frames really were N upcalls and N installed megaflows.
#[test]
fn bench_control_learns_one_megaflow_per_frame() {
    let (out, _) = ok(&["bench", "control", "--flows", "2000", "--dumps", "1"]);
    let last = out.lines().last().expect("a last line");
    let fields: Vec<(&str, &str)> = last
        .split(' ')
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .collect();
    let keys: Vec<&str> = fields.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        keys,
        [
            "flows",
            "learn_per_s",
            "first_tenth_us",
            "last_tenth_us",
            "terse_dump_ms",
            "install_during_dump_ratio",
            "bytes_per_flow"
        ],
        "{last}"
    );
    for (k, v) in &fields {
        let x: f64 = v
            .parse()
            .unwrap_or_else(|_| panic!("{k}={v} is not a number: {last}"));
        assert!(x.is_finite() && x >= 0.0, "{k}={v}: {last}");
    }
    assert_eq!(fields[0].1, "2000", "{last}");
    assert!(fields[1].1.parse::<f64>().expect("rate") > 0.0, "{last}");
    let learn = out
        .lines()
        .find(|l| l.starts_with("learn: "))
        .expect("a learn: line");
    for want in [
        " rx=2000 ",
        " upcall_ok=2000 ",
        " flows_installed=2000 ",
        " megaflows=2000 ",
        " tx=2000 ",
    ] {
        assert!(learn.contains(want), "{want:?} not in {learn}");
    }
    let control = out
        .lines()
        .find(|l| l.starts_with("control: "))
        .expect("a control: line");
    assert!(control.contains(" dumped_packets=2000 "), "{control}");
}

#[test]
fn bench_control_refuses_bad_sizes_and_writes_what_ovs_replays() {
    refused(&["bench", "control", "--flows", "0"], &["--flows"]);
    refused(&["bench", "control", "--flows", "4000001"], &["--flows"]);
    refused(
        &["bench", "control", "--flows", "18446744073709551617"],
        &["--flows"],
    );
    refused(&["bench", "control", "--reps", "0"], &["--reps"]);
    refused(&["bench", "control", "--dumps", "1000"], &["--dumps"]);
    let (help, _) = ok(&["bench", "control", "--help"]);
    assert!(help.contains("4,000,000"), "{help}");
    let d = Scratch::new("control");
    let (pcap, flows) = (d.path("c.pcap"), d.path("c.flows"));
    let (out, _) = ok(&[
        "bench",
        "control",
        "--flows",
        "50",
        "--write-pcap",
        pcap.to_str().expect("utf-8 path"),
        "--write-flows",
        flows.to_str().expect("utf-8 path"),
    ]);
    assert!(out.is_empty(), "writing only: {out}");
    let frames = netdev::read_pcap(&pcap).expect("the pcap");
    assert_eq!(frames.len(), 50);
    let macs: std::collections::HashSet<&[u8]> = frames.iter().map(|f| &f[6..12]).collect();
    assert_eq!(macs.len(), 50, "one source MAC per frame");
    let rules = std::fs::read_to_string(&flows).expect("the flows");
    assert_eq!(rules.lines().filter(|l| l.contains("dl_src=")).count(), 64);
    assert!(rules.contains("priority=10,udp,in_port=1,nw_dst=10.0.0.2,actions=output:2"));
}
