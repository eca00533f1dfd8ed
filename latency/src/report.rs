//! `qfwd-latency report A.csv [B.csv ...]`: summary CSVs side by side, and SVG plots.
//!
//! One table line per CSV row, in file order, labelled by the configuration columns whose
//! values differ between rows (the identical ones say nothing about the comparison), then
//! the measured columns (latencies in µs) and a ratio against a baseline row.
//! `--markdown` writes the same table as a GitHub pipe table; `--svg DIR` draws the
//! percentile distribution (`percentiles.svg`) and latency against offered rate
//! (`latency-vs-rate.svg`, [`crate::plot`]). `--where COL=VALUE` keeps only the rows that
//! match.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::record::{self, Row, COLUMNS};
use crate::{Error, Result};

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

/// Longest candidate list an error message prints before summarising the rest.
const MAX_CANDIDATES: usize = 30;

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

/// The [`CONFIG_COLUMNS`] whose values are not the same in every row, in that order.
pub fn differing_columns(rows: &[Row]) -> Vec<&'static str> {
    differing(rows.iter())
}

fn differing<'a>(rows: impl Iterator<Item = &'a Row> + Clone) -> Vec<&'static str> {
    CONFIG_COLUMNS
        .iter()
        .copied()
        .filter(|c| {
            let mut values = rows.clone().map(|r| r.get(c));
            match values.next() {
                Some(first) => values.any(|v| v != first),
                None => false,
            }
        })
        .collect()
}

/// Default label columns: the differing configuration columns, preceded by the source CSV
/// when several files are compared and the configuration alone would give two rows the
/// same label (the same sweep run before and after a change, say).
pub fn label_columns(entries: &[Entry]) -> Vec<&'static str> {
    let mut columns = differing(entries.iter().map(|e| &e.row));
    let several_sources = entries.windows(2).any(|w| w[0].source != w[1].source);
    if several_sources && !labels_unique(entries, &columns) {
        columns.insert(0, SOURCE_COLUMN);
    }
    columns
}

fn labels_unique(entries: &[Entry], columns: &[&str]) -> bool {
    let mut labels: Vec<String> = entries.iter().map(|e| label(e, columns)).collect();
    labels.sort();
    labels.windows(2).all(|w| w[0] != w[1])
}

/// Validates `--columns` names against the CSV columns (plus [`SOURCE_COLUMN`]).
pub fn parse_columns(names: &[String]) -> Result<Vec<&'static str>> {
    let mut out = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        let column = known_column(name).ok_or_else(|| unknown_column(name))?;
        if !out.contains(&column) {
            out.push(column);
        }
    }
    Ok(out)
}

fn known_column(name: &str) -> Option<&'static str> {
    if name == SOURCE_COLUMN {
        return Some(SOURCE_COLUMN);
    }
    COLUMNS.iter().find(|c| **c == name).copied()
}

fn unknown_column(name: &str) -> Error {
    Error::Report(format!(
        "unknown column `{name}`; known columns: {SOURCE_COLUMN}, {}",
        COLUMNS.join(", ")
    ))
}

/// `col=value, col=value` for the given columns (empty when there are none), on one line.
pub fn label(entry: &Entry, columns: &[&str]) -> String {
    let text = columns
        .iter()
        .map(|c| format!("{c}={}", entry.value(c).unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(", ");
    clean(text)
}

/// Index of the baseline row: `None` is the first row; a number is the 1-based table row;
/// `col=value[,col=value...]` must match exactly one row. Errors list the candidates;
/// `columns` are the label columns shown for them.
pub fn resolve_baseline(entries: &[Entry], spec: Option<&str>, columns: &[&str]) -> Result<usize> {
    let n = entries.len();
    if n == 0 {
        return Err(Error::Report("no rows to pick a baseline from".into()));
    }
    let Some(spec) = spec.map(str::trim) else {
        return Ok(0);
    };
    if let Ok(number) = spec.parse::<usize>() {
        return if (1..=n).contains(&number) {
            Ok(number - 1)
        } else {
            Err(Error::Report(format!(
                "baseline row {number} does not exist: the table has rows 1 to {n}"
            )))
        };
    }
    if !spec.contains('=') {
        return Err(Error::Report(format!(
            "baseline `{spec}`: expected a row number (1 to {n}) or col=value[,col=value...]"
        )));
    }
    let mut conditions: Vec<(&'static str, &str)> = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (column, value) = part.split_once('=').ok_or_else(|| {
            Error::Report(format!("baseline `{spec}`: `{part}` is not col=value"))
        })?;
        let column = known_column(column.trim()).ok_or_else(|| unknown_column(column.trim()))?;
        conditions.push((column, value.trim()));
    }
    let matches: Vec<usize> = (0..n)
        .filter(|&i| {
            conditions
                .iter()
                .all(|(c, v)| entries[i].value(c).as_deref() == Some(*v))
        })
        .collect();
    let spec_columns: Vec<&str> = conditions.iter().map(|(c, _)| *c).collect();
    match matches.as_slice() {
        [one] => Ok(*one),
        [] => Err(Error::Report(format!(
            "baseline `{spec}` matches no row; the rows have:\n{}",
            candidates(entries, 0..n, &spec_columns)
        ))),
        many => {
            // Show what tells the matches apart, so the user can narrow the spec.
            let mut shown = spec_columns.clone();
            shown.extend(columns.iter().filter(|c| !spec_columns.contains(c)));
            Err(Error::Report(format!(
                "baseline `{spec}` matches {} rows; add col=value pairs or give a row number:\n{}",
                many.len(),
                candidates(entries, many.iter().copied(), &shown)
            )))
        }
    }
}

