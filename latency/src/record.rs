//! One measured sweep point: the summary CSV row and its percentile spectrum (`.hgrm`).
//!
//! Column order is part of the contract (docs/measuring.md): append new columns at the end,
//! never reorder. All latencies are integer nanoseconds; `rtt_or_oneway` says which
//! quantity they are, and a round trip is never halved.
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// One row of a summary CSV.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub run_id: String,
    pub scenario: String,
    pub topology: String,
    pub transport: String,
    pub rx_completion: String,
    pub doorbell: String,
    pub pollers: u32,
    pub decoder: String,
    pub payload_bytes: u32,
    pub mode: String,
    pub offered_rate_hz: u64,
    pub achieved_rate_hz: u64,
    pub warmup: u64,
    pub samples: u64,
    pub errors: u64,
    pub dropped: u64,
    pub timeouts: u64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub p99_99_ns: u64,
    pub max_ns: u64,
    pub mean_ns: u64,
    pub stdev_ns: u64,
    pub rtt_or_oneway: String,
    pub clock: String,
    pub cpu: String,
    pub gpu: String,
    pub nic: String,
    pub pcie_path: String,
    pub host: String,
    pub git_rev: String,
    pub timestamp_utc: String,
    /// Path of this row's `.hgrm` spectrum, relative to the CSV's folder.
    pub spectrum: String,
    /// GPUs requests were routed over (`0,1`), or `-` when not routed. Columns from here
    /// on came later: CSVs without them still read (empty values).
    #[serde(default)]
    pub gpus: String,
    /// Function names (patches) the requests were spread over.
    #[serde(default)]
    pub functions: u32,
    /// Requests each GPU completed, `GPU:COUNT` joined by `;` (`0:5000;1:5000`), or `-`.
    #[serde(default)]
    pub per_gpu_completed: String,
    /// gpu-persistent: warps polling each slot out of phase (`pollers` / this = poller
    /// groups); 0 for the other topologies.
    #[serde(default)]
    pub pollers_per_slot: u32,
    /// Stalls of the emulator's own thread while timed requests were in flight (a gap
    /// between two of its clock reads 5 µs or more beyond its quickest; `emulator` docs).
    #[serde(default)]
    pub emulator_stalls: Option<u64>,
    /// Timed samples in flight across such a stall: their latency includes time the
    /// emulator did not run. Both are empty in files written before they existed.
    #[serde(default)]
    pub stalled_samples: Option<u64>,
    /// The forwarder's own service time (submission to the backend to response handed
    /// back: a CPU handler's work, or a GPU's round trip from just after the mailbox write;
    /// not the transport's hops or the emulator), p50 and p99, over every request it
    /// served, the warm-up too. Empty where
    /// the harness did not start the forwarder (`launch = "external"`) or in older files.
    #[serde(default)]
    pub forwarder_p50_ns: Option<u64>,
    #[serde(default)]
    pub forwarder_p99_ns: Option<u64>,
    /// Stalls of the forwarder's own loop (a gap between two of its clock reads 5 µs or
    /// more beyond its quickest; `qfwd::forward` docs), and the requests (the warm-up's
    /// too) in service across one: their service time includes time the forwarder did
    /// not run. Empty where the harness did not start the forwarder or in older files.
    #[serde(default)]
    pub forwarder_stalls: Option<u64>,
    #[serde(default)]
    pub forwarder_stalled_requests: Option<u64>,
    /// `cpu-forwarded` (a forwarding thread) or `gpu-direct` (the device side polls the
    /// NIC's queues); empty in older files (they were all cpu-forwarded).
    #[serde(default)]
    pub data_path: String,
    /// QPU links the requests came over (one emulator thread and one receive queue each);
    /// empty in older files (one link).
    #[serde(default)]
    pub links: Option<u32>,
}

