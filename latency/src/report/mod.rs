//! `qfwd-latency report A.csv [B.csv ...]`: summary CSVs side by side, and SVG plots.
//!
//! One table line per CSV row, in file order, labelled by the configuration columns whose
//! values differ between rows (the identical ones say nothing about the comparison), then
//! the measured columns (latencies in µs) and a ratio against a baseline row.
//! `--markdown` writes the same table as a GitHub pipe table; `--svg DIR` draws the
//! percentile distribution (`percentiles.svg`) and latency against offered rate
//! (`latency-vs-rate.svg`, [`crate::plot`]). `--where COL=VALUE` keeps only the rows that
//! match.
//!
//! `columns` picks the label columns and the baseline; `table` renders the comparison.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::record::{self, Row};
use crate::{Error, Result};

mod columns;
mod table;

pub use columns::{
    differing_columns, label, label_columns, parse_columns, ratio, resolve_baseline,
};
#[cfg(test)]
pub(crate) use table::MEASURED_COUNTS;
pub(crate) use table::{clean, md_cell, render_md, render_text, Table};
pub use table::{clean_rate_summary, render_markdown, render_table, Comparison};

use columns::{known_column, unknown_column};

/// Columns that describe *what* was measured; those that differ between rows label them.
/// `rtt_or_oneway` is among them so a round trip is never compared with a one-way time
/// without the table saying so.
pub const CONFIG_COLUMNS: &[&str] = &[
    "scenario",
    "topology",
    "data_path",
    "links",
    "transport",
    "rx_completion",
    "doorbell",
    "pollers",
    "pollers_per_slot",
    "decoder",
    "payload_bytes",
    "mode",
    "offered_rate_hz",
    "rtt_or_oneway",
    "cpu",
    "gpu",
    "nic",
    "pcie_path",
    "host",
    "gpus",
    "functions",
];

/// Pseudo column: the CSV file a row came from (as given on the command line).
pub const SOURCE_COLUMN: &str = "csv";

pub use crate::plot::{PERCENTILES_SVG, RATE_SVG};

/// Which latency the ratio column compares.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Metric {
    #[default]
    P50,
    P90,
    P99,
    #[value(name = "p99_9", alias = "p99.9")]
    P999,
    Max,
    Mean,
}

impl Metric {
    /// The name used on the command line and in the ratio header (`x<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P90 => "p90",
            Metric::P99 => "p99",
            Metric::P999 => "p99_9",
            Metric::Max => "max",
            Metric::Mean => "mean",
        }
    }

    /// This metric of `row`, in nanoseconds.
    pub fn value_ns(self, row: &Row) -> u64 {
        match self {
            Metric::P50 => row.p50_ns,
            Metric::P90 => row.p90_ns,
            Metric::P99 => row.p99_ns,
            Metric::P999 => row.p99_9_ns,
            Metric::Max => row.max_ns,
            Metric::Mean => row.mean_ns,
        }
    }
}

/// Arguments of `qfwd-latency report`.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "Examples:\n  \
qfwd-latency report results/quickstart.csv\n  \
qfwd-latency report results/cpu-udp-loopback.csv --svg loopback-plots\n  \
qfwd-latency report results/h200-topologies.csv --where mode=ping-pong --svg pp-plots\n  \
qfwd-latency report before.csv after.csv --baseline 1 --metric p99\n\n\
--svg draws percentiles.svg (latency by percentile, one panel per workload, one colour and \
marker per configuration, the same in every panel) and, where a configuration was measured \
at several open-loop rates, latency-vs-rate.svg. Render them as PNG with \
`rsvg-convert FILE.svg -o FILE.png` (Debian: librsvg2-bin).")]
pub struct ReportArgs {
    /// Summary CSVs written by the harness; their rows are shown side by side in file order.
    #[arg(required = true, value_name = "CSV")]
    pub csvs: Vec<PathBuf>,