fn candidates(entries: &[Entry], rows: impl Iterator<Item = usize>, columns: &[&str]) -> String {
    let rows: Vec<usize> = rows.collect();
    let mut lines: Vec<String> = rows
        .iter()
        .take(MAX_CANDIDATES)
        .map(|&i| format!("  #{}  {}", i + 1, label(&entries[i], columns)))
        .collect();
    if rows.len() > MAX_CANDIDATES {
        lines.push(format!("  ... and {} more", rows.len() - MAX_CANDIDATES));
    }
    lines.join("\n")
}

/// `row`'s metric divided by the baseline's; `None` when either has no samples or the
/// baseline's value is zero (a ratio would be meaningless).
pub fn ratio(row: &Row, baseline: &Row, metric: Metric) -> Option<f64> {
    if row.samples == 0 || baseline.samples == 0 {
        return None;
    }
    let base = metric.value_ns(baseline);
    if base == 0 {
        return None;
    }
    Some(metric.value_ns(row) as f64 / base as f64)
}

/// Everything a report shows: the rows, the label columns, the baseline and the metric.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub entries: Vec<Entry>,
    /// Label/grouping columns, in display order.
    pub columns: Vec<&'static str>,
    /// Index into `entries`.
    pub baseline: usize,
    pub metric: Metric,
}

impl Comparison {
    /// Picks the label columns (`columns` overrides the differing ones) and the baseline.
    pub fn new(
        entries: Vec<Entry>,
        columns: Option<&[String]>,
        baseline: Option<&str>,
        metric: Metric,
    ) -> Result<Self> {
        if entries.is_empty() {
            return Err(Error::Report("no rows to report".into()));
        }
        let columns = match columns {
            Some(names) => parse_columns(names)?,
            None => label_columns(&entries),
        };
        let baseline = resolve_baseline(&entries, baseline, &columns)?;
        Ok(Self {
            entries,
            columns,
            baseline,
            metric,
        })
    }

    /// The label of row `i` (0-based); `#N` when no column tells the rows apart.
    pub fn label(&self, i: usize) -> String {
        match self.entries.get(i) {
            Some(e) => {
                let l = label(e, &self.columns);
                if l.is_empty() {
                    format!("#{}", i + 1)
                } else {
                    l
                }
            }
            None => format!("#{}", i + 1),
        }
    }

    /// The source CSVs, each once, in order.
    pub fn sources(&self) -> Vec<&Path> {
        sources(&self.entries)
    }

    /// Name of the ratio column.
    pub fn ratio_header(&self) -> String {
        format!("x{}", self.metric.name())
    }

    fn caption(&self) -> String {
        let m = self.metric.name();
        format!(
            "baseline: row {} ({}), marked *; {} = {m} / baseline {m}; latencies in µs",
            self.baseline + 1,
            self.label(self.baseline),
            self.ratio_header()
        )
    }
}

/// Cells of a table, shared by the terminal and Markdown renderers (and the spread
/// table, [`crate::spread`]).
pub(crate) struct Table {
    pub(crate) headers: Vec<String>,
    /// Right-aligned (numbers) or left-aligned (text), per column.
    pub(crate) numeric: Vec<bool>,
    pub(crate) rows: Vec<Vec<String>>,
}

