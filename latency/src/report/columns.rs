//! Which columns label the rows, which row is the baseline, and the ratio against it.

use crate::record::{Row, COLUMNS};
use crate::{Error, Result};

use super::table::clean;
use super::{Entry, Metric, CONFIG_COLUMNS, SOURCE_COLUMN};

/// Longest candidate list an error message prints before summarising the rest.
const MAX_CANDIDATES: usize = 30;

/// The [`CONFIG_COLUMNS`] whose values are not the same in every row, in that order.
pub fn differing_columns(rows: &[Row]) -> Vec<&'static str> {
    differing(rows.iter())
}

pub(super) fn differing<'a>(rows: impl Iterator<Item = &'a Row> + Clone) -> Vec<&'static str> {
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

pub(super) fn known_column(name: &str) -> Option<&'static str> {
    if name == SOURCE_COLUMN {
        return Some(SOURCE_COLUMN);
    }
    COLUMNS.iter().find(|c| **c == name).copied()
}

pub(super) fn unknown_column(name: &str) -> Error {
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
