//! qfwd-latency: the harness that measures qfwd.
//!
//! - [`quickstart`] is what `qfwd-latency` runs with no command;
//! - [`emulator`] plays a QPU controller (closed and open loop) and checks every answer;
//! - [`hostile`] builds the malformed datagrams it can mix in, each with its known fate;
//! - [`scenario`] reads TOML scenario files and expands their sweeps;
//! - [`sweep`] runs each point (forwarder in-process or as a child process) and records it;
//! - [`record`] writes summary CSV rows and `.hgrm` percentile spectra;
//! - [`report`] compares CSVs side by side; [`plot`] draws them as SVG;
//! - [`spread`] summarises a configuration measured several times (lowest, median, highest);
//! - [`streams`] measures stream engines: many logical qubits, reaction time, backlog, LER.
#![forbid(unsafe_code)]

pub mod emulator;
pub mod hostile;
pub mod plot;
pub mod provenance;
pub mod quickstart;
pub mod record;
pub mod replay;
pub mod report;
pub mod scenario;
pub mod spread;
pub mod streams;
pub mod sweep;

use std::path::PathBuf;

/// Everything the harness can fail at, with the file, key or target involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Csv {
        path: PathBuf,
        #[source]
        source: csv::Error,
    },
    #[error("{path}: not a qfwd summary CSV: {detail}")]
    CsvSchema { path: PathBuf, detail: String },
    #[error("{path}:{line}: not an .hgrm percentile line")]
    Hgrm { path: PathBuf, line: usize },
    #[error("{path}: {key}: {reason}")]
    Scenario {
        path: PathBuf,
        key: String,
        reason: String,
    },
    #[error("{path}: plot: {detail}")]
    Plot { path: PathBuf, detail: String },
    #[error("report: {0}")]
    Report(String),
    #[error("emulator toward {target}: {detail}")]
    Emulator { target: String, detail: String },
    #[error("forwarder: {0}")]
    Forwarder(#[from] qfwd::Error),
    #[error("child forwarder `{command}`: {detail}")]
    Child { command: String, detail: String },
    #[error(
        "{path} already exists: pass --force to overwrite it, or --out to write somewhere else"
    )]
    OutputExists { path: PathBuf },
    #[error(
        "{path} exists and is not an earlier quick start's output: pass --force to replace \
         it, or --out to write somewhere else"
    )]
    NotQuickstartOutput { path: PathBuf },
    #[error("{scenario}: {detail}; nothing was measured")]
    NoGpu { scenario: PathBuf, detail: String },
}

/// The harness's result type.
pub type Result<T> = std::result::Result<T, Error>;
