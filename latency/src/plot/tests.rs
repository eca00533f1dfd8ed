use super::*;
use crate::report::tests::{has_text, row, write_csv};
use crate::report::{load, Metric};

fn comparison(csv: PathBuf) -> Comparison {
    Comparison::new(load(&[csv]).unwrap(), None, None, Metric::P50).unwrap()
}

fn open_loop(transport: &str, rate: u64, p50_ns: u64) -> Row {
    let mut r = row(transport, 1, p50_ns);
    r.mode = "open-loop".into();
    r.offered_rate_hz = rate;
    r.achieved_rate_hz = rate;
    r
}

#[test]
fn trouble_names_losses_errors_and_saturation() {
    let r = row("udp", 1, 2000);
    assert_eq!(trouble(&r), None);
    let mut lost = r.clone();
    lost.dropped = 7;
    lost.timeouts = 2;
    assert_eq!(trouble(&lost).unwrap(), "7 lost, 2 late");
    let mut behind = open_loop("udp", 200_000, 2000);
    behind.achieved_rate_hz = 150_000;
    assert_eq!(
        trouble(&behind).unwrap(),
        "saturated: achieved 150k of 200k req/s"
    );
    behind.achieved_rate_hz = 199_000;
    assert_eq!(trouble(&behind), None, "within 5 % keeps up");
    let mut errors = r;
    errors.errors = 46;
    assert_eq!(trouble(&errors).unwrap(), "46 errors");
}

#[test]
fn labels_wrap_at_commas_then_spaces_and_cut_long_values() {
    use super::figure::wrap;
    assert_eq!(wrap("a=1, b=2, c=3", 8), ["a=1, b=2,", "c=3"]);
    assert_eq!(wrap("decoder=uf:abcdefgh", 10), ["decoder=uf", ":abcdefgh"]);
    assert_eq!(
        wrap("GPU persistent kernel, 2 pollers", 18),
        ["GPU persistent", "kernel, 2 pollers"]
    );
    assert_eq!(
        wrap("GPU persistent kernel, 2 pollers", 24),
        ["GPU persistent kernel,", "2 pollers"]
    );
}

/// The `x` of the `<text>` element reading exactly `t`.
fn text_x(svg: &str, t: &str) -> u32 {
    let at = svg.find(&format!(">\n{t}\n</text>")).expect(t);
    let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
    tag.split("x=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn spectrum_points_clamp_the_maximum_to_the_last_finite_x() {
    let pts = spectrum_points(&[(0.0, 1000), (0.9, 2000), (0.99, 4000), (1.0, 9000)]);
    assert_eq!(pts.len(), 4);
    assert_eq!(pts[0], (1.0, 1.0));
    assert!((pts[1].0 - 10.0).abs() < 1e-9 && pts[1].1 == 2.0);
    assert!((pts[2].0 - 100.0).abs() < 1e-9);
    assert_eq!(pts[3], (pts[2].0, 9.0));
    assert!(spectrum_points(&[(1.5, 1), (f64::NAN, 2)]).is_empty());
    assert_eq!(
        (0..5).map(percentile_label).collect::<Vec<_>>(),
        vec!["0%", "90%", "99%", "99.9%", "99.99%"]
    );
}

#[test]
fn percentiles_use_a_log_axis_a_legend_beside_and_leave_out_queues() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    for (transport, p50) in [("udp", 2_000u64), ("rdma", 20_000)] {
        let mut r = row(transport, 1, p50);
        r.spectrum = format!("spectra/{transport}.hgrm");
        rows.push(r);
    }
    let mut lossy = row("softnic", 1, 9_000_000);
    lossy.dropped = 5;
    lossy.spectrum = "spectra/softnic.hgrm".into();
    rows.push(lossy);
    let csv = write_csv(&dir.path().join("results"), "sweep.csv", &rows);
    let out = dir.path().join("plots");
    let plots = write_svgs(&comparison(csv), &out).unwrap();
    assert_eq!(plots.written, vec![out.join(PERCENTILES_SVG)]);
    assert!(
        plots
            .notes
            .iter()
            .any(|n| n.contains("soft NIC") && n.contains("5 lost")),
        "{:?}",
        plots.notes
    );
    let svg = std::fs::read_to_string(out.join(PERCENTILES_SVG)).unwrap();
    for tick in ["90%", "99%", "99.9%", "2", "5", "10", "20"] {
        assert!(has_text(&svg, tick), "no tick {tick}");
    }
    assert!(
        !has_text(&svg, "5000"),
        "the lossy row's 9 ms is off the scale"
    );
    // Legend entries, in words, sit right of the panel (720 px wide), not over it.
    for t in ["UDP", "RDMA"] {
        assert!(
            text_x(&svg, t) >= 720,
            "legend {t} at x = {}",
            text_x(&svg, t)
        );
    }
    assert!(!svg.contains(">\nsoft NIC\n</text>"));
    assert!(!svg.contains("transport="), "raw col=value in the figure");
    // The subtitle names what every row shares.
    assert!(
        svg.contains("32 B requests") && svg.contains("ping-pong"),
        "{svg}"
    );
}

