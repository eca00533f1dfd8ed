//! One CSV row per stream measurement, and its reaction-time spectrum (`.hgrm`).
//!
//! Column order is part of the contract: new columns go at the end. Reaction times are in
//! microseconds (three decimals), from a window's last round due to its commit received.
#![forbid(unsafe_code)]

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// One row of a stream summary CSV.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamRow {
    pub run_id: String,
    pub scenario: String,
    pub engine: String,
    pub transport: String,
    pub streams: u32,
    /// Links: an emulator thread and a wire each, carrying a contiguous range of streams.
    pub links: u32,
    pub distance: u32,
    pub window: u32,
    pub commit: u32,
    pub round_ns: u64,
    /// Decoder threads (CPU pool), or 0 where it does not apply.
    pub workers: u32,
    /// Cycles sent, and the first ones not timed.
    pub rounds: u64,
    pub warmup_rounds: u64,
    /// Rounds sent (streams x rounds, less the staggered starts).
    pub round_entries: u64,
    pub rounds_committed: u64,
    pub rounds_refused: u64,
    pub windows: u64,
    pub windows_lost: u64,
    /// Streams whose answers stopped lining up (a refusal, a lost response): from then on
    /// their windows count as lost and their shots for nothing.
    pub streams_broken: u64,
    /// Responses the service could not hand to the transport (a full socket buffer or ring:
    /// the emulator was not reading).
    pub responses_dropped: u64,
    pub reaction_samples: u64,
    pub reaction_p50_us: f64,
    pub reaction_p90_us: f64,
    pub reaction_p99_us: f64,
    pub reaction_p99_9_us: f64,
    pub reaction_max_us: f64,
    pub backlog_max_rounds: u64,
    pub behind_end_us: f64,
    pub kept_up: bool,
    /// The latest any link's emulator thread sent a cycle after it was due: above a few
    /// µs, the emulator itself did not keep the cadence (its lateness is in the reaction
    /// times).
    pub send_late_max_us: f64,
    /// Cycles some link sent more than 50 µs after they were due (an emulator thread
    /// stalled or fell behind); each cycle counts once, whatever the links.
    pub send_late_cycles: u64,
    pub shots: u64,
    pub mistakes: u64,
    pub ler: f64,
    /// The busiest decoder thread's share of the run, %.
    pub busiest_worker_pct: f64,
    pub cpu: String,
    pub gpu: String,
    pub host: String,
    pub git_rev: String,
    pub timestamp_utc: String,
    /// This row's `.hgrm`, relative to the CSV's folder.
    pub spectrum: String,
    /// Records that were not what their stream was owed next (a lost answer, or a service
    /// answering out of order); empty in files written before the column existed.
    #[serde(default)]
    pub unexpected_records: Option<u64>,
    /// GPU engines: the threads decoding each window; empty for the CPU pool and in files
    /// written before the column existed.
    #[serde(default)]
    pub gpu_threads: Option<u32>,
}

/// Writes rows as they are measured (flushed each time: an interrupted sweep keeps them).
pub struct StreamCsv {
    path: PathBuf,
    writer: csv::Writer<File>,
}

impl StreamCsv {
    pub fn create(path: &Path) -> Result<StreamCsv> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let writer = csv::Writer::from_path(path).map_err(|source| Error::Csv {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(StreamCsv {
            path: path.to_path_buf(),
            writer,
        })
    }

    pub fn write(&mut self, row: &StreamRow) -> Result<()> {
        let csv = |source| Error::Csv {
            path: self.path.clone(),
            source,
        };
        self.writer.serialize(row).map_err(csv)?;
        self.writer.flush().map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// Reads a stream summary CSV.
pub fn read(path: &Path) -> Result<Vec<StreamRow>> {
    let mut r = csv::Reader::from_path(path).map_err(|source| Error::Csv {
        path: path.to_path_buf(),
        source,
    })?;
    r.deserialize()
        .map(|row| {
            row.map_err(|source| Error::Csv {
                path: path.to_path_buf(),
                source,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_with_the_named_columns_first_in_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.csv");
        let row = StreamRow {
            streams: 10,
            distance: 5,
            round_ns: 1000,
            reaction_p50_us: 3.25,
            reaction_p99_us: 12.5,
            backlog_max_rounds: 10,
            kept_up: true,
            ler: 0.001,
            ..StreamRow::default()
        };
        let mut w = StreamCsv::create(&p).unwrap();
        w.write(&row).unwrap();
        drop(w);
        assert_eq!(read(&p).unwrap(), vec![row]);
        let header = std::fs::read_to_string(&p).unwrap();
        let header = header.lines().next().unwrap();
        let at = |c: &str| header.split(',').position(|h| h == c).unwrap();
        let named = [
            "streams",
            "distance",
            "round_ns",
            "reaction_p50_us",
            "reaction_p99_us",
            "backlog_max_rounds",
            "kept_up",
            "ler",
        ];
        assert!(named.windows(2).all(|w| at(w[0]) < at(w[1])), "{header}");
    }
}
