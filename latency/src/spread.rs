//! `qfwd-latency report --spread`: one line per configuration measured several times
//! (the same scenario swept again, on another day or another host), with the runs' lowest,
//! median and highest p50 and p99, instead of one line per row.
//!
//! A p99 from one sweep is 200 samples out of 20 000, taken in a tenth of a second: the
//! host's state in that moment moves it by more than most changes to the code (see
//! `results/h200-decoders-spread/`: 10.5-15.9 µs for one configuration over 19 sweeps on
//! three machines). A target is met when it holds over the runs, and this table says in
//! how many.
//!
//! Rows belong to one configuration when every column of the key agrees: by default the
//! configuration columns ([`crate::report::CONFIG_COLUMNS`]) without the ones that only say
//! where a row was measured (`cpu`, `gpu`, `nic`, `pcie_path`, `host`), so runs on two
//! machines of the same kind count together; `--columns` sets the key instead.
#![forbid(unsafe_code)]

use crate::report::{self, Entry, Table, CONFIG_COLUMNS};
use crate::Result;

/// A per-run figure that older files may lack, and how its median is shown.
type Pick = fn(&Entry) -> Option<u64>;
type Show = fn(f64) -> String;

/// Configuration columns that name the machine, not the configuration.
const PROVENANCE_COLUMNS: &[&str] = &["cpu", "gpu", "nic", "pcie_path", "host"];

/// The default key: [`CONFIG_COLUMNS`] without the machine's (`cpu`, `gpu`, `nic`, `pcie_path`,
/// `host`).
pub fn default_key() -> Vec<&'static str> {
    CONFIG_COLUMNS
        .iter()
        .copied()
        .filter(|c| !PROVENANCE_COLUMNS.contains(c))
        .collect()
}

/// One configuration and the rows measured for it, in file order.
#[derive(Debug, Clone)]
pub struct Group<'a> {
    pub key: Vec<String>,
    pub rows: Vec<&'a Entry>,
}

/// Rows grouped by their values in `key`, groups in order of first appearance.
pub fn group<'a>(entries: &'a [Entry], key: &[&str]) -> Vec<Group<'a>> {
    let mut groups: Vec<Group<'a>> = Vec::new();
    for e in entries {
        let k: Vec<String> = key.iter().map(|c| e.value(c).unwrap_or_default()).collect();
        match groups.iter_mut().find(|g| g.key == k) {
            Some(g) => g.rows.push(e),
            None => groups.push(Group {
                key: k,
                rows: vec![e],
            }),
        }
    }
    groups
}

/// The lowest, median (the mean of the middle two for an even count) and highest value;
/// `None` for no values.
pub fn min_median_max(values: &mut [u64]) -> Option<(u64, f64, u64)> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2] as f64
    } else {
        (values[n / 2 - 1] as f64 + values[n / 2] as f64) / 2.0
    };
    Some((values[0], median, values[n - 1]))
}

