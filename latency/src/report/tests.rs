use hdrhistogram::Histogram;
use record::CsvSink;

use super::*;
use crate::record::COLUMNS;

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
    // The plot's legend reads in words.
    assert!(pct.contains(">\nUDP\n</text>") && pct.contains(">\nRDMA\n</text>"));
    assert!(!pct.contains("transport="));

    args.columns = Some(vec!["nope".into()]);
    let err = run_to(&args, &mut Vec::new()).unwrap_err().to_string();
    assert!(err.contains("unknown column `nope`"), "{err}");
}