const MEASURED_COUNTS: &[&str] = &[
    "achieved_rate_hz",
    "samples",
    "errors",
    "dropped",
    "timeouts",
    "stalled",
    "fwd stalled",
];
const LATENCY_HEADERS: &[&str] = &[
    "min µs",
    "p50 µs",
    "p90 µs",
    "p99 µs",
    "p99.9 µs",
    "max µs",
    "fwd p50 µs",
];

fn micros(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

/// Keeps one table line per row whatever the CSV held.
pub(crate) fn clean(cell: String) -> String {
    if cell.chars().any(char::is_control) {
        cell.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    } else {
        cell
    }
}

fn build_table(c: &Comparison) -> Table {
    let mut headers: Vec<String> = vec!["#".into()];
    headers.extend(c.columns.iter().map(|s| s.to_string()));
    headers.extend(MEASURED_COUNTS.iter().map(|s| s.to_string()));
    headers.extend(LATENCY_HEADERS.iter().map(|s| s.to_string()));
    headers.push(c.ratio_header());

    let base = &c.entries[c.baseline].row;
    let rows: Vec<Vec<String>> = c
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let r = &e.row;
            let mark = if i == c.baseline { "*" } else { "" };
            let mut cells = vec![format!("{}{mark}", i + 1)];
            cells.extend(
                c.columns
                    .iter()
                    .map(|col| clean(e.value(col).unwrap_or_default())),
            );
            cells.extend(
                [
                    r.achieved_rate_hz,
                    r.samples,
                    r.errors,
                    r.dropped,
                    r.timeouts,
                ]
                .iter()
                .map(u64::to_string),
            );
            // Both empty in files written before the emulator and the forwarder counted
            // their stalls.
            for n in [r.stalled_samples, r.forwarder_stalled_requests] {
                cells.push(n.map_or_else(|| "-".into(), |n| n.to_string()));
            }
            let lat = [r.min_ns, r.p50_ns, r.p90_ns, r.p99_ns, r.p99_9_ns, r.max_ns];
            cells.extend(lat.iter().map(|&ns| {
                if r.samples == 0 {
                    "-".to_string()
                } else {
                    micros(ns)
                }
            }));
            // The forwarder's own share of the p50 (empty in older files and where the
            // harness did not start the forwarder).
            cells.push(r.forwarder_p50_ns.map_or_else(|| "-".into(), micros));
            cells.push(match ratio(r, base, c.metric) {
                Some(x) => format!("{x:.2}"),
                None => "-".into(),
            });
            cells
        })
        .collect();

    let label_numeric = (1..=c.columns.len()).map(|col| {
        rows.iter()
            .all(|r| !r[col].is_empty() && r[col].parse::<f64>().is_ok())
    });
    let mut numeric = vec![false];
    numeric.extend(label_numeric);
    numeric.resize(headers.len(), true); // the measured columns
    Table {
        headers,
        numeric,
        rows,
    }
}

fn pad(s: &str, width: usize, right: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(s.chars().count()));
    if right {
        format!("{fill}{s}")
    } else {
        format!("{s}{fill}")
    }
}

/// The terminal table: a caption, aligned columns, one line per row.
pub fn render_table(c: &Comparison) -> String {
    render_text(&c.caption(), &build_table(c))
}