/// The spread table's caption and cells; a `p99_target_ns` adds a column counting the runs
/// whose p99 met it.
pub(crate) fn build(
    entries: &[Entry],
    key: &[&str],
    p99_target_ns: Option<u64>,
) -> (String, Table) {
    let groups = group(entries, key);
    let caption = caption(entries, key, groups.len());
    // Label the groups by the key columns that tell them apart.
    let shown: Vec<usize> = (0..key.len())
        .filter(|&j| groups.iter().any(|g| g.key[j] != groups[0].key[j]))
        .collect();
    let mut headers: Vec<String> = vec!["#".into()];
    headers.extend(shown.iter().map(|&j| key[j].to_string()));
    for h in [
        "runs", "unclean", "p50 min", "p50 med", "p50 max", "p99 min", "p99 med", "p99 max",
    ] {
        headers.push(h.into());
    }
    if let Some(t) = p99_target_ns {
        headers.push(format!("p99<={:.2}", t as f64 / 1000.0));
    }
    headers.push("fwd p50 med".into());
    headers.push("stalled med".into());
    headers.push("fwd stalled med".into());
    let us = |ns: f64| format!("{:.2}", ns / 1000.0);
    let rows = groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mut cells = vec![(i + 1).to_string()];
            cells.extend(shown.iter().map(|&j| report::clean(g.key[j].clone())));
            // Rows without samples (a point that failed) are runs, but have no latency.
            let measured: Vec<&Entry> = g
                .rows
                .iter()
                .copied()
                .filter(|e| e.row.samples > 0)
                .collect();
            let unclean = g
                .rows
                .iter()
                .filter(|e| e.row.samples == 0 || e.row.errors > 0 || e.row.dropped > 0)
                .count();
            cells.push(g.rows.len().to_string());
            cells.push(unclean.to_string());
            for pick in [|e: &Entry| e.row.p50_ns, |e: &Entry| e.row.p99_ns] {
                let mut v: Vec<u64> = measured.iter().map(|e| pick(e)).collect();
                match min_median_max(&mut v) {
                    Some((lo, med, hi)) => {
                        cells.extend([us(lo as f64), us(med), us(hi as f64)]);
                    }
                    None => cells.extend(["-".to_string(), "-".into(), "-".into()]),
                }
            }
            if let Some(t) = p99_target_ns {
                let met = measured.iter().filter(|e| e.row.p99_ns <= t).count();
                cells.push(format!("{met}/{}", measured.len()));
            }
            // Only rows that measured these (newer files) say anything here; a median of
            // some of the runs says of how many.
            let medians: [(Pick, Show); 3] = [
                (
                    |e| e.row.forwarder_p50_ns,
                    |ns| format!("{:.2}", ns / 1000.0),
                ),
                (|e| e.row.stalled_samples, |n| format!("{n:.0}")),
                (|e| e.row.forwarder_stalled_requests, |n| format!("{n:.0}")),
            ];
            for (pick, show) in medians {
                let mut v: Vec<u64> = measured.iter().filter_map(|e| pick(e)).collect();
                cells.push(match min_median_max(&mut v) {
                    Some((_, med, _)) if v.len() == measured.len() => show(med),
                    Some((_, med, _)) => {
                        format!("{} ({} of {})", show(med), v.len(), measured.len())
                    }
                    None => "-".into(),
                });
            }
            cells
        })
        .collect();
    let mut numeric = vec![false];
    numeric.extend(shown.iter().map(|_| false));
    numeric.resize(headers.len(), true);
    let table = Table {
        headers,
        numeric,
        rows,
    };
    (caption, table)
}

fn caption(entries: &[Entry], key: &[&str], configurations: usize) -> String {
    let keyed = if key == default_key().as_slice() {
        "the configuration columns (not cpu, gpu, nic, pcie_path, host)".to_string()
    } else {
        key.join(",")
    };
    format!(
        "spread over runs: {} rows from {} file(s) in {configurations} configuration(s), keyed by {keyed}; latencies in µs; unclean = runs with errors, lost requests or no samples",
        entries.len(),
        report::sources(entries).len(),
    )
}

/// The spread table for the terminal.
pub fn render_text(entries: &[Entry], key: &[&str], p99_target_ns: Option<u64>) -> String {
    let (caption, table) = build(entries, key, p99_target_ns);
    report::render_text(&caption, &table)
}

/// The spread table as Markdown.
pub fn render_markdown(entries: &[Entry], key: &[&str], p99_target_ns: Option<u64>) -> String {
    let (caption, table) = build(entries, key, p99_target_ns);
    report::render_md(&report::md_cell(&caption), &table)
}

