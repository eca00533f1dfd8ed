//! `qfwd-latency` with no command: the quick start.
//!
//! An in-process forwarder (the `cpu` topology; with a GPU, also the persistent kernel)
//! driven by the emulator over the in-process ring and over UDP loopback, every answer
//! checked; a latency table with its columns explained, and a summary CSV
//! (`results/quickstart.csv`, not tracked by git) with a `.hgrm` spectrum per row.
//!
//! What it writes over follows one rule with `sweep`: nothing is overwritten without
//! `--force`, except the quick start's own earlier output (a CSV whose rows all come from
//! the quickstart scenario), which it replaces and says so. Any other file at `--out` (a
//! committed result, another sweep's CSV, something that is not a summary CSV) stops it
//! before it measures.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use qfwd::backend::Topology;

use crate::record;
use crate::report::{self, Metric, ReportArgs};
use crate::scenario::{Point, Scenario};
use crate::sweep::{self, claim_output, spectrum_dir};
use crate::{Error, Result};

/// The scenario the quick start runs.
pub const SCENARIO: &str = include_str!("../../scenarios/quickstart.toml");

/// Where the quick start writes by default.
pub const DEFAULT_OUT: &str = "results/quickstart.csv";

/// Its scenario's name, as its CSV rows record it.
const NAME: &str = "quickstart";

/// What the quick start found at its output path before measuring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Nothing there: a new file.
    New,
    /// An earlier quick start's output (its CSV and spectra), replaced.
    ReplacesQuickstart { rows: usize },
    /// Something else, replaced because `--force` was given.
    Forced,
}

impl Claim {
    /// What the quick start tells the user before it measures; `None` for a new file.
    pub fn message(&self, out: &Path) -> Option<String> {
        let (dir, _) = spectrum_dir(out);
        match self {
            Claim::New => None,
            Claim::ReplacesQuickstart { rows } => Some(format!(
                "replacing {} ({rows} rows) and {}/ from an earlier quick start \
                 (copy them elsewhere first to compare runs)",
                out.display(),
                dir.display()
            )),
            Claim::Forced => Some(format!(
                "--force: replacing {} and {}/",
                out.display(),
                dir.display()
            )),
        }
    }
}

/// Decides whether the quick start may write `out` (and its spectrum folder), and clears
/// the old spectra when it replaces them. Refuses, before anything is measured, a file
/// that is not an earlier quick start's output unless `force`.
pub fn claim(out: &Path, force: bool) -> Result<Claim> {
    let (dir, _) = spectrum_dir(out);
    if !out.exists() && !dir.exists() {
        return Ok(Claim::New);
    }
    if force {
        claim_output(out, true)?;
        return Ok(Claim::Forced);
    }
    let earlier = if out.exists() {
        record::read_csv(out)
            .ok()
            .filter(|rows| rows.iter().all(|r| r.scenario == NAME))
    } else {
        None
    };
    match earlier {
        Some(rows) => {
            claim_output(out, true)?;
            Ok(Claim::ReplacesQuickstart { rows: rows.len() })
        }
        None => Err(Error::NotQuickstartOutput {
            path: if out.exists() { out.to_path_buf() } else { dir },
        }),
    }
}

/// The quickstart scenario, with the same points on the GPU's persistent kernel when this
/// host has a GPU.
fn scenario() -> Result<Scenario> {
    let mut scenario = Scenario::parse(SCENARIO, Path::new("scenarios/quickstart.toml"))?;
    eprintln!("qfwd-latency quickstart: {}", scenario.description.trim());
    match qfwd::gpu::probe() {
        Ok(Some(gpus)) => {
            eprintln!("found {}: adding gpu-persistent points", gpus[0]);
            let gpu_points: Vec<Point> = scenario
                .points
                .iter()
                .map(|p| Point {
                    topology: Topology::GpuPersistent,
                    ..p.clone()
                })
                .collect();
            scenario.points.extend(gpu_points);
            scenario.swept_keys.insert(0, "topology".into());
        }
        Ok(None) | Err(_) => eprintln!(
            "no GPU ({}): measuring the cpu topology only",
            qfwd::gpu::unavailable_reason().unwrap_or_else(|| "none found".into())
        ),
    }
    Ok(scenario)
}

