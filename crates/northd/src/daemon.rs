//! The northd daemon: follows the NB in a running `ovsdb-server`, compiles it, and keeps
//! the SB in another running `ovsdb-server` equal to the result, writing only differences;
//! answers `ovn-nbctl --wait=sb` by copying `NB_Global.nb_cfg` to `SB_Global.nb_cfg` and
//! `NB_Global.sb_cfg` once the SB holds the result.
//!
//! An NB change re-runs only the items it touches ([`crate::incr`]) and writes only the
//! logical flows whose datapaths changed; changes the incremental engine does not follow,
//! a reconnect, a failed SB transaction, and a bare new `nb_cfg` (`ovn-nbctl --wait=sb
//! sync`, which ovn-northd 23.03 answers with a full recompute) recompute everything. Our
//! own `sb_cfg` writes trigger nothing.

use crate::engine::Strategy;
use crate::incr;
use crate::sb;
use ovsdb::{MonitorSpec, Session};
use serde_json::json;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What the daemon connects to and how it builds.
#[derive(Debug, Clone)]
pub struct Config {
    /// NB target (`unix:PATH`, `tcp:HOST:PORT`).
    pub nb: String,
    /// SB target.
    pub sb: String,
    /// Build threads.
    pub threads: usize,
    /// Parallel strategy.
    pub strategy: Strategy,
    /// Stop after the first complete sync (for tests and one-shot use).
    pub once: bool,
}

/// One compute-and-sync round's figures, for the log.
#[derive(Debug, Clone, Default)]
pub struct Round {
    /// Where the time went: (phase, ms), in order.
    pub phases: Vec<(&'static str, f64)>,
    /// Flows computed.
    pub flows: usize,
    /// Compute time.
    pub compute: Duration,
    /// Time to plan and commit the SB transactions.
    pub sync: Duration,
    /// Logical flows inserted.
    pub added: usize,
    /// Logical flows deleted.
    pub deleted: usize,
    /// The items re-run when the round was incremental (`None`: a full recompute).
    pub incremental_items: Option<usize>,
    /// Whether the round's last SB transaction also set `SB_Global.nb_cfg` (so the
    /// `nb_cfg` handshake has only the NB side left).
    pub sb_nb_cfg: bool,
    /// The bindings the round planned with, freed after the `nb_cfg` handshake rather than
    /// before it (≈ 100,000 allocations at 800 nodes) when the round's commit was small.
    pub(crate) leftover: Option<sb::SbWant>,
}

/// What the daemon knows of the SB between rounds: its logical flows and the indexes of
/// its binding rows, both kept up to date from the session's change lists.
#[derive(Debug, Default)]
struct SbKnown {
    flows: sb::FlowCache,
    index: crate::sb_index::SbIndex,
}

impl SbKnown {
    /// Takes in what the SB session reports since the last call: the logical flows' events
    /// and the other tables' changed rows.
    fn take_in(&mut self, sbs: &mut Session) {
        let changes = sbs.take_changes();
        self.flows.absorb(sbs.take_events());
        if let Some(db) = sbs.replica() {
            self.flows.apply(db, &changes);
            self.index.apply(db, &changes);
        }
    }

