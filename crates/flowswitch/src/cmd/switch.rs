//! `switch`: forward between real Linux interfaces in the foreground.
//!
//! `flowswitch switch --port afpacket:IF --port afxdp:IF --port tap:NAME … [--flows FILE]`
//! runs one bridge
//! (`br0` unless `--bridge`) whose ports are the interfaces given, OpenFlow port numbers 1,
//! 2, … in the order given, until SIGINT or SIGTERM. Without `--flows` the bridge is a
//! learning switch (fail mode standalone: `priority=0,actions=NORMAL`); with it, the bridge
//! is `secure` and runs exactly the flows of FILE (`ovs-ofctl add-flows` syntax). A port
//! that cannot be opened (no such interface, no permission, an XDP program already there)
//! stops the command with the reason and leaves every interface as it was.
//!
//! It is the vswitchd daemon with a configuration made from the command line, so everything
//! the daemon serves is there: `ovs-appctl -t RUNDIR/ovs-vswitchd.PID.ctl dpctl/show`,
//! `ovs-ofctl dump-flows unix:RUNDIR/br0.mgmt`, per-port counters. RUNDIR is `--rundir`,
//! else `$OVS_RUNDIR`, else a private directory under the system's temporary directory,
//! printed at start.

use std::path::PathBuf;

use anyhow::{Context, bail};
use vswitchd::bridges::DummyMode;
use vswitchd::service::{ServeOptions, serve};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A port, `KIND:INTERFACE`: `afpacket:IF` (a Linux interface through AF_PACKET),
    /// `afxdp:IF` (through AF_XDP), `tap:NAME` (a tap interface created for the host).
    /// Repeat for each port.
    #[arg(long = "port", value_name = "KIND:IF", required = true)]
    pub ports: Vec<String>,
    /// Flows in `ovs-ofctl add-flows` syntax (default: a learning switch, NORMAL).
    #[arg(long, value_name = "FILE")]
    pub flows: Option<PathBuf>,
    /// The bridge's name.
    #[arg(long, default_value = "br0")]
    pub bridge: String,
    /// Pin the datapath thread to a CPU of this mask (hex, as OVS's `pmd-cpu-mask`); it
    /// then polls without pause. Default: unpinned, sleeping when idle.
    #[arg(long, value_name = "HEX")]
    pub pmd_cpu_mask: Option<String>,
    /// Run directory for the control and OpenFlow sockets.
    #[arg(long, value_name = "DIR")]
    pub rundir: Option<PathBuf>,
    /// Log levels, OVS's `-v` syntax (`module:destination:level`).
    #[arg(short = 'v', long = "verbose", value_name = "SPEC", num_args = 0..=1, default_missing_value = "ANY:ANY:dbg")]
    pub verbose: Vec<String>,
    /// Serve Prometheus metrics over HTTP on ADDR (a loopback address).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// The `Interface:type` of a `--port` kind.
fn iface_type(kind: &str) -> anyhow::Result<&'static str> {
    Ok(match kind {
        "afpacket" | "system" => "system",
        "tap" | "internal" => "internal",
        "afxdp" => "afxdp",
        other => bail!("port kind {other:?}: use afpacket:IF, afxdp:IF or tap:NAME"),
    })
}

