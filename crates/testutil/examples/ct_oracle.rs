//! Prints OVS 3.1's answers for conntrack oracle scripts (for whoever writes the tracker).
//!
//! ```text
//! cargo run -p testutil --example ct_oracle -- --list
//! cargo run -p testutil --example ct_oracle -- udp_basic tcp_window_rst
//! cargo run -p testutil --example ct_oracle -- --all
//! cargo run -p testutil --example ct_oracle -- --write DIR udp_basic   # DIR/<name>.flows, DIR/<name>.script
//! cargo run -p testutil --example ct_oracle -- --flows FLOWS SCRIPT      # any files
//! ```
//! With `--flows`, the output is exactly what `flowswitch receive --flows FLOWS --hex
//! --dump-conntrack SCRIPT` must print (dump lines sorted).
//! Needs Open vSwitch 3.1 (ovsdb-server, ovs-vswitchd) installed; runs a private sandbox.

use testutil::ct_oracle::{
    Check, Pipeline, Script, ct_sandbox, format_answers, format_receive_output, scripts,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = scripts();
    if args.is_empty()
        || args
            .iter()
            .any(|a| a == "--list" || a == "-h" || a == "--help")
    {
        eprintln!("usage: ct_oracle [--all | --write DIR] NAME...\nscripts:");
        for s in &all {
            println!("{}", s.name);
        }
        return;
    }
    // `receive --flows F [--dump-conntrack] [--hex] S` is accepted too, so this program can
    // stand in for `flowswitch receive` (CT_RECEIVE_BIN in ct_vs_ovs: OVS against itself).
    let args: Vec<String> = if args.first().map(String::as_str) == Some("receive") {
        args.into_iter()
            .skip(1)
            .filter(|a| a != "--dump-conntrack" && a != "--hex")
            .collect()
    } else {
        args
    };
    if args.first().map(String::as_str) == Some("--flows") {
        let [_, flows, script] = args.as_slice() else {
            panic!("usage: ct_oracle [receive] --flows FLOWS SCRIPT");
        };
        let flows: Vec<String> = std::fs::read_to_string(flows)
            .expect("read flows")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect();
        let s = Script {
            name: script.clone(),
            pipeline: Pipeline::Custom(flows),
            text: std::fs::read_to_string(script).expect("read script"),
            check: Check::Frames,
            tags: Vec::new(),
        };
        if let Some(reason) = testutil::ovs::ovs_missing_reason() {
            eprintln!("SKIP: {reason}");
            std::process::exit(2);
        }
        let sb = ct_sandbox().expect("start OVS sandbox");
        let a = sb.run_ct_script(&s).expect("run script on OVS");
        print!("{}", format_receive_output(&a));
        return;
    }
    let mut write_dir = None;
    let mut names = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--all" => names.extend(all.iter().map(|s| s.name.clone())),
            "--write" => write_dir = it.next().cloned(),
            n => names.push(n.to_string()),
        }
    }
    let chosen: Vec<_> = names
        .iter()
        .map(|n| {
            all.iter()
                .find(|s| &s.name == n)
                .unwrap_or_else(|| panic!("no script named {n:?} (try --list)"))
        })
        .collect();
    if let Some(dir) = write_dir {
        std::fs::create_dir_all(&dir).expect("create dir");
        for s in &chosen {
            let mut flows = s.pipeline.flows().join("\n");
            flows.push('\n');
            std::fs::write(format!("{dir}/{}.flows", s.name), flows).expect("write flows");
            std::fs::write(format!("{dir}/{}.script", s.name), &s.text).expect("write script");
            eprintln!("wrote {dir}/{0}.flows and {dir}/{0}.script", s.name);
        }
        return;
    }
    if let Some(reason) = testutil::ovs::ovs_missing_reason() {
        eprintln!("SKIP: {reason}");
        std::process::exit(2);
    }
    let sb = ct_sandbox().expect("start OVS sandbox");
    for s in chosen {
        let a = sb.run_ct_script(s).expect("run script on OVS");
        println!("{}", format_answers(s, &a));
    }
}
