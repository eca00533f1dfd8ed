//! What a sweep leaves behind: spectra beside the CSV, and the lines it prints per point.

use std::path::{Path, PathBuf};

use crate::record::{self, CsvSink};
use crate::{Error, Result};

use super::{Measured, SweepArgs};

/// Where a CSV's spectra go: a folder beside it named `<stem>-hgrm`.
pub fn spectrum_dir(csv: &Path) -> (PathBuf, String) {
    let stem = csv
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into());
    let name = format!("{stem}-hgrm");
    let dir = csv
        .parent()
        .map(|p| p.join(&name))
        .unwrap_or_else(|| PathBuf::from(&name));
    (dir, name)
}

/// Records a measured row: writes its spectrum, fills `spectrum`, appends to the CSV.
pub fn record(
    m: &mut Measured,
    index: usize,
    run: u32,
    csv_path: &Path,
    sink: &mut CsvSink,
) -> Result<()> {
    let (dir, rel) = spectrum_dir(csv_path);
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
        path: dir.clone(),
        source,
    })?;
    let file = spectrum_name(index, run);
    record::write_hgrm(&dir.join(&file), &m.outcome.histogram)?;
    m.row.spectrum = format!("{rel}/{file}");
    sink.write(&m.row)
}

/// A warning when at least 1 % of a row's samples were in flight across an emulator
/// stall: then its p99 may be the host's, not the system under test's.
pub fn stall_note(stalled: u64, samples: u64) -> Option<String> {
    one_percent_note(
        stalled,
        samples,
        "samples",
        "were in flight while the emulator's thread stalled",
    )
}

/// The same warning when at least 1 % of the requests the forwarder served (the warm-up's
/// too) were in service across a stall of its loop.
pub fn forwarder_stall_note(stalled: u64, served: u64) -> Option<String> {
    one_percent_note(
        stalled,
        served,
        "requests",
        "were in the forwarder while its loop stalled",
    )
}

fn one_percent_note(stalled: u64, of: u64, what: &str, how: &str) -> Option<String> {
    (of > 0 && stalled * 100 >= of).then(|| {
        format!(
            "note: {stalled} of {of} {what} ({:.1} %) {how}: this row's p99 may be the host's; \
             run it again or on quieter cores (qfwd doctor --jitter)",
            stalled as f64 * 100.0 / of as f64
        )
    })
}

/// Point `index`'s spectrum in run `run` (both from 0): `001.hgrm`, and from the second
/// run of a `--repeat` on `001-r2.hgrm`, so no run overwrites another's.
pub fn spectrum_name(index: usize, run: u32) -> String {
    if run == 0 {
        format!("{:03}.hgrm", index + 1)
    } else {
        format!("{:03}-r{}.hgrm", index + 1, run + 1)
    }
}

/// One line comparing what the emulator saw with what the forwarder counted.
pub fn accounting_line(m: &Measured) -> String {
    let mut s = format!("emulator: {}", m.outcome);
    if let Some(f) = m.forwarder {
        let agrees = f.received == m.outcome.sent;
        s.push_str(&format!(
            "\nforwarder: received {} = ok {} + error {} + dropped {}{}",
            f.received,
            f.answered_ok,
            f.answered_error,
            f.dropped,
            if agrees {
                ""
            } else {
                "  (differs from requests sent: datagrams lost before the forwarder)"
            }
        ));
    }
    for sh in &m.shards {
        s.push_str(&format!("\nforwarder {sh}"));
    }
    s
}

/// Where the sweep of scenario `name` (read from `path`) writes: `--out`, else
/// `results/<name>.csv`, announced in the log. After a dry run has listed the points
/// (`labels`, one per point), `None`: nothing is measured.
pub fn plan_output(
    path: &Path,
    name: &str,
    labels: impl ExactSizeIterator<Item = String>,
    args: &SweepArgs,
) -> Option<PathBuf> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(format!("{name}.csv")));
    tracing::info!(
        "{}: {} points -> {}",
        path.display(),
        labels.len(),
        out.display()
    );
    if args.dry_run {
        for (i, label) in labels.enumerate() {
            println!("{:3}  {}", i + 1, label);
        }
        return None;
    }
    Some(out)
}

/// Makes sure the sweep writes over nothing unless `force`: neither the CSV nor its
/// spectrum folder may exist. With `force`, the old spectra go first, so that the folder
/// holds only the new sweep's.
pub fn claim_output(csv: &Path, force: bool) -> Result<()> {
    let (dir, _) = spectrum_dir(csv);
    if !force {
        return match [csv, dir.as_path()].into_iter().find(|p| p.exists()) {
            Some(p) => Err(Error::OutputExists {
                path: p.to_path_buf(),
            }),
            None => Ok(()),
        };
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "hgrm") {
            std::fs::remove_file(&path).map_err(|source| Error::Io { path, source })?;
        }
    }
    Ok(())
}

/// What the sweep prints for a measured point: its line (latencies, counts, stalled
/// samples, the forwarder's service time), then a note on stalls, the per-GPU counts and
/// the accounting where they say something.
pub(super) fn point_report(
    m: &Measured,
    i: usize,
    points: usize,
    of_runs: &str,
    label: &str,
) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    let r = &m.row;
    let mut s = format!(
        "[{}/{points}{of_runs}] {label}: p50 {:.2}us p99 {:.2}us max {:.2}us, {} samples, \
         errors {}, lost {}, stalled {}",
        i + 1,
        us(r.p50_ns),
        us(r.p99_ns),
        us(r.max_ns),
        r.samples,
        r.errors,
        r.dropped,
        m.outcome.stalled_samples,
    );
    if let (Some(p50), Some(p99)) = (r.forwarder_p50_ns, r.forwarder_p99_ns) {
        s.push_str(&format!(
            "; forwarder p50 {:.2}us p99 {:.2}us",
            us(p50),
            us(p99)
        ));
    }
    if let (Some(stalls), Some(requests)) = (r.forwarder_stalls, r.forwarder_stalled_requests) {
        s.push_str(&format!(", stalls {stalls} ({requests} requests)"));
    }
    if let Some(why) = crate::plot::trouble(r) {
        // A queue, not the host, sets these latencies: say so instead of a stall note.
        s.push_str(&format!(
            "\n  {why}: these latencies measure a queue, not the service (plots mark the \
             point off the latency scale)"
        ));
    } else {
        if let Some(note) = stall_note(m.outcome.stalled_samples, r.samples) {
            s.push_str(&format!("\n  {note}"));
        }
        if let (Some(stalled), Some(f)) = (r.forwarder_stalled_requests, m.forwarder) {
            if let Some(note) = forwarder_stall_note(stalled, f.received) {
                s.push_str(&format!("\n  {note}"));
            }
        }
    }
    if !m.shards.is_empty() {
        s.push_str(&format!(
            "\n  completed per GPU (GPU:count): {}",
            r.per_gpu_completed
        ));
    }
    let forwarder_missed = m.forwarder.is_some_and(|f| f.received != m.outcome.sent);
    if r.errors > 0 || r.dropped > 0 || forwarder_missed {
        s.push_str(&format!("\n  {}", accounting_line(m).replace('\n', "\n  ")));
    }
    s
}