/// Names of the columns in file order (the CSV header).
pub const COLUMNS: &[&str] = &[
    "run_id",
    "scenario",
    "topology",
    "transport",
    "rx_completion",
    "doorbell",
    "pollers",
    "decoder",
    "payload_bytes",
    "mode",
    "offered_rate_hz",
    "achieved_rate_hz",
    "warmup",
    "samples",
    "errors",
    "dropped",
    "timeouts",
    "min_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p99_9_ns",
    "p99_99_ns",
    "max_ns",
    "mean_ns",
    "stdev_ns",
    "rtt_or_oneway",
    "clock",
    "cpu",
    "gpu",
    "nic",
    "pcie_path",
    "host",
    "git_rev",
    "timestamp_utc",
    "spectrum",
    "gpus",
    "functions",
    "per_gpu_completed",
    "pollers_per_slot",
    "emulator_stalls",
    "stalled_samples",
    "forwarder_p50_ns",
    "forwarder_p99_ns",
    "forwarder_stalls",
    "forwarder_stalled_requests",
    "data_path",
    "links",
];

/// Columns every summary CSV has; the ones after them were appended later and may be
/// missing from older files.
pub const BASE_COLUMNS: usize = 36;

impl Row {
    /// Fills the latency columns from a histogram of nanoseconds.
    pub fn set_latencies(&mut self, h: &Histogram<u64>) {
        self.samples = h.len();
        if h.is_empty() {
            return;
        }
        self.min_ns = h.min();
        self.p50_ns = h.value_at_quantile(0.50);
        self.p90_ns = h.value_at_quantile(0.90);
        self.p99_ns = h.value_at_quantile(0.99);
        self.p99_9_ns = h.value_at_quantile(0.999);
        self.p99_99_ns = h.value_at_quantile(0.9999);
        self.max_ns = h.max();
        self.mean_ns = h.mean().round() as u64;
        self.stdev_ns = h.stdev().round() as u64;
    }

    /// Value of a column by name, as text (for grouping and reports).
    pub fn get(&self, column: &str) -> Option<String> {
        let v = match column {
            "run_id" => self.run_id.clone(),
            "scenario" => self.scenario.clone(),
            "topology" => self.topology.clone(),
            "transport" => self.transport.clone(),
            "rx_completion" => self.rx_completion.clone(),
            "doorbell" => self.doorbell.clone(),
            "pollers" => self.pollers.to_string(),
            "decoder" => self.decoder.clone(),
            "payload_bytes" => self.payload_bytes.to_string(),
            "mode" => self.mode.clone(),
            "offered_rate_hz" => self.offered_rate_hz.to_string(),
            "achieved_rate_hz" => self.achieved_rate_hz.to_string(),
            "warmup" => self.warmup.to_string(),
            "samples" => self.samples.to_string(),
            "errors" => self.errors.to_string(),
            "dropped" => self.dropped.to_string(),
            "timeouts" => self.timeouts.to_string(),
            "min_ns" => self.min_ns.to_string(),
            "p50_ns" => self.p50_ns.to_string(),
            "p90_ns" => self.p90_ns.to_string(),
            "p99_ns" => self.p99_ns.to_string(),
            "p99_9_ns" => self.p99_9_ns.to_string(),
            "p99_99_ns" => self.p99_99_ns.to_string(),
            "max_ns" => self.max_ns.to_string(),
            "mean_ns" => self.mean_ns.to_string(),
            "stdev_ns" => self.stdev_ns.to_string(),
            "rtt_or_oneway" => self.rtt_or_oneway.clone(),
            "clock" => self.clock.clone(),
            "cpu" => self.cpu.clone(),
            "gpu" => self.gpu.clone(),
            "nic" => self.nic.clone(),
            "pcie_path" => self.pcie_path.clone(),
            "host" => self.host.clone(),
            "git_rev" => self.git_rev.clone(),
            "timestamp_utc" => self.timestamp_utc.clone(),
            "spectrum" => self.spectrum.clone(),
            "gpus" => self.gpus.clone(),
            "functions" => self.functions.to_string(),
            "per_gpu_completed" => self.per_gpu_completed.clone(),
            "pollers_per_slot" => self.pollers_per_slot.to_string(),
            "emulator_stalls" => optional(self.emulator_stalls),
            "stalled_samples" => optional(self.stalled_samples),
            "forwarder_p50_ns" => optional(self.forwarder_p50_ns),
            "forwarder_p99_ns" => optional(self.forwarder_p99_ns),
            "forwarder_stalls" => optional(self.forwarder_stalls),
            "forwarder_stalled_requests" => optional(self.forwarder_stalled_requests),
            "data_path" => self.data_path.clone(),
            "links" => optional(self.links.map(u64::from)),
            _ => return None,
        };
        Some(v)
    }
}