    /// Baseline row for the ratio column: its 1-based number in the table, or
    /// `col=value[,col=value...]` matching exactly one row [default: the first row].
    #[arg(long, value_name = "SPEC")]
    pub baseline: Option<String>,

    /// Latency compared against the baseline in the `x<metric>` column.
    #[arg(long, value_enum, default_value_t = Metric::P50, value_name = "METRIC")]
    pub metric: Metric,

    /// Also write the table as a GitHub Markdown table to FILE.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Draw `percentiles.svg` and `latency-vs-rate.svg` into DIR (created if missing).
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,

    /// Comma-separated columns that label and group the rows, instead of the configuration
    /// columns that differ (`csv` names the source file); with `--spread`, the columns
    /// whose values make a configuration.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub columns: Option<Vec<String>>,

    /// One line per configuration instead of one per row: how many runs (rows) measured it,
    /// and their lowest, median and highest p50 and p99. For the same scenario swept several
    /// times (give every CSV); rows measured on different hosts count together. No baseline
    /// (the ratio column is not shown).
    #[arg(long, conflicts_with = "baseline")]
    pub spread: bool,

    /// With `--spread`: also count the runs whose p99 is at most this many µs.
    #[arg(long, value_name = "US", requires = "spread")]
    pub p99_target_us: Option<f64>,

    /// Keep only the rows whose column COL reads VALUE; several conditions (repeated, or
    /// joined by commas) must all hold, e.g. `--where payload_bytes=32,mode=ping-pong`.
    #[arg(long = "where", value_name = "COL=VALUE", value_delimiter = ',')]
    pub where_: Vec<String>,
}

/// One CSV row together with the file it came from (spectra are relative to that file).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub source: PathBuf,
    pub row: Row,
}

impl Entry {
    /// Value of a CSV column or of the [`SOURCE_COLUMN`] pseudo column, as text.
    pub fn value(&self, column: &str) -> Option<String> {
        if column == SOURCE_COLUMN {
            Some(self.source.display().to_string())
        } else {
            self.row.get(column)
        }
    }

    /// The row's `.hgrm` path resolved against the CSV's folder; `None` if none was recorded.
    pub fn spectrum_path(&self) -> Option<PathBuf> {
        if self.row.spectrum.trim().is_empty() {
            return None;
        }
        let dir = self.source.parent().unwrap_or_else(|| Path::new(""));
        Some(dir.join(&self.row.spectrum))
    }
}

/// Reads every CSV in order; a missing or foreign file is an error naming it.
pub fn load(csvs: &[PathBuf]) -> Result<Vec<Entry>> {
    if csvs.is_empty() {
        return Err(Error::Report("no CSV given".into()));
    }
    let mut entries = Vec::new();
    for path in csvs {
        let rows = record::read_csv(path)?;
        if rows.is_empty() {
            tracing::warn!("{}: no rows", path.display());
        }
        entries.extend(rows.into_iter().map(|row| Entry {
            source: path.clone(),
            row,
        }));
    }
    if entries.is_empty() {
        return Err(Error::Report(format!("no rows in {}", join_paths(csvs))));
    }
    Ok(entries)
}

/// The CSVs `entries` came from, each once, in order.
pub fn sources(entries: &[Entry]) -> Vec<&Path> {
    let mut out: Vec<&Path> = Vec::new();
    for e in entries {
        if !out.contains(&e.source.as_path()) {
            out.push(&e.source);
        }
    }
    out
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Warns when a ratio would compare a round trip with a one-way time.
fn warn_mixed_kinds(c: &Comparison) {
    let base = &c.entries[c.baseline].row.rtt_or_oneway;
    let mixed: Vec<String> = c
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| &e.row.rtt_or_oneway != base)
        .map(|(i, e)| format!("{} ({})", i + 1, e.row.rtt_or_oneway))
        .collect();
    if !mixed.is_empty() {
        tracing::warn!(
            "the baseline measures {base:?} latency but rows {} do not; their ratios are not like for like",
            mixed.join(", ")
        );
    }
}

