//! Running measurements: start the forwarder a point describes, drive it with the
//! emulator, stop it, and record one CSV row and one `.hgrm` spectrum per point.
//!
//! - `settings`: what a point asks of the forwarder ([`run_config`]) and of the
//!   emulator (its load and its workload);
//! - `drive`: runs the load where the point's launch says: in process (one emulator
//!   thread per QPU end), against an external forwarder, or against a child `qfwd`;
//! - `child`: the child `qfwd run` process, and the summary lines it prints on exit;
//! - `row`: the CSV row of a measured point;
//! - `output`: spectra beside the CSV, stall notes and the per-point report lines;
//! - `cli`: `qfwd-latency sweep` ([`SweepArgs`]): overrides, GPU checks, repeated runs.
//!
//! [`measure`] ties them together for one point; [`run`] for a whole scenario.
#![forbid(unsafe_code)]

mod child;
mod cli;
mod drive;
mod output;
mod row;
mod settings;

pub use child::{parse_service_line, parse_shard_line, parse_stalls_line, parse_summary};
pub use cli::{adapt, check_gpus, run, run_scenario, run_scenario_repeated, SweepArgs};
pub use output::{
    accounting_line, claim_output, forwarder_stall_note, plan_output, record, spectrum_dir,
    spectrum_name, stall_note,
};
pub use settings::run_config;

use qfwd::stats::ShardCounts;

use crate::emulator::Outcome;
use crate::provenance::Provenance;
use crate::record::Row;
use crate::scenario::Point;
use crate::Result;

use drive::drive;
use row::point_row;
use settings::{load_spec, point_workload};

/// What the forwarder itself counted (in-process: its stats; child: its summary lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ForwarderCounts {
    pub received: u64,
    pub answered_ok: u64,
    pub answered_error: u64,
    pub dropped: u64,
    /// Its service time (submission to the backend to response handed back), p50 and p99 in ns, over
    /// every request it served (the warm-up too); `None` when it served none or did not say.
    pub service_ns: Option<(u64, u64)>,
    /// Stalls of its loop and requests in service across one (`qfwd::forward` docs);
    /// `None` when it did not say (an older `qfwd`).
    pub stalls: Option<(u64, u64)>,
}

/// One measured point.
pub struct Measured {
    pub row: Row,
    pub outcome: Outcome,
    pub forwarder: Option<ForwarderCounts>,
    /// Per-GPU counters of a routed forwarder (`gpus`); empty otherwise or when unknown.
    pub shards: Vec<ShardCounts>,
}

/// Name a replayed decoder answers to (function_id = FNV-1a of it).
pub const DECODER_NAME: &str = "decode";

/// Measures one point. `progress` gets the number of requests sent so far.
pub fn measure(
    point: &Point,
    scenario: &str,
    run_id: &str,
    prov: &Provenance,
    mut progress: impl FnMut(u64) + Send,
) -> Result<Measured> {
    let workload = point_workload(point)?;
    let load = load_spec(point);
    let config = run_config(point);
    let (outcome, forwarder, shards) = drive(point, &config, &workload, &load, &mut progress)?;
    let ids = (scenario, run_id);
    let mut row = point_row(
        point,
        &config,
        &workload,
        ids,
        prov,
        (&outcome, forwarder, &shards),
    );
    row.set_latencies(&outcome.histogram);
    Ok(Measured {
        row,
        outcome,
        forwarder,
        shards,
    })
}

#[cfg(test)]
mod tests;
