//! `qfwd-latency sweep`: its arguments, the overrides they make, and the sweep itself.

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use qfwd::backend::Topology;

use crate::provenance::{self, Provenance};
use crate::record::{CsvSink, Row};
use crate::scenario::{Launch, Point, Scenario};
use crate::{report, spread};
use crate::{Error, Result};

use super::measure;
use super::output::{claim_output, plan_output, point_report, record};
use super::settings::run_config;

/// `qfwd-latency sweep`: run every point of a scenario.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "Examples:\n  \
qfwd-latency sweep scenarios/udp-loopback.toml --dry-run            # list its points\n  \
qfwd-latency sweep scenarios/udp-loopback.toml --out my-host.csv\n  \
qfwd-latency sweep scenarios/udp-loopback.toml --out my-host.csv --force   # again, replacing it\n  \
qfwd-latency sweep scenarios/gpu-decoders.toml --topology cpu --unpinned --samples 2000 \\\n      \
--out gpu-shape-on-cpu.csv                     # a GPU scenario's shape on a laptop\n\n\
Each point writes one CSV row and one .hgrm spectrum (in a folder named <csv stem>-hgrm \
beside the CSV). Rows are flushed as they are measured, so an interrupted sweep keeps them. \
An existing CSV or spectrum folder is never overwritten without --force. Before measuring, \
the sweep checks that this host has the GPUs the scenario's points need.")]
pub struct SweepArgs {
    /// Scenario file (TOML).
    pub scenario: PathBuf,
    /// Summary CSV to write [default: results/NAME.csv, NAME the scenario's name].
    #[arg(long, value_name = "CSV")]
    pub out: Option<PathBuf>,
    /// Overwrite the CSV and the spectra of an earlier sweep at the same place (without
    /// it, an existing CSV or `<csv stem>-hgrm` folder stops the sweep before it starts).
    #[arg(long)]
    pub force: bool,
    /// List the points and exit without measuring.
    #[arg(long)]
    pub dry_run: bool,
    /// Override samples for every point (quick checks), 1 ..= 2147483647.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=qfwd::limits::SAMPLES.max))]
    pub samples: Option<u64>,
    /// Run every point with this topology instead, e.g. `cpu` to run a GPU scenario's shape
    /// on a host without GPUs (`gpus` then labels host shards).
    #[arg(long)]
    pub topology: Option<Topology>,
    /// Stream scenarios: run only the points of this engine (`cpu-pool` or `gpu`).
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<crate::streams::scenario::Engine>,
    /// Drop the scenario's pinning (`cores`, `emulator_core`) and let idle threads yield:
    /// for machines with fewer cores than the scenario pins (CI).
    #[arg(long)]
    pub unpinned: bool,
    /// Pin the forwarder to FWD and the emulator to EMU instead of the scenario's cores
    /// (`qfwd doctor --jitter 5` ranks this host's cores, quietest first).
    #[arg(long, value_name = "FWD,EMU", value_parser = parse_core_pair, conflicts_with = "unpinned")]
    pub cores: Option<(usize, usize)>,
    /// Sweep the whole scenario N times into the one CSV (every point once, then again, so
    /// each point's runs are spread over the whole sweep), then print the spread of each
    /// point over its runs (`report --spread`): a p99 from one run is the host's moment as
    /// much as the code's.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
}

/// `--cores FWD,EMU`: two different core numbers.
pub(super) fn parse_core_pair(s: &str) -> std::result::Result<(usize, usize), String> {
    let parse = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|_| format!("`{v}` is not a core number (expected FWD,EMU, e.g. 4,5)"))
    };
    match s.split(',').collect::<Vec<_>>()[..] {
        [fwd, emu] => {
            let (fwd, emu) = (parse(fwd)?, parse(emu)?);
            if fwd == emu {
                return Err(format!(
                    "forwarder and emulator both on core {fwd}: two spinning threads on one core \
                     measure the scheduler, not the forwarder"
                ));
            }
            Ok((fwd, emu))
        }
        _ => Err(format!("`{s}`: expected two cores FWD,EMU, e.g. 4,5")),
    }
}

/// Applies the command-line overrides of [`SweepArgs`] to every point. `cores` =
/// (forwarder, emulator).
pub fn adapt(
    points: &mut [Point],
    samples: Option<u64>,
    topology: Option<Topology>,
    unpinned: bool,
    cores: Option<(usize, usize)>,
) {
    for p in points {
        if let Some((fwd, emu)) = cores {
            match p.cores.first_mut() {
                Some(c) => *c = fwd,
                None => p.cores.push(fwd),
            }
            p.emulator_core = Some(emu);
        }
        if let Some(n) = samples {
            p.samples = n;
            p.duration_s = None;
        }
        if let Some(t) = topology {
            p.topology = t;
        }
        if unpinned {
            p.cores.clear();
            p.emulator_core = None;
            p.idle = qfwd::forward::IdlePolicy::Yield;
            p.emulator_idle = qfwd::forward::IdlePolicy::Yield;
        }
    }
}