/// A column that may be missing from older files: empty there.
fn optional(v: Option<u64>) -> String {
    v.map_or_else(String::new, |n| n.to_string())
}

/// Writes rows to a summary CSV (created, or truncated if it exists), the header first.
pub struct CsvSink {
    path: PathBuf,
    writer: csv::Writer<File>,
}

impl CsvSink {
    /// Creates (truncating) `path` and writes the header.
    pub fn create(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let file = File::create(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let writer = csv::WriterBuilder::new()
            .has_headers(true)
            .from_writer(file);
        Ok(Self {
            path: path.to_path_buf(),
            writer,
        })
    }

    /// Writes one row and flushes, so an interrupted sweep keeps what it measured.
    pub fn write(&mut self, row: &Row) -> Result<()> {
        let path = self.path.clone();
        self.writer.serialize(row).map_err(|source| Error::Csv {
            path: path.clone(),
            source,
        })?;
        self.writer
            .flush()
            .map_err(|source| Error::Io { path, source })
    }
}

/// Reads every row of a summary CSV, checking that its header is ours.
pub fn read_csv(path: &Path) -> Result<Vec<Row>> {
    let mut reader = csv::Reader::from_path(path).map_err(|source| Error::Csv {
        path: path.to_path_buf(),
        source,
    })?;
    let headers = reader
        .headers()
        .map_err(|source| Error::Csv {
            path: path.to_path_buf(),
            source,
        })?
        .clone();
    for (i, want) in COLUMNS.iter().enumerate() {
        match headers.get(i) {
            Some(h) if h == *want => {}
            // An older file, written before the later columns were appended.
            None if i >= BASE_COLUMNS => break,
            found => {
                return Err(Error::CsvSchema {
                    path: path.to_path_buf(),
                    detail: format!(
                        "column {} is {:?}, expected {:?}",
                        i + 1,
                        found.unwrap_or("<missing>"),
                        want
                    ),
                })
            }
        }
    }
    let mut rows = Vec::new();
    for rec in reader.deserialize() {
        rows.push(rec.map_err(|source| Error::Csv {
            path: path.to_path_buf(),
            source,
        })?);
    }
    Ok(rows)
}

/// Writes a percentile spectrum in HdrHistogram's `.hgrm` text layout
/// (`Value, Percentile, TotalCount, 1/(1-Percentile)`), values in microseconds
/// (`--units us`), 5 ticks per half distance, as HdrHistogram's own
/// `outputPercentileDistribution` does, so its plotter reads the file.
pub fn write_hgrm(path: &Path, h: &Histogram<u64>) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut out = BufWriter::new(File::create(path).map_err(io)?);
    write_hgrm_to(&mut out, h).map_err(io)?;
    out.flush().map_err(io)
}

/// The `.hgrm` text for `h` (nanosecond samples, printed in microseconds).
pub fn write_hgrm_to(out: &mut impl Write, h: &Histogram<u64>) -> std::io::Result<()> {
    const SCALE: f64 = 1000.0; // ns -> us
    writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    let mut count_so_far = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(5) {
            count_so_far += v.count_since_last_iteration();
            let q = v.quantile_iterated_to();
            let value = h.highest_equivalent(v.value_iterated_to()) as f64 / SCALE;
            if q < 1.0 {
                writeln!(
                    out,
                    "{:12.3} {:2.12} {:10} {:14.2}",
                    value,
                    q,
                    count_so_far,
                    1.0 / (1.0 - q)
                )?;
            } else {
                writeln!(out, "{:12.3} {:2.12} {:10}", value, q, count_so_far)?;
            }
        }
    }
    let (mean, stdev, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean() / SCALE, h.stdev() / SCALE, h.max() as f64 / SCALE)
    };
    writeln!(
        out,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        mean, stdev
    )?;
    writeln!(
        out,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        max,
        h.len()
    )?;
    writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        h.distinct_values()
    )?;
    Ok(())
}