/// The key `--columns` gives, else [`default_key`].
pub fn key(columns: Option<&[String]>) -> Result<Vec<&'static str>> {
    match columns {
        Some(names) => report::parse_columns(names),
        None => Ok(default_key()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Row;
    use std::path::PathBuf;

    fn entry(file: &str, decoder: &str, host: &str, p50: u64, p99: u64) -> Entry {
        Entry {
            source: PathBuf::from(file),
            row: Row {
                scenario: "s".into(),
                decoder: decoder.into(),
                host: host.into(),
                samples: 100,
                p50_ns: p50,
                p99_ns: p99,
                ..Row::default()
            },
        }
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(min_median_max(&mut []), None);
        assert_eq!(min_median_max(&mut [7]), Some((7, 7.0, 7)));
        assert_eq!(min_median_max(&mut [9, 1, 5]), Some((1, 5.0, 9)));
        assert_eq!(min_median_max(&mut [4, 1, 3, 10]), Some((1, 3.5, 10)));
    }

    #[test]
    fn runs_on_two_hosts_count_as_one_configuration() {
        let es = vec![
            entry("a.csv", "uf", "host-1", 3_000, 9_000),
            entry("a.csv", "lut", "host-1", 2_000, 4_000),
            entry("b.csv", "uf", "host-2", 4_000, 15_000),
            entry("c.csv", "uf", "host-3", 3_500, 11_000),
        ];
        let groups = group(&es, &default_key());
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].rows.len(), 3);
        // Keyed by host as well, each host is its own configuration.
        let mut k = default_key();
        k.push("host");
        assert_eq!(group(&es, &k).len(), 4);

        let text = render_text(&es, &default_key(), Some(10_000));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].contains("4 rows from 3 file(s) in 2 configuration(s)"),
            "{text}"
        );
        // Only the decoder tells the configurations apart, so only it labels them.
        assert!(
            lines[1].contains("decoder") && !lines[1].contains("host"),
            "{text}"
        );
        let uf: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(
            uf,
            [
                "1", "uf", "3", "0", "3.00", "3.50", "4.00", "9.00", "11.00", "15.00", "1/3", "-",
                "-", "-"
            ],
            "{text}"
        );
        let lut: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(&lut[..4], ["2", "lut", "1", "0"], "{text}");
    }

    #[test]
    fn failed_runs_are_unclean_and_stalls_are_told_apart_from_unknown() {
        let mut es = vec![
            entry("a.csv", "uf", "h", 3_000, 9_000),
            entry("a.csv", "uf", "h", 3_000, 9_000),
            entry("a.csv", "uf", "h", 0, 0),
        ];
        es[0].row.stalled_samples = Some(12);
        es[0].row.forwarder_stalled_requests = Some(2);
        es[0].row.forwarder_p50_ns = Some(2_500);
        es[1].row.forwarder_stalled_requests = Some(4);
        es[1].row.errors = 1;
        es[2].row.samples = 0;
        let text = render_text(&es, &default_key(), None);
        let cells: Vec<&str> = text.lines().nth(3).unwrap().split_whitespace().collect();
        // 3 runs, 2 unclean (an error; no samples); latencies from the 2 measured; the
        // forwarder's p50 and the emulator's stalls from the one row that measured them,
        // saying so; the forwarder's stalls from both.
        assert_eq!(&cells[..3], ["1", "3", "2"], "{text}");
        assert_eq!(cells[3], "3.00", "{text}");
        assert_eq!(
            &cells[9..],
            ["2.50", "(1", "of", "2)", "12", "(1", "of", "2)", "3"],
            "{text}"
        );
        let md = render_markdown(&es, &default_key(), None);
        assert!(md.contains("| runs | unclean |"), "{md}");
    }

    #[test]
    fn columns_replace_the_key() {
        let es = vec![
            entry("a.csv", "uf", "h1", 3_000, 9_000),
            entry("b.csv", "uf", "h2", 4_000, 9_500),
        ];
        let k = key(Some(&["csv".to_string()])).unwrap();
        assert_eq!(group(&es, &k).len(), 2);
        assert!(key(Some(&["no_such".to_string()])).is_err());
    }
}
