//! The comparison and its table: aligned text for the terminal, or Markdown.

use std::path::Path;

use crate::record::Row;
use crate::{Error, Result};

use super::columns::{label, label_columns, parse_columns, ratio, resolve_baseline};
use super::{sources, Entry, Metric};

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

/// The count columns of the table, after the label columns.
pub(crate) const MEASURED_COUNTS: &[&str] = &[
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