/// What the table's columns mean, printed under it.
pub const TABLE_KEY: &str = "\
What the columns say:
  achieved_rate_hz  requests answered per second
  samples           timed requests (after the warm-up)
  errors            answered with an error status, wrongly, twice or malformed
  dropped           never answered (lost)
  timeouts          answered after the emulator's timeout (timeout_ms)
  stalled           requests in flight while the emulator's own thread was not running
                    (a host pause: their latency is the host's, not qfwd's)
  fwd stalled       requests inside the forwarder while its loop was not running
  min .. max µs     round trip, request sent -> answer received
  fwd p50 µs        the forwarder's own share of the p50
  xp50              p50 / the baseline row's p50 (the row marked *)
A stalled count above 1 % of samples makes that row's p99 the host's (docs/measuring.md).";

/// Runs the quick start into `out`; `force` replaces a file that is not an earlier quick
/// start's.
pub fn run(out: &Path, force: bool) -> Result<()> {
    let scenario = scenario()?;
    let claim = claim(out, force)?;
    if let Some(m) = claim.message(out) {
        eprintln!("{m}");
    }
    let rows = sweep::run_scenario(&scenario, out)?;
    let args = ReportArgs {
        csvs: vec![out.to_path_buf()],
        baseline: None,
        metric: Metric::P50,
        markdown: None,
        svg: None,
        columns: None,
        spread: false,
        p99_target_us: None,
        where_: Vec::new(),
    };
    report::run(&args)?;
    println!("{TABLE_KEY}");
    if rows.iter().any(|r| r.errors > 0 || r.dropped > 0) {
        eprintln!("some requests failed: see the errors/dropped columns");
    }
    eprintln!(
        "wrote {} and {}/ (the next quick start replaces them; `qfwd-latency report {}` \
         shows them again)",
        out.display(),
        spectrum_dir(out).0.display(),
        out.display()
    );
    Ok(())
}

/// `--out`'s default as a path.
pub fn default_out() -> PathBuf {
    PathBuf::from(DEFAULT_OUT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{CsvSink, Row};

    fn write(path: &Path, scenario: &str) {
        let mut sink = CsvSink::create(path).unwrap();
        sink.write(&Row {
            scenario: scenario.into(),
            ..Row::default()
        })
        .unwrap();
    }

    #[test]
    fn a_new_path_is_claimed_without_a_message() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("quickstart.csv");
        assert_eq!(claim(&out, false).unwrap(), Claim::New);
        assert_eq!(Claim::New.message(&out), None);
    }

    #[test]
    fn an_earlier_quickstart_is_replaced_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("quickstart.csv");
        write(&out, NAME);
        let spectra = dir.path().join("quickstart-hgrm");
        std::fs::create_dir_all(&spectra).unwrap();
        std::fs::write(spectra.join("009.hgrm"), "old").unwrap();
        let c = claim(&out, false).unwrap();
        assert_eq!(c, Claim::ReplacesQuickstart { rows: 1 });
        let m = c.message(&out).unwrap();
        assert!(
            m.contains("replacing") && m.contains("quickstart.csv"),
            "{m}"
        );
        assert!(m.contains("quickstart-hgrm"), "{m}");
        assert!(
            !spectra.join("009.hgrm").exists(),
            "an old spectrum would sit beside the new ones"
        );
    }

    #[test]
    fn another_result_is_refused_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("h200-topologies.csv");
        write(&out, "gpu-topologies");
        let err = claim(&out, false).unwrap_err().to_string();
        assert!(
            err.contains("h200-topologies.csv") && err.contains("--force"),
            "{err}"
        );
        assert_eq!(
            record::read_csv(&out).unwrap()[0].scenario,
            "gpu-topologies",
            "left as it was"
        );
        assert_eq!(claim(&out, true).unwrap(), Claim::Forced);
    }

    #[test]
    fn a_file_that_is_not_a_summary_csv_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("notes.csv");
        std::fs::write(&out, "my,own\nnotes,here\n").unwrap();
        assert!(claim(&out, false).is_err());
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "my,own\nnotes,here\n"
        );
    }

    #[test]
    fn a_stray_spectrum_folder_is_refused_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("quickstart.csv");
        std::fs::create_dir_all(dir.path().join("quickstart-hgrm")).unwrap();
        let err = claim(&out, false).unwrap_err().to_string();
        assert!(err.contains("quickstart-hgrm"), "{err}");
    }

    #[test]
    fn the_key_explains_every_count_column_of_the_table() {
        for column in crate::report::MEASURED_COUNTS {
            assert!(
                TABLE_KEY
                    .lines()
                    .any(|l| l.trim_start().starts_with(&format!("{column}  "))),
                "{column} is not explained"
            );
        }
    }
}
