//! Network namespaces and veth pairs for tests of real ports (root only).
//!
//! A test that forwards between Linux interfaces builds its hosts here: [`Netns::new`] makes
//! a namespace with a unique name, [`Veth::new`] a veth pair with one end (given an address)
//! inside a namespace and the other end in the test's own namespace, where the switch opens
//! it. Both are removed when dropped, so a failing test leaves nothing behind (a test killed
//! by a signal can: names carry the process id, so they never collide with a later run).
//!
//! [`netns_missing_reason`] says why such a test cannot run here (not root, no `ip`, no
//! namespaces); the test then calls [`crate::skip()`] with it.

use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A short name unique in this machine's root namespace for this process: `fs<pid36><n36><tag>`,
/// at most 15 bytes (IFNAMSIZ - 1).
pub fn unique_name(tag: &str) -> String {
    fn base36(mut v: u64) -> String {
        let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let mut s = Vec::new();
        loop {
            s.push(digits[(v % 36) as usize]);
            v /= 36;
            if v == 0 {
                break;
            }
        }
        s.reverse();
        String::from_utf8(s).unwrap_or_default()
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = format!(
        "fs{}{}{}",
        base36(u64::from(std::process::id())),
        base36(u64::from(n)),
        tag
    );
    name.truncate(15);
    name
}

fn run(cmd: &mut Command) -> Result<Output, String> {
    let text = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{text}: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{text}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `ip ARGS` in the current namespace.
pub fn ip(args: &[&str]) -> Result<String, String> {
    run(Command::new("ip").args(args)).map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Why tests needing network namespaces cannot run here, or `None` when they can.
pub fn netns_missing_reason() -> Option<String> {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        });
    if uid.as_deref() != Some("0") {
        return Some("needs root (network namespaces and veth pairs)".into());
    }
    if Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        return Some("`ip` (iproute2) is not installed".into());
    }
    match Netns::new("probe") {
        Ok(_) => None,
        Err(e) => Some(format!("cannot create a network namespace: {e}")),
    }
}

/// Why a test needing `tool` in PATH cannot run, or `None`.
pub fn tool_missing_reason(tool: &str) -> Option<String> {
    match Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        _ => Some(format!("`{tool}` is not installed")),
    }
}

/// A network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a namespace named after `tag` (unique), with its loopback up and IPv6
    /// duplicate address detection off (addresses usable at once).
    pub fn new(tag: &str) -> Result<Netns, String> {
        let name = unique_name(tag);
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        for key in ["all", "default"] {
            // Best effort: a kernel without IPv6 has no such key.
            let _ = ns.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{key}.accept_dad=0"),
            ]);
        }
        Ok(ns)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command that runs `program` inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs `argv` inside the namespace; its stdout, or an error with its stderr.
    pub fn exec(&self, argv: &[&str]) -> Result<String, String> {
        let (prog, rest) = argv.split_first().ok_or("empty command")?;
        run(self.command(prog).args(rest)).map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// A veth pair: `outside` in the test's namespace (up, no address: the switch's port),
/// `inside` in a [`Netns`] (up, with the addresses given). Deleted on drop (deleting one end
/// deletes both).
#[derive(Debug)]
pub struct Veth {
    /// The end the switch opens.
    pub outside: String,
    /// The end inside the namespace.
    pub inside: String,
    /// The inside end's MAC address.
    pub inside_mac: String,
}

impl Veth {
    /// A pair joining `ns` to the test's namespace; `addrs` (CIDR, v4 or v6) are put on the
    /// inside end. `mtu`, when given, is set on both ends.
    pub fn new(ns: &Netns, addrs: &[&str], mtu: Option<u32>) -> Result<Veth, String> {
        let outside = unique_name("o");
        let inside = unique_name("i");
        ip(&[
            "link", "add", &outside, "type", "veth", "peer", "name", &inside,
        ])?;
        let mut v = Veth {
            outside,
            inside,
            inside_mac: String::new(),
        };
        ip(&["link", "set", &v.inside, "netns", ns.name()])?;
        if let Some(m) = mtu {
            let m = m.to_string();
            ip(&["link", "set", &v.outside, "mtu", &m])?;
            ns.exec(&["ip", "link", "set", &v.inside, "mtu", &m])?;
        }
        for a in addrs {
            ns.exec(&["ip", "addr", "add", a, "dev", &v.inside])?;
        }
        ns.exec(&["ip", "link", "set", &v.inside, "up"])?;
        ip(&["link", "set", &v.outside, "up"])?;
        let link = ns.exec(&["ip", "-o", "link", "show", &v.inside])?;
        let mac = link
            .split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        v.inside_mac = mac;
        Ok(v)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.outside]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_and_distinct() {
        let a = unique_name("tagthatislong");
        let b = unique_name("tagthatislong");
        assert!(a.len() <= 15 && b.len() <= 15, "{a} {b}");
        assert_ne!(a, b);
    }

    #[test]
    fn a_namespace_and_veth_come_and_go() {
        if let Some(r) = netns_missing_reason() {
            crate::skip(&r);
            return;
        }
        let ns = Netns::new("t").unwrap();
        let v = Veth::new(&ns, &["10.9.0.1/24"], Some(1400)).unwrap();
        let out = ns.exec(&["ip", "-o", "addr", "show", &v.inside]).unwrap();
        assert!(out.contains("10.9.0.1/24"), "{out}");
        assert!(v.inside_mac.len() == 17, "{:?}", v.inside_mac);
        let outside = v.outside.clone();
        let name = ns.name().to_owned();
        drop(v);
        drop(ns);
        assert!(ip(&["link", "show", &outside]).is_err());
        assert!(!ip(&["netns", "list"]).unwrap().contains(&name));
    }
}
