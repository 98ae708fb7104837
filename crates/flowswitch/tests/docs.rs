//! README.md, ARCHITECTURE.md and the scripts say what a clone can do today: the commands a
//! newcomer copies work as written, data they name is in the repository or said not to be,
//! and nothing that does not exist yet is described as existing.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The commands of README's "Two commands on a fresh machine" block, as
/// `scripts/fresh-clone-check.sh` extracts them.
fn readme_commands() -> Vec<String> {
    let readme = read("README.md");
    let section = readme
        .split("## Two commands on a fresh machine")
        .nth(1)
        .expect("section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("sh block");
    block
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with([' ', '\t', '#']))
        .map(|l| l.split(" #").next().unwrap_or(l).trim().to_string())
        .collect()
}

#[test]
fn readme_commands_need_no_sudo_and_no_installed_binary() {
    let cmds = readme_commands();
    assert_eq!(
        cmds,
        ["cargo run --release -- demo", "./scripts/test-all.sh"]
    );
    let readme = read("README.md");
    assert!(readme.contains("cargo install --path crates/flowswitch"));
    assert!(readme.contains("target/release/flowswitch"));
    // Every scripts/ and data/ path README names exists in the repository.
    for word in readme.split(|c: char| c.is_whitespace() || "`()|,".contains(c)) {
        let w = word.trim_end_matches(['.', ':', ';']);
        if (w.starts_with("scripts/") || w.starts_with("data/")) && !w.contains('*') {
            assert!(
                repo().join(w).exists(),
                "README names {w}, which is not in the repository"
            );
        }
    }
}

#[test]
fn docs_claim_nothing_that_does_not_exist_yet() {
    let readme = read("README.md");
    // The connection tracker is claimed only with the crate that implements it, and with
    // the differential test that holds it to OVS's behaviour.
    if readme.contains("connection tracker") {
        assert!(repo().join("crates/conntrack/src/lib.rs").is_file());
        assert!(
            repo()
                .join("crates/flowswitch/tests/ct_vs_ovs.rs")
                .is_file()
        );
    }
    // Real ports are claimed only with the port kinds that implement them and the namespace
    // tests that hold them to real traffic.
    let arch = read("ARCHITECTURE.md");
    if arch.contains("AF_XDP") || readme.contains("AF_XDP") {
        for f in [
            "crates/netdev/src/afxdp/mod.rs",
            "crates/netdev/src/afpacket.rs",
            "crates/netdev/src/tap.rs",
            "crates/flowswitch/tests/switch_netns.rs",
            "docs/design/ports.md",
        ] {
            assert!(
                repo().join(f).is_file(),
                "docs claim real ports but {f} is missing"
            );
        }
    }
}

#[test]
fn scripts_keep_their_files_in_private_temporary_directories() {
    for script in [
        "scripts/test-all.sh",
        "scripts/fresh-clone-check.sh",
        "scripts/fw-instructions.sh",
    ] {
        let s = read(script);
        assert!(s.contains("mktemp -d"), "{script}");
        for line in s.lines().filter(|l| !l.trim_start().starts_with('#')) {
            assert!(
                !line.contains("/tmp/"),
                "{script} writes a fixed /tmp name: {line}"
            );
        }
    }
}
