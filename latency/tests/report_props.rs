//! Property tests for `qfwd-latency report`: whatever the CSVs hold, the renderers keep one
//! line per row, aligned terminal columns and a well-formed Markdown table, and never panic.

use std::path::PathBuf;

use proptest::prelude::*;
use qfwd_latency::record::Row;
use qfwd_latency::report::{self, Comparison, Entry, Metric};

fn arb_row() -> impl Strategy<Value = Row> {
    (
        // Text with pipes, stars, backslashes, control characters and non-ASCII.
        "[a-z|*\\\\\t\nµé ]{0,12}",
        0u32..4,
        0u64..3,
        0u64..50_000_000,
        prop::bool::ANY,
    )
        .prop_map(|(transport, pollers, samples, p50, open)| Row {
            transport,
            pollers,
            samples,
            p50_ns: p50,
            p99_ns: p50.saturating_mul(3),
            max_ns: p50.saturating_mul(10),
            mode: if open { "open-loop" } else { "ping-pong" }.into(),
            offered_rate_hz: u64::from(pollers) * 100_000,
            ..Default::default()
        })
}

fn entries(rows: Vec<Row>) -> Vec<Entry> {
    rows.into_iter()
        .enumerate()
        .map(|(i, row)| Entry {
            source: PathBuf::from(format!("run{}.csv", i % 2)),
            row,
        })
        .collect()
}

/// Cell separators as GitHub counts them: a pipe right after a backslash is escaped.
fn unescaped_pipes(line: &str) -> usize {
    line.matches('|').count() - line.matches("\\|").count()
}

proptest! {
    #[test]
    fn tables_keep_their_shape(rows in prop::collection::vec(arb_row(), 1..20), metric in 0usize..6) {
        let metric = [Metric::P50, Metric::P90, Metric::P99, Metric::P999, Metric::Max, Metric::Mean][metric];
        let n = rows.len();
        let c = Comparison::new(entries(rows), None, None, metric).unwrap();

        let table = report::render_table(&c);
        let lines: Vec<&str> = table.lines().collect();
        prop_assert_eq!(lines.len(), 3 + n);
        let width = lines[2].chars().count();
        for l in &lines[1..] {
            prop_assert_eq!(l.chars().count(), width, "{}", table);
        }
        prop_assert!(lines[3].starts_with("1*"));

        let md = report::render_markdown(&c);
        let lines: Vec<&str> = md.lines().collect();
        prop_assert_eq!(lines.len(), 4 + n);
        let pipes = unescaped_pipes(lines[2]);
        for l in &lines[2..] {
            prop_assert_eq!(unescaped_pipes(l), pipes, "{}", md);
        }
    }

    #[test]
    fn the_baseline_ratio_is_one_or_undefined(rows in prop::collection::vec(arb_row(), 1..10), pick in 0usize..10) {
        let n = rows.len();
        let pick = pick % n;
        let spec = (pick + 1).to_string();
        let c = Comparison::new(entries(rows), None, Some(&spec), Metric::P50).unwrap();
        prop_assert_eq!(c.baseline, pick);
        let base = &c.entries[pick].row;
        match report::ratio(base, base, Metric::P50) {
            Some(r) => prop_assert_eq!(r, 1.0),
            None => prop_assert!(base.samples == 0 || base.p50_ns == 0),
        }
    }
}