/// Runs a sweep; returns the rows written (none for a stream scenario, whose rows are
/// [`crate::streams::record::StreamRow`]s, written by [`crate::streams::sweep::run`]).
pub fn run(args: &SweepArgs) -> Result<Vec<Row>> {
    if is_stream_file(&args.scenario) {
        return crate::streams::sweep::run(args).map(|_| Vec::new());
    }
    let mut scenario = Scenario::load(&args.scenario)?;
    adapt(
        &mut scenario.points,
        args.samples,
        args.topology,
        args.unpinned,
        args.cores,
    );
    // The overrides may make a point invalid (a topology its other keys do not fit).
    for p in &scenario.points {
        p.validate().map_err(|reason| Error::Scenario {
            path: scenario.path.clone(),
            key: format!(
                "point ({}) after the command-line overrides",
                p.label(&scenario.swept_keys)
            ),
            reason,
        })?;
    }
    let labels = scenario
        .points
        .iter()
        .map(|p| p.label(&scenario.swept_keys));
    let Some(out) = plan_output(&scenario.path, &scenario.name, labels, args) else {
        return Ok(Vec::new());
    };
    check_gpus(&scenario, gpus_here())?;
    claim_output(&out, args.force)?;
    let rows = run_scenario_repeated(&scenario, &out, args.repeat)?;
    if args.repeat > 1 {
        let entries: Vec<report::Entry> = rows
            .iter()
            .map(|row| report::Entry {
                source: out.clone(),
                row: row.clone(),
            })
            .collect();
        print!(
            "{}",
            spread::render_text(&entries, &spread::default_key(), None)
        );
    }
    Ok(rows)
}

/// Whether the file at `path` is a stream scenario (read errors are left to the loader).
fn is_stream_file(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| crate::streams::scenario::is_stream_scenario(&t))
}

/// How many GPUs this host's driver sees (0 without a driver or a device).
fn gpus_here() -> usize {
    match qfwd::gpu::probe() {
        Ok(Some(gpus)) => gpus.len(),
        _ => 0,
    }
}

/// Fails before anything is measured when a point that runs its forwarder on this host
/// needs a GPU index this host lacks (`gpus_here` GPUs, numbered from 0). Points with an
/// external forwarder are measured wherever it runs, so they need nothing here.
pub fn check_gpus(scenario: &Scenario, gpus_here: usize) -> Result<()> {
    let mut short = Vec::new();
    let mut highest = 0;
    for (i, p) in scenario.points.iter().enumerate() {
        if p.launch == Launch::External || !p.topology.needs_gpu() {
            continue;
        }
        let need = run_config(p).gpu_list().into_iter().max().unwrap_or(0);
        if need >= gpus_here {
            short.push((i + 1).to_string());
            highest = highest.max(need);
        }
    }
    if short.is_empty() {
        return Ok(());
    }
    let here = match gpus_here {
        0 => match qfwd::gpu::unavailable_reason() {
            Some(why) => format!("this host has none ({why})"),
            None => "this host has none".to_string(),
        },
        n => format!("this host has {n}"),
    };
    Err(Error::NoGpu {
        scenario: scenario.path.clone(),
        detail: format!(
            "point{} {} of {} need{} GPU {highest} and {here}: run the scenario on a GPU host, \
             or its shape on the CPU with --topology cpu",
            if short.len() == 1 { "" } else { "s" },
            short.join(", "),
            scenario.points.len(),
            if short.len() == 1 { "s" } else { "" },
        ),
    })
}

/// Measures every point of `scenario` into `out` (CSV + spectra).
pub fn run_scenario(scenario: &Scenario, out: &Path) -> Result<Vec<Row>> {
    run_scenario_repeated(scenario, out, 1)
}

/// Measures every point of `scenario` `repeat` times, the whole scenario once per run,
/// into `out`; each run has its own `run_id`, and its spectra their own names.
pub fn run_scenario_repeated(scenario: &Scenario, out: &Path, repeat: u32) -> Result<Vec<Row>> {
    let prov = Provenance::detect();
    let mut sink = CsvSink::create(out)?;
    let points = scenario.points.len();
    let bar = ProgressBar::new((points * repeat as usize) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} points  {elapsed_precise}  {msg}")
            .expect("static template"),
    );
    let mut rows = Vec::new();
    for run in 0..repeat {
        let run_id = provenance::run_id();
        let of_runs = if repeat > 1 {
            format!(" run {}/{repeat}", run + 1)
        } else {
            String::new()
        };
        for (i, point) in scenario.points.iter().enumerate() {
            let label = point.label(&scenario.swept_keys);
            let total = point.warmup + point.timed_samples();
            bar.set_message(format!("{label}  0%"));
            let mut m = measure(point, &scenario.name, &run_id, &prov, |done| {
                bar.set_message(format!("{label}  {}%", done * 100 / total.max(1)));
            })?;
            record(&mut m, i, run, out, &mut sink)?;
            bar.suspend(|| tracing::info!("{}", point_report(&m, i, points, &of_runs, &label)));
            bar.inc(1);
            rows.push(m.row);
        }
    }
    bar.finish_and_clear();
    tracing::info!("wrote {} rows to {}", rows.len(), out.display());
    Ok(rows)
}