#[test]
fn rate_plot_marks_lost_points_and_needs_two_rates() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    for (i, rate) in [10_000u64, 100_000, 1_000_000].into_iter().enumerate() {
        rows.push(open_loop("udp", rate, 2000 + 500 * i as u64));
    }
    let mut behind = open_loop("udp", 2_000_000, 900_000_000);
    behind.achieved_rate_hz = 300_000;
    behind.dropped = 1_000;
    rows.push(behind);
    rows.push(open_loop("rdma", 500_000, 1500));
    let csv = write_csv(dir.path(), "a.csv", &rows);
    let plots = write_svgs(&comparison(csv), dir.path()).unwrap();
    assert_eq!(plots.written, vec![dir.path().join(RATE_SVG)]);
    let notes = plots.notes.join("\n");
    assert!(
        notes.contains("1 configuration(s) measured at one offered rate"),
        "{notes}"
    );
    assert!(
        notes.contains("x: 2M req/s: 1000 lost, saturated"),
        "{notes}"
    );
    let svg = std::fs::read_to_string(dir.path().join(RATE_SVG)).unwrap();
    for tick in ["10k", "100k", "1M", "2M"] {
        assert!(has_text(&svg, tick), "no tick {tick}");
    }
    // The plotted configuration is named: UDP (the RDMA rows are not drawn).
    let subtitle = svg.find("UDP").expect("the configuration is named");
    assert!(svg[subtitle..].contains("open loop") || svg.contains("open loop"));
    assert!(!svg.contains("RDMA"));
    assert!(
        !has_text(&svg, "500000"),
        "the saturated point is off the scale"
    );
    // One style (UDP, blue circles): p50 filled, p99 hollow, on the 3 clean points.
    assert_eq!(
        svg.matches("<circle").count(),
        2 * 3 * 2,
        "p50 and p99 markers of clean points, fill and outline"
    );

    let single: Vec<Row> = ["udp", "rdma"].map(|t| open_loop(t, 1000, 2000)).to_vec();
    let csv = write_csv(dir.path(), "single.csv", &single);
    let out = dir.path().join("single");
    let plots = write_svgs(&comparison(csv), &out).unwrap();
    assert!(plots.written.is_empty());
    assert!(plots.notes.iter().any(|n| n.contains("one offered rate")));
    assert!(!out.join(RATE_SVG).exists());
}

#[test]
fn missing_spectrum_is_a_note_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = row("udp", 1, 2000);
    a.spectrum = "udp.hgrm".into();
    let mut b = row("rdma", 1, 3000);
    b.spectrum = "rdma.hgrm".into();
    let csv = write_csv(dir.path(), "a.csv", &[a, b]);
    std::fs::remove_file(dir.path().join("rdma.hgrm")).unwrap();
    let plots = write_svgs(&comparison(csv), &dir.path().join("svg")).unwrap();
    assert_eq!(plots.written.len(), 1);
    assert!(
        plots.notes.iter().any(|n| n.contains("RDMA")),
        "{:?}",
        plots.notes
    );
    let svg = std::fs::read_to_string(&plots.written[0]).unwrap();
    assert!(!svg.contains("RDMA"));
}
