//! `gen-nb`: write an ovn-kubernetes-like OVN northbound database file (the topology of the
//! project's OVN benchmark, `northd::topology`), for `northd --nb-db` or `ovsdb-server`.

use northd::topology::{self, Params};

/// The topology's size (the same knobs and defaults as the OVN benchmark's generator).
#[derive(Debug, Clone, clap::Args)]
pub struct TopoArgs {
    /// Pods per node (at most 250).
    #[arg(long = "pods-per-node", default_value_t = 10)]
    pub pods_per_node: usize,
    /// ClusterIP services (default 2 × nodes).
    #[arg(long)]
    pub services: Option<usize>,
    /// Backends per service.
    #[arg(long, default_value_t = 2)]
    pub backends: usize,
    /// Namespaces (default: nodes).
    #[arg(long)]
    pub namespaces: Option<usize>,
    /// Network policies (default: nodes).
    #[arg(long)]
    pub netpols: Option<usize>,
    /// NodePort services per node.
    #[arg(long = "nodeport-svcs", default_value_t = 0)]
    pub nodeport_svcs: usize,
    /// The OVN NB schema (installed with OVN).
    #[arg(long, default_value = topology::DEFAULT_NB_SCHEMA)]
    pub schema: String,
}

impl TopoArgs {
    /// The generator's parameters for `nodes` nodes, validated.
    pub fn params(&self, nodes: usize) -> anyhow::Result<Params> {
        let p = Params {
            nodes,
            pods_per_node: self.pods_per_node,
            services: self.services,
            backends: self.backends,
            namespaces: self.namespaces,
            netpols: self.netpols,
            nodeport_svcs: self.nodeport_svcs,
        };
        p.validate().map_err(anyhow::Error::msg)?;
        Ok(p)
    }
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Nodes (at most 1000).
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Output database file.
    #[arg(short = 'o', long)]
    pub output: String,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let p = args.topo.params(args.nodes)?;
    let (schema_json, schema) =
        topology::read_schema(&args.topo.schema).map_err(anyhow::Error::msg)?;
    let db = topology::generate(&schema, &p).map_err(anyhow::Error::msg)?;
    ovsdb::file::write(&args.output, &schema_json, &db)?;
    Ok(())
}