    fn invalidate(&mut self) {
        self.flows.invalidate();
        self.index.invalidate();
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Runs until an unrecoverable error (or, with `once`, after the first full sync). `log`
/// receives one line per round and per problem.
pub fn run(cfg: &Config, log: impl FnMut(&str)) -> Result<(), String> {
    run_until(cfg, &std::sync::atomic::AtomicBool::new(false), log)
}

/// [`run`], returning (after the round in progress) once `stop` is set.
pub fn run_until(
    cfg: &Config,
    stop: &std::sync::atomic::AtomicBool,
    mut log: impl FnMut(&str),
) -> Result<(), String> {
    let mut nb = Session::new(&cfg.nb, "OVN_Northbound", MonitorSpec::all());
    // The SB's logical flows are most of its size: the replica does not keep them, our
    // record of them (`sb::FlowCache`) is made from the session's stream of their rows.
    let mut sbs = Session::new(
        &cfg.sb,
        "OVN_Southbound",
        MonitorSpec::all().streamed("Logical_Flow"),
    );
    let mut dirty = true;
    let mut last_nb_cfg: Option<i64> = None;
    // What the SB's logical flows and bindings are, kept between rounds from the session's
    // events and changes (the flows' datapath mapping redone after a datapath change).
    let mut cache = SbKnown::default();
    // The incremental engine and the NB rows changed since its last round.
    let mut engine = incr::Engine::default();
    let mut pending: Vec<(String, ovsdb::Uuid)> = Vec::new();
    let mut nb_connects = 0;
    // When the round answering the newest `nb_cfg` started (`NB_Global.nb_cfg_timestamp`,
    // as ovn-northd writes it: `ovn-nbctl --print-wait-time` prints it as the delay before
    // processing).
    let mut started_ms = now_ms();
    // The `nb_cfg` the last round wrote to `SB_Global` itself, if it did.
    let mut sb_has_nb_cfg: Option<i64> = None;
    // Whether the last look at the SB found data: the server may have more queued (the
    // update of a large transaction is tens of MB), and it is read on without waiting —
    // else the next round's transaction reply would wait behind it.
    let mut sb_busy = false;
    // What the last round left to free once `ovn-nbctl --wait=sb` has its answer.
    let mut leftover: Option<sb::SbWant> = None;
    loop {
        let _ = nb
            .poll(Duration::from_millis(if dirty || sb_busy {
                0
            } else {
                200
            }))
            .map_err(|e| log(&format!("NB: {e}")));
        let sb_seen = sbs.received();
        let _ = sbs
            .poll(Duration::ZERO)
            .map_err(|e| log(&format!("SB: {e}")));
        sb_busy = sbs.received() != sb_seen;
        let changes = nb.take_changes();
        let rows_changed = changes.iter().any(|(t, _)| t != "NB_Global");
        if rows_changed {
            dirty = true;
        }
        pending.extend(changes);
        if nb.connects() != nb_connects {
            // A new replica: what changed since the last round is unknown.
            nb_connects = nb.connects();
            engine.reset();
        }
        let (Some(nbdb), Some(_)) = (nb.replica(), sbs.replica()) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let nb_cfg = nbdb
            .table("NB_Global")
            .rows
            .values()
            .next()
            .and_then(|r| r.int("nb_cfg"))
            .unwrap_or(0);
        // A new nb_cfg (`ovn-nbctl --wait=sb sync`) asks for a full recompute, as in
        // ovn-northd 23.03.
        if last_nb_cfg != Some(nb_cfg) {
            dirty = true;
            last_nb_cfg = Some(nb_cfg);
            if !rows_changed {
                engine.reset_threads(cfg.threads);
            }
        }
        let sb_cfg = nbdb
            .table("NB_Global")
            .rows
            .values()
            .next()
            .and_then(|r| r.int("sb_cfg"))
            .unwrap_or(0);
        if dirty {
            started_ms = now_ms();
            let changes = std::mem::take(&mut pending);
            let round = match compute_and_sync(
                cfg,
                &mut nb,
                &mut sbs,
                &mut cache,
                &mut engine,
                (&changes, nb_cfg),
                &mut log,
            ) {
                Ok(r) => r,
                Err(e) => {
                    // A failed round (an SB transaction refused, a connection lost) leaves
                    // the SB as it was: forget what we knew and recompute in full, after a
                    // pause so a persistent failure does not spin.
                    log(&format!("round failed, retrying in full: {e}"));
                    engine.reset();
                    cache.invalidate();
                    if cfg.once || stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return Err(e);
                    }
                    std::thread::sleep(Duration::from_millis(500));
                    continue;
                }
            };
            let how = match round.incremental_items {
                Some(n) => format!("incrementally ({n} items)"),
                None => "in full".to_owned(),
            };
            let phases: Vec<String> = round
                .phases
                .iter()
                .map(|(n, ms)| format!("{n} {ms:.1}"))
                .collect();
            log(&format!(
                "computed {} flows {how} in {:.1} ms, SB synced in {:.1} ms (+{} -{}) [ms: {}]",
                round.flows,
                round.compute.as_secs_f64() * 1e3,
                round.sync.as_secs_f64() * 1e3,
                round.added,
                round.deleted,
                phases.join(", ")
            ));
            dirty = false;
            sb_has_nb_cfg = round.sb_nb_cfg.then_some(nb_cfg);
            leftover = round.leftover;
        }
        if nb_cfg != sb_cfg {
            handshake(
                &mut nb,
                &mut sbs,
                nb_cfg,
                started_ms,
                sb_has_nb_cfg == Some(nb_cfg),
            )
            .map_err(|e| format!("nb_cfg handshake: {e}"))?;
        }
        // Work off the change's path: free the replaced context, index the SB's bindings
        // for the next incremental round.
        engine.tidy();
        drop(leftover.take());
        if let Some(db) = sbs.replica() {
            cache.index.ensure(db);
        }
        if cfg.once || stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
    }
}

fn compute_and_sync(
    cfg: &Config,
    nb: &mut Session,
    sbs: &mut Session,
    cache: &mut SbKnown,
    engine: &mut incr::Engine,
    (nb_changes, nb_cfg): (&[(String, ovsdb::Uuid)], i64),
    log: &mut impl FnMut(&str),
) -> Result<Round, String> {
    let t0 = Instant::now();
    let nbdb = nb.replica().ok_or("NB not connected")?;
    let mut phases: Vec<(&'static str, f64)> = Vec::new();
    let mut lap = Instant::now();
    let mut mark = |name: &'static str| {
        phases.push((name, lap.elapsed().as_secs_f64() * 1e3));
        lap = Instant::now();
    };
    // The model and lookups: patched from the last round's when the engine can, else
    // read whole.
    let (mut ctx, diags, patch) = engine.next_ctx(nbdb, nb_changes, cfg.threads);
    let patched = patch.is_some();
    mark(if patched {
        "ctx (patched)"
    } else {
        "model+ctx"
    });
    for d in &diags {
        log(&format!("warning: {d}"));
    }
    // A patched round that leaves the routers' load balancers alone plans the bindings of
    // what it touched only; every other round wants them all.
    let scope = patch
        .as_ref()
        .filter(|p| p.lbs.is_empty())
        .map(|p| engine.binding_scope(&ctx, p));
    // The bindings wanted (all of them) are made when first needed: a full round makes them
    // after its flows, so the two are not held at once.
    let mut want: Option<sb::SbWant> = None;
    let mut compute = t0.elapsed();
    let t1 = Instant::now();
    ensure_sb_global(sbs)?;
    // Flows name tunnel keys (`$_rtr_lb_<key>_ip4`, ECMP reply ports), and a new datapath
    // or port has its key only once the SB holds it: when the SB lacks some binding, write
    // the bindings first (one round), then plan the flows with the keys the SB holds.
    let complete = |sb: &ovsdb::Database| {
        let dps: std::collections::HashSet<ovsdb::Uuid> = sb
            .table("Datapath_Binding")
            .rows
            .values()
            .filter_map(|r| crate::sb_index::bound_nb_datapath(r))
            .collect();
        let pbs: std::collections::HashSet<&str> = sb
            .table("Port_Binding")
            .rows
            .values()
            .map(|r| r.str("logical_port"))
            .collect();
        ctx.datapaths.iter().all(|d| dps.contains(&d.uuid))
            && ctx
                .nb
                .routers
                .iter()
                .flat_map(|r| &r.ports)
                .all(|p| pbs.contains(p.name.as_str()))
    };
    // A patched context has the last round's datapaths and router ports, all bound then.
    // Any other checks the SB and, on a second thread when it has one, reads the tunnel
    // keys the SB holds (kept unless the check writes bindings).
    let mut keys = None;
    let mut ready = patched || {
        let sb = sbs.replica().ok_or("SB not connected")?;
        if cfg.threads >= 2 {
            let (ok, k) = std::thread::scope(|s| {
                let h = s.spawn(|| ctx.read_tunnel_keys(sb));
                let ok = complete(sb);
                (
                    ok,
                    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                )
            });
            keys = Some(k);
            ok
        } else {
            complete(sb)
        }
    };
    for _ in 0..3 {
        if ready {
            break;
        }
        keys = None;
        let plan = sb::plan(
            &ctx,
            want.get_or_insert_with(|| sb::want_threads(&ctx, cfg.threads)),
            None,
            sbs.replica().ok_or("SB not connected")?,
            None,
        );
        let flows_ready = plan.flows_ready;
        for txn in plan.into_txns() {
            sbs.transact(txn)
                .map_err(|e| format!("SB transaction: {e}"))?;
        }
        cache.take_in(sbs);
        ready = flows_ready;
    }
    if !ready {
        return Err("SB datapaths did not appear after inserting them".into());
    }
    let bindings = t1.elapsed();
    mark("check");
    let t2 = Instant::now();
    if !patched {
        match keys {
            Some(k) => ctx.set_tunnel_keys(k),
            None => ctx.load_tunnel_keys(sbs.replica().ok_or("SB not connected")?),
        }
    }
    // SB rows changed since the last round (ours arriving late, or someone else's).
    cache.take_in(sbs);
    let sbdb = sbs.replica().ok_or("SB not connected")?;
    let mut round = Round::default();
    // The round's transactions, and how many there are.
    let (txns, n_txns): (Box<dyn Iterator<Item = Vec<serde_json::Value>>>, usize) =
        match engine.incremental(ctx, nb_changes) {
            Ok((flow_changes, items)) => {
                mark("items");
                if scope.is_none() && want.is_none() {
                    let ctx = engine.ctx().ok_or("engine lost its context")?;
                    want = Some(sb::want_threads(ctx, cfg.threads));
                    mark("want");
                }
                round.incremental_items = Some(items);
                round.flows = engine.state().len();
                compute += t2.elapsed();
                let t3 = Instant::now();
                let ctx = engine.ctx().ok_or("engine lost its context")?;
                cache.index.ensure(sbdb);
                let dpu = cache.index.sb_datapaths(ctx);
                let (flow_ops, added, deleted) =
                    sb::plan_flow_changes(&dpu, &flow_changes, sbdb, &mut cache.flows)
                        .ok_or("SB datapaths missing after binding them")?;
                mark("flow-ops");
                let mut txns = match &scope {
                    Some(scope) => vec![sb::plan_bindings_delta(
                        ctx,
                        scope,
                        &dpu,
                        sbdb,
                        &cache.index,
                    )],
                    None => sb::plan(ctx, want.as_ref().ok_or("no bindings")?, None, sbdb, None)
                        .into_txns()
                        .collect(),
                };
                txns.retain(|t| !t.is_empty());
                mark("plan");
                round.added = added;
                round.deleted = deleted;
                match txns.first_mut() {
                    Some(t) => t.extend(flow_ops),
                    None if !flow_ops.is_empty() => txns.push(flow_ops),
                    None => {}
                }
                round.sync = bindings + t3.elapsed();
                let n = txns.len();
                (Box::new(txns.into_iter()), n)
            }
            Err((ctx, why)) => {
                if !nb_changes.is_empty() && !why.starts_with("no previous") {
                    log(&format!("full recompute: {why}"));
                }
                // The engine keeps the flows; the insert batches borrow them while they are
                // sent.
                engine.full(ctx, cfg.threads, cfg.strategy);
                let flows = engine.state().flows();
                mark("flows");
                let ctx = engine.ctx().ok_or("engine lost its context")?;
                let want = &*want.get_or_insert_with(|| sb::want_threads(ctx, cfg.threads));
                mark("want");
                compute += t2.elapsed();
                let t3 = Instant::now();
                let plan = sb::plan_threads(
                    ctx,
                    want,
                    Some(flows),
                    sbdb,
                    Some(&mut cache.flows),
                    cfg.threads,
                );
                mark("plan");
                round.flows = flows.len();
                round.added = plan.flows_added;
                round.deleted = plan.flows_deleted;
                round.sync = bindings + t3.elapsed();
                let n = plan.n_txns();
                (Box::new(plan.into_txns()), n)
            }
        };
    round.compute = compute;
    if n_txns > 1 {
        // A large commit (a first sync's insert batches) is the daemon's memory peak: the
        // wanted bindings go before it. A small one keeps them to free after the handshake.
        want = None;
    }
    let t4 = Instant::now();
    let mut failed = None;
    // The `nb_cfg` this round answers goes to `SB_Global` with the round's last transaction
    // (a transaction less before `ovn-nbctl --wait=sb` returns; readers of the SB see the
    // new `nb_cfg` only with the last of the round's changes).
    for (i, mut txn) in txns.enumerate() {
        if i + 1 == n_txns {
            txn.push(sb_nb_cfg_op(nb_cfg));
            round.sb_nb_cfg = true;
        }
        let r = sbs.transact(txn);
        cache.take_in(sbs);
        if let Err(e) = r {
            failed = Some(e);
            break;
        }
    }
    if let Some(e) = failed {
        cache.invalidate();
        engine.reset();
        return Err(format!("SB transaction: {e}"));
    }
    round.sync += t4.elapsed();
    mark("commit");
    round.phases = phases;
    round.leftover = want;
    Ok(round)
}

fn ensure_sb_global(sbs: &mut Session) -> Result<(), String> {
    let has = sbs
        .replica()
        .is_some_and(|d| !d.table("SB_Global").rows.is_empty());
    if !has {
        sbs.transact(vec![json!({"op": "insert", "table": "SB_Global", "row": {
            "options": ["map", [["mac_prefix", "0a:00:00"], ["max_tunid", "16711680"], ["svc_monitor_mac", "0a:00:00:00:00:fe"]]]
        }})])
        .map_err(|e| format!("SB_Global: {e}"))?;
    }
    Ok(())
}

/// The operation that sets `SB_Global.nb_cfg`.
fn sb_nb_cfg_op(nb_cfg: i64) -> serde_json::Value {
    json!({"op": "update", "table": "SB_Global", "where": [], "row": {"nb_cfg": nb_cfg}})
}

/// Tells `ovn-nbctl --wait=sb` that the SB reflects `nb_cfg`: `SB_Global.nb_cfg` (unless the
/// round's last transaction set it already, `sb_done`), then `NB_Global.sb_cfg`.
fn handshake(
    nb: &mut Session,
    sbs: &mut Session,
    nb_cfg: i64,
    started_ms: i64,
    sb_done: bool,
) -> ovsdb::Result<()> {
    let ts = now_ms();
    if !sb_done {
        sbs.transact(vec![sb_nb_cfg_op(nb_cfg)])?;
    }
    nb.transact(vec![
        json!({"op": "update", "table": "NB_Global", "where": [],
        "row": {"sb_cfg": nb_cfg, "sb_cfg_timestamp": ts, "nb_cfg_timestamp": started_ms}}),
    ])?;
    let _ = nb.take_changes();
    Ok(())
}