/// `caption`, then `t` in aligned columns under a rule.
pub(crate) fn render_text(caption: &str, t: &Table) -> String {
    let widths: Vec<usize> = (0..t.headers.len())
        .map(|j| {
            t.rows
                .iter()
                .map(|r| r[j].chars().count())
                .chain(std::iter::once(t.headers[j].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .map(|(j, s)| pad(s, widths[j], t.numeric[j]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = String::new();
    out.push_str(caption);
    out.push('\n');
    out.push_str(&line(&t.headers));
    out.push('\n');
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&rule.join("  "));
    out.push('\n');
    for r in &t.rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}

pub(crate) fn md_cell(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('*', "\\*")
}

/// The table as Markdown: a line naming the baseline, the metric and the sources, a blank
/// line, then a GitHub pipe table with one line per row.
pub fn render_markdown(c: &Comparison) -> String {
    let t = build_table(c);
    let m = c.metric.name();
    let sources = c
        .sources()
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect::<Vec<_>>()
        .join(", ");
    let caption = format!(
        "Baseline: row {} ({}) · metric: {m} ({} = {m} / baseline {m}) · latencies in µs · sources: {sources}",
        c.baseline + 1,
        md_cell(&c.label(c.baseline)),
        c.ratio_header()
    );
    render_md(&caption, &t)
}

/// `caption`, a blank line, then `t` as a GitHub pipe table.
pub(crate) fn render_md(caption: &str, t: &Table) -> String {
    let mut out = format!("{caption}\n\n");
    let row_line = |cells: &[String]| {
        let inner: Vec<String> = cells.iter().map(|s| md_cell(s)).collect();
        format!("| {} |\n", inner.join(" | "))
    };
    out.push_str(&row_line(&t.headers));
    let sep: Vec<&str> = t
        .numeric
        .iter()
        .map(|&n| if n { "---:" } else { "---" })
        .collect();
    out.push_str(&format!("|{}|\n", sep.join("|")));
    for r in &t.rows {
        out.push_str(&row_line(r));
    }
    out
}

/// Per open-loop group: the highest offered rate answered with nothing lost, late or
/// wrong, and its p99 (the capacity figure a lab engineer asks for first).
pub fn clean_rate_summary(c: &Comparison) -> Vec<String> {
    let group_columns: Vec<&str> = c
        .columns
        .iter()
        .copied()
        .filter(|col| *col != "offered_rate_hz")
        .collect();
    let mut groups: Vec<(String, Vec<&Row>)> = Vec::new();
    for e in &c.entries {
        let r = &e.row;
        if r.mode != "open-loop" || r.offered_rate_hz == 0 {
            continue;
        }
        let mut name = label(e, &group_columns);
        if name.is_empty() {
            name = "open-loop".into();
        }
        match groups.iter_mut().find(|g| g.0 == name) {
            Some(g) => g.1.push(r),
            None => groups.push((name, vec![r])),
        }
    }
    groups
        .into_iter()
        .filter(|(_, rows)| rows.len() > 1)
        .map(|(name, mut rows)| {
            rows.sort_by_key(|r| r.offered_rate_hz);
            let clean = |r: &Row| r.samples > 0 && r.errors == 0 && r.dropped == 0 && r.timeouts == 0;
            let best = rows.iter().filter(|r| clean(r)).max_by_key(|r| r.offered_rate_hz);
            let first_bad = rows.iter().find(|r| !clean(r));
            let mut line = match best {
                Some(r) => format!(
                    "{name}: highest offered rate with no lost request {} req/s (achieved {}, p99 {:.2} µs)",
                    r.offered_rate_hz,
                    r.achieved_rate_hz,
                    r.p99_ns as f64 / 1000.0
                ),
                None => format!("{name}: every offered rate lost requests"),
            };
            if let Some(r) = first_bad {
                line.push_str(&format!(
                    "; first with losses or errors: {} req/s ({} lost, {} errors, {} late)",
                    r.offered_rate_hz, r.dropped, r.errors, r.timeouts
                ));
            }
            line
        })
        .collect()
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
pub(crate) mod tests {
    use super::*;
    use hdrhistogram::Histogram;
    use record::CsvSink;

    /// A complete, plausible row; p50 drives the other percentiles.
    pub(crate) fn row(transport: &str, pollers: u32, p50_ns: u64) -> Row {
        Row {
            run_id: format!("{transport}-{pollers}-{p50_ns}"),
            scenario: "echo".into(),
            topology: "loopback".into(),
            transport: transport.into(),
            rx_completion: "poll".into(),
            doorbell: "none".into(),
            pollers,
            decoder: "echo".into(),
            payload_bytes: 32,
            mode: "ping-pong".into(),
            offered_rate_hz: 0,
            achieved_rate_hz: 100_000,
            warmup: 100,
            samples: 1000,
            errors: 0,
            dropped: 0,
            timeouts: 0,
            min_ns: p50_ns / 2,
            p50_ns,
            p90_ns: p50_ns * 2,
            p99_ns: p50_ns * 3,
            p99_9_ns: p50_ns * 4,
            p99_99_ns: p50_ns * 5,
            max_ns: p50_ns * 10,
            mean_ns: p50_ns + 100,
            stdev_ns: 10,
            rtt_or_oneway: "rtt".into(),
            clock: "tsc".into(),
            cpu: "EPYC 9654".into(),
            gpu: "H200".into(),
            nic: "ConnectX-7".into(),
            pcie_path: "PIX".into(),
            host: "lab1".into(),
            git_rev: format!("rev{p50_ns}"),
            timestamp_utc: format!("2026-01-01T00:00:{:02}Z", pollers % 60),
            spectrum: String::new(),
            ..Row::default()
        }
    }

    pub(crate) fn entries(source: &str, rows: Vec<Row>) -> Vec<Entry> {
        rows.into_iter()
            .map(|row| Entry {
                source: PathBuf::from(source),
                row,
            })
            .collect()
    }

    /// udp/1 at 2 µs, rdma/1 at 3 µs, rdma/2 at 1 µs.
    fn three() -> Vec<Entry> {
        entries(
            "a.csv",
            vec![
                row("udp", 1, 2000),
                row("rdma", 1, 3000),
                row("rdma", 2, 1000),
            ],
        )
    }

    fn report_err(r: Result<usize>) -> String {
        match r {
            Err(Error::Report(msg)) => msg,
            other => panic!("expected Error::Report, got {other:?}"),
        }
    }

    pub(crate) fn histogram(base_ns: u64) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 0..1000u64 {
            h.record(base_ns + v * 10).unwrap();
        }
        h
    }

    /// Writes `rows` to `dir/name` with CsvSink, and for every row whose `spectrum` is set
    /// an .hgrm at that path relative to the CSV.
    pub(crate) fn write_csv(dir: &Path, name: &str, rows: &[Row]) -> PathBuf {
        let path = dir.join(name);
        let mut sink = CsvSink::create(&path).unwrap();
        for r in rows {
            sink.write(r).unwrap();
            if !r.spectrum.is_empty() {
                let hgrm = path.parent().unwrap().join(&r.spectrum);
                std::fs::create_dir_all(hgrm.parent().unwrap()).unwrap();
                record::write_hgrm(&hgrm, &histogram(r.p50_ns)).unwrap();
            }
        }
        path
    }

    /// Whether the SVG has a `<text>` element reading exactly `t` (plotters' layout).
    pub(crate) fn has_text(svg: &str, t: &str) -> bool {
        svg.contains(&format!(">\n{t}\n</text>"))
    }

    fn args(csvs: Vec<PathBuf>) -> ReportArgs {
        ReportArgs {
            csvs,
            baseline: None,
            metric: Metric::P50,
            markdown: None,
            svg: None,
            columns: None,
            spread: false,
            p99_target_us: None,
            where_: Vec::new(),
        }
    }

    #[test]
    fn clean_rate_summary_finds_the_highest_rate_without_loss() {
        let mut rows = Vec::new();
        for (rate, lost) in [(1000u64, 0u64), (2000, 0), (4000, 7), (3000, 0)] {
            let mut r = row("udp", 0, 5_000);
            r.mode = "open-loop".into();
            r.offered_rate_hz = rate;
            r.achieved_rate_hz = rate;
            r.dropped = lost;
            rows.push(r);
        }
        let entries = rows
            .into_iter()
            .map(|row| Entry {
                source: PathBuf::from("a.csv"),
                row,
            })
            .collect();
        let c = Comparison::new(entries, None, None, Metric::P50).unwrap();
        let lines = clean_rate_summary(&c);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("no lost request 3000 req/s"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("first with losses or errors: 4000 req/s (7 lost"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn differing_columns_are_the_config_columns_that_vary() {
        let rows: Vec<Row> = three().into_iter().map(|e| e.row).collect();
        // run_id, git_rev and timestamp_utc differ too, but are not configuration.
        assert_eq!(differing_columns(&rows), vec!["transport", "pollers"]);

        let mut other_host = rows.clone();
        other_host[2].host = "lab2".into();
        other_host[2].pcie_path = "SYS".into();
        assert_eq!(
            differing_columns(&other_host),
            vec!["transport", "pollers", "pcie_path", "host"]
        );

        assert!(differing_columns(&rows[..1]).is_empty());
        assert!(differing_columns(&[]).is_empty());
    }

    #[test]
    fn source_csv_labels_rows_only_when_configs_collide() {
        let mut es = entries(
            "before.csv",
            vec![row("udp", 1, 2000), row("rdma", 1, 3000)],
        );
        es.extend(entries(
            "after.csv",
            vec![row("udp", 1, 1500), row("rdma", 1, 2500)],
        ));
        assert_eq!(label_columns(&es), vec![SOURCE_COLUMN, "transport"]);
        assert_eq!(
            label(&es[2], &label_columns(&es)),
            "csv=after.csv, transport=udp"
        );

        let mut distinct = entries("a.csv", vec![row("udp", 1, 2000)]);
        distinct.extend(entries("b.csv", vec![row("rdma", 1, 3000)]));
        assert_eq!(label_columns(&distinct), vec!["transport"]);
    }

    #[test]
    fn ratios_divide_by_the_baseline_metric() {
        let c = Comparison::new(three(), None, None, Metric::P50).unwrap();
        let base = &c.entries[0].row;
        let ratios: Vec<Option<f64>> = c
            .entries
            .iter()
            .map(|e| ratio(&e.row, base, Metric::P50))
            .collect();
        assert_eq!(ratios, vec![Some(1.0), Some(1.5), Some(0.5)]);
        // mean = p50 + 100: (3100 / 1100)
        let mean = ratio(&c.entries[1].row, &c.entries[2].row, Metric::Mean).unwrap();
        assert!((mean - 3100.0 / 1100.0).abs() < 1e-12, "{mean}");

        let mut es = three();
        es[0].row.forwarder_p50_ns = Some(700);
        let c = Comparison::new(es, None, Some("3"), Metric::P999).unwrap();
        let table = render_table(&c);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[0].contains("baseline: row 3 (transport=rdma, pollers=2)"),
            "{table}"
        );
        assert!(lines[1].trim_end().ends_with("xp99_9"), "{table}");
        let cells: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(
            cells,
            vec![
                "1", "udp", "1", "100000", "1000", "0", "0", "0", "-", "-", "1.00", "2.00", "4.00",
                "6.00", "8.00", "20.00", "0.70", "2.00"
            ]
        );
        assert_eq!(lines[5].split_whitespace().next(), Some("3*"));
        assert_eq!(lines[5].split_whitespace().last(), Some("1.00"));
        assert_eq!(lines[4].split_whitespace().last(), Some("3.00"));
    }

    #[test]
    fn rows_without_samples_show_dashes() {
        let mut es = three();
        es[1].row.samples = 0;
        es[2].row.stalled_samples = Some(7);
        es[2].row.forwarder_stalled_requests = Some(3);
        let table = render_table(&Comparison::new(es.clone(), None, None, Metric::P50).unwrap());
        let cells: Vec<&str> = table.lines().nth(4).unwrap().split_whitespace().collect();
        // The stall counts are `-` where the file had none, numbers where it had them.
        assert_eq!(
            &cells[4..],
            &["0", "0", "0", "0", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"]
        );
        let cells: Vec<&str> = table.lines().nth(5).unwrap().split_whitespace().collect();
        assert_eq!(cells[8..10], ["7", "3"], "{table}");

        // A baseline without samples leaves every ratio undefined.
        let table = render_table(&Comparison::new(es, None, Some("2"), Metric::P50).unwrap());
        for line in table.lines().skip(3) {
            assert_eq!(line.split_whitespace().last(), Some("-"), "{line}");
        }
    }

    #[test]
    fn baseline_by_number_or_by_columns() {
        let es = three();
        let cols = label_columns(&es);
        assert_eq!(resolve_baseline(&es, None, &cols).unwrap(), 0);
        assert_eq!(resolve_baseline(&es, Some(" 2 "), &cols).unwrap(), 1);
        assert_eq!(
            resolve_baseline(&es, Some("transport=udp"), &cols).unwrap(),
            0
        );
        assert_eq!(
            resolve_baseline(&es, Some("transport=rdma,pollers=2"), &cols).unwrap(),
            2
        );
        assert_eq!(
            resolve_baseline(&es, Some("p50_ns=3000"), &cols).unwrap(),
            1
        );
        assert_eq!(
            resolve_baseline(&es, Some("csv=a.csv,pollers=2"), &cols).unwrap(),
            2
        );
    }

    #[test]
    fn baseline_errors_list_the_candidates() {
        let es = three();
        let cols = label_columns(&es);

        let none = report_err(resolve_baseline(&es, Some("transport=tcp"), &cols));
        assert!(none.contains("matches no row"), "{none}");
        for want in [
            "#1  transport=udp",
            "#2  transport=rdma",
            "#3  transport=rdma",
        ] {
            assert!(none.contains(want), "{none}");
        }

        let many = report_err(resolve_baseline(&es, Some("transport=rdma"), &cols));
        assert!(many.contains("matches 2 rows"), "{many}");
        assert!(many.contains("#2  transport=rdma, pollers=1"), "{many}");
        assert!(many.contains("#3  transport=rdma, pollers=2"), "{many}");
        assert!(!many.contains("#1"), "{many}");

        let unknown = report_err(resolve_baseline(&es, Some("transprt=udp"), &cols));
        assert!(unknown.contains("unknown column `transprt`"), "{unknown}");

        for bad in ["0", "4"] {
            let msg = report_err(resolve_baseline(&es, Some(bad), &cols));
            assert!(msg.contains("rows 1 to 3"), "{msg}");
        }
        let msg = report_err(resolve_baseline(&es, Some("udp"), &cols));
        assert!(msg.contains("expected a row number"), "{msg}");
        let msg = report_err(resolve_baseline(&es, Some("transport=udp,rdma"), &cols));
        assert!(msg.contains("`rdma` is not col=value"), "{msg}");
    }

    #[test]
    fn unknown_label_column_is_an_error() {
        let cols = vec!["transport".to_string(), "colour".to_string()];
        match Comparison::new(three(), Some(&cols), None, Metric::P50) {
            Err(Error::Report(msg)) => {
                assert!(msg.contains("unknown column `colour`"), "{msg}");
                assert!(msg.contains("pcie_path"), "{msg}");
            }
            other => panic!("expected an unknown-column error, got {other:?}"),
        }
        let cols = vec![" host".to_string(), String::new(), "csv".to_string()];
        assert_eq!(parse_columns(&cols).unwrap(), vec!["host", SOURCE_COLUMN]);
    }

    #[test]
    fn terminal_columns_are_aligned() {
        let mut es = three();
        es[0].row.achieved_rate_hz = 5; // a short number among long ones
        let table = render_table(&Comparison::new(es, None, None, Metric::P50).unwrap());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3 + 3, "{table}");
        let width = lines[1].chars().count();
        for line in &lines[1..] {
            assert_eq!(line.chars().count(), width, "{table}");
        }
        // Right-aligned numbers: the p50 column ends where its header ends.
        let end = |line: &str, needle: &str| {
            line.find(needle)
                .map(|i| line[..i].chars().count() + needle.chars().count())
        };
        let header_end = end(lines[1], "p50 µs").unwrap();
        assert_eq!(end(lines[3], "  2.00"), Some(header_end), "{table}");
        assert_eq!(end(lines[4], "  3.00"), Some(header_end), "{table}");
    }

    #[test]
    fn markdown_is_a_pipe_table_with_one_line_per_row() {
        let mut es = entries("a.csv", vec![row("udp", 1, 2000)]);
        es.extend(entries(
            "b.csv",
            vec![row("rdma", 1, 3000), row("x|y", 2, 1000)],
        ));
        let c = Comparison::new(es, None, Some("2"), Metric::P99).unwrap();
        let md = render_markdown(&c);
        let lines: Vec<&str> = md.lines().collect();
        assert!(
            lines[0].starts_with("Baseline: row 2 (transport=rdma, pollers=1)"),
            "{md}"
        );
        assert!(lines[0].contains("metric: p99"), "{md}");
        assert!(lines[0].contains("sources: `a.csv`, `b.csv`"), "{md}");
        assert_eq!(lines[1], "");
        assert!(
            lines[2].starts_with("| # | transport | pollers | achieved_rate_hz |"),
            "{md}"
        );
        assert!(lines[2].ends_with("| max µs | fwd p50 µs | xp99 |"), "{md}");
        let unescaped = |l: &str| l.matches('|').count() - l.matches("\\|").count();
        let columns = unescaped(lines[2]) - 1;
        let sep: Vec<&str> = lines[3].trim_matches('|').split('|').collect();
        assert_eq!(sep.len(), columns);
        assert_eq!(&sep[..3], &["---", "---", "---:"]);
        assert!(sep[3..].iter().all(|s| *s == "---:"), "{md}");
        assert_eq!(lines.len(), 4 + 3, "{md}");
        for l in &lines[2..] {
            assert_eq!(unescaped(l), columns + 1, "{l}");
        }
        assert!(lines[5].starts_with("| 2\\* | rdma | 1 |"), "{md}");
        assert!(lines[6].starts_with("| 3 | x\\|y | 2 |"), "{md}");
        assert!(lines[6].ends_with("| 0.33 |"), "{md}");
    }

    #[test]
    fn where_keeps_the_matching_rows_and_explains_an_empty_match() {
        let kept = select(three(), &["transport=rdma".into(), "pollers=2".into()]).unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].row.p50_ns, 1000);
        assert_eq!(select(three(), &[]).unwrap().len(), 3);
        let err = select(three(), &["transport=tcp".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("transport is one of rdma, udp"), "{err}");
        let err = select(three(), &["nope=1".into()]).unwrap_err().to_string();
        assert!(err.contains("unknown column `nope`"), "{err}");
        let err = select(three(), &["transport".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected COL=VALUE"), "{err}");
    }

    #[test]
    fn missing_and_foreign_csvs_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.csv");
        let err = load(&[missing]).unwrap_err().to_string();
        assert!(err.contains("nope.csv"), "{err}");

        let foreign = dir.path().join("foreign.csv");
        std::fs::write(&foreign, "a,b\n1,2\n").unwrap();
        let err = load(&[foreign]).unwrap_err().to_string();
        assert!(
            err.contains("foreign.csv") && err.contains("not a qfwd summary CSV"),
            "{err}"
        );

        let empty = dir.path().join("empty.csv");
        std::fs::write(&empty, format!("{}\n", COLUMNS.join(","))).unwrap();
        let err = load(&[empty]).unwrap_err().to_string();
        assert!(
            err.contains("no rows in") && err.contains("empty.csv"),
            "{err}"
        );
    }

    #[test]
    fn clap_parses_the_report_arguments() {
        use clap::{Parser, ValueEnum};
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: ReportArgs,
        }
        let cli = Cli::try_parse_from([
            "report",
            "a.csv",
            "b.csv",
            "--baseline",
            "transport=udp,pollers=2",
            "--metric",
            "p99.9",
            "--columns",
            "transport,host",
            "--svg",
            "plots",
            "--markdown",
            "r.md",
        ])
        .unwrap();
        let a = cli.args;
        assert_eq!(a.csvs, vec![PathBuf::from("a.csv"), PathBuf::from("b.csv")]);
        assert_eq!(a.baseline.as_deref(), Some("transport=udp,pollers=2"));
        assert_eq!(a.metric, Metric::P999);
        assert_eq!(a.columns, Some(vec!["transport".into(), "host".into()]));
        assert_eq!(a.svg, Some(PathBuf::from("plots")));
        assert_eq!(a.markdown, Some(PathBuf::from("r.md")));

        let d = Cli::try_parse_from(["report", "a.csv"]).unwrap().args;
        assert_eq!((d.metric, d.baseline, d.columns), (Metric::P50, None, None));
        assert!(Cli::try_parse_from(["report"]).is_err());
        assert!(Cli::try_parse_from(["report", "a.csv", "--metric", "p42"]).is_err());
        let names: Vec<String> = Metric::value_variants()
            .iter()
            .map(|m| m.to_possible_value().unwrap().get_name().to_string())
            .collect();
        assert_eq!(names, ["p50", "p90", "p99", "p99_9", "max", "mean"]);
        assert!(Metric::value_variants()
            .iter()
            .all(|m| m.to_possible_value().unwrap().get_name() == m.name()));
    }

    #[test]
    fn run_prints_the_table_and_writes_markdown_and_svgs() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = row("udp", 1, 2000);
        a.spectrum = "udp.hgrm".into();
        let csv_a = write_csv(dir.path(), "a.csv", &[a]);
        let mut b = row("rdma", 1, 3000);
        b.spectrum = "s/rdma.hgrm".into();
        let csv_b = write_csv(&dir.path().join("other"), "b.csv", &[b]);
        let md = dir.path().join("md/report.md");
        let svg = dir.path().join("svg");
        let mut args = args(vec![csv_a, csv_b]);
        args.baseline = Some("transport=rdma".into());
        args.markdown = Some(md.clone());
        args.svg = Some(svg.clone());

        let mut out = Vec::new();
        run_to(&args, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].contains("baseline: row 2 (transport=rdma)"),
            "{out}"
        );
        assert_eq!(lines[3].split_whitespace().last(), Some("0.67"), "{out}");
        assert_eq!(lines[4].split_whitespace().next(), Some("2*"), "{out}");
        assert!(out.contains(&format!("wrote {}", md.display())), "{out}");
        assert!(out.contains(&format!("wrote {}", svg.join(PERCENTILES_SVG).display())));
        assert!(
            !out.contains(&format!("wrote {}", svg.join(RATE_SVG).display())),
            "closed loop: no rate plot"
        );
        assert!(out.contains("note: no open-loop rows"), "{out}");
        let text = std::fs::read_to_string(&md).unwrap();
        assert_eq!(text.lines().count(), 4 + 2);
        let pct = std::fs::read_to_string(svg.join(PERCENTILES_SVG)).unwrap();
        assert!(pct.contains("transport=udp") && pct.contains("transport=rdma"));

        args.columns = Some(vec!["nope".into()]);
        let err = run_to(&args, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("unknown column `nope`"), "{err}");
    }
}