/// The daemon's TOML configuration for `a`.
pub fn config_toml(a: &Args) -> anyhow::Result<String> {
    netdev::netif::check_name(&a.bridge).map_err(|e| anyhow::anyhow!("--bridge: {e}"))?;
    let mut t = String::new();
    if let Some(mask) = &a.pmd_cpu_mask {
        let hex = mask.trim_start_matches("0x");
        if hex.is_empty() || hex.len() > 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("--pmd-cpu-mask {mask:?}: a hexadecimal CPU mask, e.g. 0x2");
        }
        t.push_str(&format!("[other_config]\n\"pmd-cpu-mask\" = \"{hex}\"\n\n"));
    }
    t.push_str(&format!("[[bridge]]\nname = {:?}\n", a.bridge));
    if a.flows.is_some() {
        t.push_str("fail_mode = \"secure\"\n");
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, spec) in a.ports.iter().enumerate() {
        let (kind, name) = spec
            .split_once(':')
            .with_context(|| format!("--port {spec:?}: KIND:INTERFACE, e.g. afpacket:veth1"))?;
        let ty = iface_type(kind)?;
        netdev::netif::check_name(name).map_err(|e| anyhow::anyhow!("--port {spec}: {e}"))?;
        if name == a.bridge || !seen.insert(name.to_owned()) {
            bail!("--port {spec}: interface {name} is given twice (or is the bridge's name)");
        }
        t.push_str(&format!(
            "\n[[bridge.port]]\nname = {name:?}\ntype = {ty:?}\nofport_request = {}\n",
            i + 1
        ));
    }
    Ok(t)
}

/// Runs the switch until SIGINT/SIGTERM.
pub fn run(a: Args) -> anyhow::Result<()> {
    let toml = config_toml(&a)?;
    let flows = match &a.flows {
        Some(f) => Some((
            a.bridge.clone(),
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        )),
        None => None,
    };
    let rundir = a.rundir.clone().or_else(|| {
        std::env::var_os("OVS_RUNDIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let rundir = match rundir {
        Some(d) => d,
        None => std::env::temp_dir().join(format!("flowswitch-switch.{}", std::process::id())),
    };
    eprintln!(
        "flowswitch switch: bridge {} with {} ports; control socket in {} (ovs-appctl -t {}/ovs-vswitchd.{}.ctl dpctl/show); Ctrl-C stops",
        a.bridge,
        a.ports.len(),
        rundir.display(),
        rundir.display(),
        std::process::id()
    );
    let r = serve(ServeOptions {
        dummy: DummyMode::Off,
        verbose: a.verbose.clone(),
        metrics: a.metrics,
        config_toml: Some(toml),
        rundir: Some(rundir.clone()),
        flows,
        strict_ports: true,
        ..ServeOptions::default()
    });
    if a.rundir.is_none() && std::env::var_os("OVS_RUNDIR").is_none() {
        let _ = std::fs::remove_dir(&rundir);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(ports: &[&str]) -> Args {
        Args {
            ports: ports.iter().map(|s| s.to_string()).collect(),
            flows: None,
            bridge: "br0".into(),
            pmd_cpu_mask: None,
            rundir: None,
            verbose: Vec::new(),
            metrics: None,
        }
    }

    #[test]
    fn ports_become_a_bridge_configuration() {
        let t = config_toml(&args(&["afpacket:veth1", "tap:int0"])).unwrap();
        let (cfg, problems) = vswitchd::static_config::parse(&t).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        let br = &cfg.bridges["br0"];
        assert_eq!(br.fail_mode, None);
        let mut kinds: Vec<_> = br
            .ports
            .values()
            .flat_map(|p| &p.interfaces)
            .map(|i| (i.name.clone(), i.kind.clone(), i.ofport_request))
            .collect();
        kinds.sort();
        assert_eq!(
            kinds,
            vec![
                ("br0".into(), "internal".into(), None),
                ("int0".into(), "internal".into(), Some(2)),
                ("veth1".into(), "system".into(), Some(1))
            ]
        );
    }

    #[test]
    fn bad_ports_are_clear_errors() {
        for (ports, want) in [
            (&["veth1"][..], "KIND:INTERFACE"),
            (&["usb:veth1"][..], "port kind"),
            (&["afpacket:"][..], "1 to 15"),
            (&["afpacket:a\"b c"][..], "Linux refuses"),
            (&["afpacket:x", "tap:x"][..], "twice"),
            (&["afpacket:br0"][..], "twice"),
        ] {
            let e = config_toml(&args(ports)).unwrap_err().to_string();
            assert!(e.contains(want), "{ports:?}: {e}");
        }
    }
}