/// `qfwd-latency report`: prints the table to stdout, then writes what was asked for.
pub fn run(args: &ReportArgs) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    run_to(args, &mut out)
}

/// The rows that meet every `COL=VALUE` condition; an error names a bad condition, or
/// the values the columns hold when no row meets them all.
pub fn select(entries: Vec<Entry>, conditions: &[String]) -> Result<Vec<Entry>> {
    let mut parsed: Vec<(&'static str, &str)> = Vec::new();
    for cond in conditions
        .iter()
        .map(|c| c.trim())
        .filter(|c| !c.is_empty())
    {
        let (col, value) = cond
            .split_once('=')
            .ok_or_else(|| Error::Report(format!("--where `{cond}`: expected COL=VALUE")))?;
        let col = known_column(col.trim()).ok_or_else(|| unknown_column(col.trim()))?;
        parsed.push((col, value.trim()));
    }
    if parsed.is_empty() {
        return Ok(entries);
    }
    let matches = |e: &Entry| {
        parsed
            .iter()
            .all(|(c, v)| e.value(c).as_deref() == Some(*v))
    };
    if entries.iter().any(matches) {
        return Ok(entries.into_iter().filter(matches).collect());
    }
    let seen: Vec<String> = parsed
        .iter()
        .map(|(c, _)| {
            let mut vs: Vec<String> = entries.iter().filter_map(|e| e.value(c)).collect();
            vs.sort();
            vs.dedup();
            format!("{c} is one of {}", vs.join(", "))
        })
        .collect();
    Err(Error::Report(format!(
        "no row has {}; {}",
        conditions.join(","),
        seen.join("; ")
    )))
}

/// [`run`] with the table (and the list of files written) going to `out`.
pub fn run_to(args: &ReportArgs, out: &mut dyn Write) -> Result<()> {
    let entries = select(load(&args.csvs)?, &args.where_)?;
    let target_ns = match args.p99_target_us {
        Some(us) if !(us.is_finite() && us > 0.0) => {
            return Err(Error::Report(format!(
                "--p99-target-us {us}: expected a positive number of µs"
            )))
        }
        Some(us) => Some((us * 1000.0).round() as u64),
        None => None,
    };
    let spread_key = if args.spread {
        Some(crate::spread::key(args.columns.as_deref())?)
    } else {
        None
    };
    let comparison = Comparison::new(
        entries,
        if args.spread {
            None
        } else {
            args.columns.as_deref()
        },
        args.baseline.as_deref(),
        args.metric,
    )?;
    warn_mixed_kinds(&comparison);
    let out_err = |source| Error::Io {
        path: PathBuf::from("<stdout>"),
        source,
    };
    let table = match &spread_key {
        Some(key) => crate::spread::render_text(&comparison.entries, key, target_ns),
        None => render_table(&comparison),
    };
    out.write_all(table.as_bytes()).map_err(out_err)?;
    if spread_key.is_none() {
        for line in clean_rate_summary(&comparison) {
            writeln!(out, "{line}").map_err(out_err)?;
        }
    }

    if let Some(md) = &args.markdown {
        if let Some(dir) = md.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let text = match &spread_key {
            Some(key) => crate::spread::render_markdown(&comparison.entries, key, target_ns),
            None => render_markdown(&comparison),
        };
        write_file(md, &text)?;
        writeln!(out, "wrote {}", md.display()).map_err(out_err)?;
    }
    if let Some(dir) = &args.svg {
        let plots = crate::plot::write_svgs(&comparison, dir)?;
        for note in &plots.notes {
            writeln!(out, "note: {note}").map_err(out_err)?;
        }
        for path in &plots.written {
            writeln!(out, "wrote {}", path.display()).map_err(out_err)?;
        }
    }
    out.flush().map_err(out_err)
}

#[cfg(test)]
pub(crate) mod tests;