/// Reads an `.hgrm` back as (percentile, value in ns) points, for plots.
pub fn read_hgrm(path: &Path) -> Result<Vec<(f64, u64)>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut points = Vec::new();
    for (lineno, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("Value") {
            continue;
        }
        let mut fields = line.split_whitespace();
        let parsed = (|| {
            let value_us: f64 = fields.next()?.parse().ok()?;
            let q: f64 = fields.next()?.parse().ok()?;
            Some((q, (value_us * 1000.0).round() as u64))
        })();
        match parsed {
            Some(p) => points.push(p),
            None => {
                return Err(Error::Hgrm {
                    path: path.to_path_buf(),
                    line: lineno + 1,
                })
            }
        }
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_struct_field_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        let mut sink = CsvSink::create(&p).unwrap();
        let row = Row {
            run_id: "r".into(),
            p50_ns: 1234,
            stalled_samples: Some(3),
            ..Default::default()
        };
        sink.write(&row).unwrap();
        drop(sink);
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().next().unwrap(), COLUMNS.join(","));
        let back = read_csv(&p).unwrap();
        assert_eq!(back, vec![row]);
        for c in COLUMNS {
            assert!(back[0].get(c).is_some(), "no getter for {c}");
        }
    }

    #[test]
    fn csv_without_the_later_columns_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.csv");
        let header = COLUMNS[..BASE_COLUMNS].join(",");
        let mut fields = vec![String::new(); BASE_COLUMNS];
        for (i, c) in COLUMNS[..BASE_COLUMNS].iter().enumerate() {
            fields[i] = match *c {
                "pollers" | "payload_bytes" => "8".into(),
                c if c.ends_with("_ns") || c.ends_with("_hz") => "1".into(),
                "warmup" | "samples" | "errors" | "dropped" | "timeouts" => "0".into(),
                c => c.to_string(),
            };
        }
        std::fs::write(&p, format!("{header}\n{}\n", fields.join(","))).unwrap();
        let rows = read_csv(&p).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].topology, "topology");
        assert_eq!(rows[0].gpus, "");
        assert_eq!(rows[0].functions, 0);
        assert_eq!(rows[0].pollers_per_slot, 0);
        assert_eq!(rows[0].stalled_samples, None, "not measured, not 0");
        assert_eq!(rows[0].get("stalled_samples").as_deref(), Some(""));
        assert_eq!(
            BASE_COLUMNS,
            COLUMNS.iter().position(|c| *c == "spectrum").unwrap() + 1
        );
    }

    #[test]
    fn foreign_csv_is_rejected_with_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        std::fs::write(&p, "a,b\n1,2\n").unwrap();
        let err = read_csv(&p).unwrap_err().to_string();
        assert!(err.contains("column 1"), "{err}");
    }

    #[test]
    fn percentiles_come_from_the_histogram() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let mut row = Row::default();
        row.set_latencies(&h);
        assert_eq!(row.samples, 1000);
        assert_eq!(row.min_ns, 1000);
        assert!((499_000..=501_000).contains(&row.p50_ns), "{}", row.p50_ns);
        assert!((989_000..=991_000).contains(&row.p99_ns), "{}", row.p99_ns);
        assert!(row.max_ns >= 999_000);
    }

    #[test]
    fn hgrm_round_trips_through_text() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.hgrm");
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [2_000u64, 2_100, 2_200, 9_000] {
            h.record(v).unwrap();
        }
        write_hgrm(&p, &h).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)"));
        let max_line = format!(
            "#[Max     = {:12.3}, Total count    =            4]",
            h.max() as f64 / 1000.0
        );
        assert!(text.contains(&max_line), "{text}");
        assert!((9.0..9.01).contains(&(h.max() as f64 / 1000.0)));
        let pts = read_hgrm(&p).unwrap();
        assert!(!pts.is_empty());
        assert_eq!(pts.last().unwrap().0, 1.0);
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(pts.last().unwrap().1, h.highest_equivalent(9_000));
    }
}
