//! The stream plot: reaction p99 against the number of streams. One panel per round
//! cadence; one colour and marker per configuration (host, engine, distance, window),
//! the same in every panel and named once in the legend beside the panels; a filled
//! marker where the engine kept up, a hollow one where it did not. A line joins the
//! points of one configuration on one host only. SVG through plotters without system
//! fonts (as `report` draws).
#![forbid(unsafe_code)]

use std::path::Path;

use plotters::prelude::*;

use super::record::StreamRow;
use crate::plot::facet::legend_labels;
use crate::plot::figure::{draw_marker, draw_title, plot_err, render, style, Frame, LegendEntry};
use crate::plot::words::words;
use crate::plot::{latency_axis, log_ticks, TickedAxis};
use crate::{Error, Result};

/// The columns that make a configuration (its style), in legend order. `csv` (the file a
/// row came from) tells apart two files of one host.
const CONFIG: &[&str] = &[
    "csv",
    "host",
    "cpu",
    "engine",
    "transport",
    "distance",
    "window",
    "commit",
    "gpu_threads",
];

/// One line's label for a row, in words (its engine, distance and cadence).
pub fn series_label(r: &StreamRow) -> String {
    format!(
        "{}, d={}, {}",
        words("engine", &r.engine).unwrap_or_default(),
        r.distance,
        words("round_ns", &r.round_ns.to_string()).unwrap_or_default()
    )
}

fn config_values(csv: &str, r: &StreamRow) -> Vec<String> {
    vec![
        csv.to_string(),
        r.host.clone(),
        r.cpu.clone(),
        r.engine.clone(),
        r.transport.clone(),
        r.distance.to_string(),
        r.window.to_string(),
        r.commit.to_string(),
        r.gpu_threads.map(|t| t.to_string()).unwrap_or_default(),
    ]
}

/// One line: its style, its cadence, and its points (streams, reaction p99 in µs, kept up).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub style: usize,
    pub round_ns: u64,
    pub points: Vec<(f64, f64, bool)>,
}

/// The lines of `sources` (each a CSV's name and rows), their legend labels (one per
/// style), and the words every configuration shares where it applies. Rows without
/// reaction samples are left out.
pub fn lines_of(sources: &[(String, Vec<StreamRow>)]) -> (Vec<Line>, Vec<String>, Vec<String>) {
    let rows: Vec<(Vec<String>, &StreamRow)> = sources
        .iter()
        .flat_map(|(csv, rows)| rows.iter().map(move |r| (config_values(csv, r), r)))
        .filter(|(_, r)| r.reaction_samples > 0)
        .collect();
    // The file says nothing the host does not, unless two files share a host.
    let hosts = |with_csv: bool| {
        let mut v: Vec<(&str, &str, &str)> = rows
            .iter()
            .map(|(k, _)| {
                (
                    if with_csv { k[0].as_str() } else { "" },
                    k[1].as_str(),
                    k[2].as_str(),
                )
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    let drop_csv = hosts(true) == hosts(false);
    let mut keys: Vec<Vec<String>> = Vec::new();
    let mut lines: Vec<Line> = Vec::new();
    for (mut k, r) in rows {
        if drop_csv {
            k[0].clear();
        }
        let style = match keys.iter().position(|x| *x == k) {
            Some(i) => i,
            None => {
                keys.push(k);
                keys.len() - 1
            }
        };
        let point = (f64::from(r.streams), r.reaction_p99_us.max(0.01), r.kept_up);
        match lines
            .iter_mut()
            .find(|l| l.style == style && l.round_ns == r.round_ns)
        {
            Some(l) => l.points.push(point),
            None => lines.push(Line {
                style,
                round_ns: r.round_ns,
                points: vec![point],
            }),
        }
    }
    for l in &mut lines {
        l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let (legend, shared) = legend_labels(CONFIG, &keys);
    (lines, legend, shared)
}

/// Draws the rows of one stream sweep into `path` (SVG).
pub fn reaction_vs_streams(rows: &[StreamRow], path: &Path) -> Result<()> {
    reaction_vs_streams_of(&[(String::new(), rows.to_vec())], path)
}

/// `1 µs`, `10 ms`, `1 s`: a log10-µs tick as a duration.
fn format_duration(log_us: f64) -> String {
    let us = 10f64.powf(log_us);
    let (v, unit) = if us >= 1e6 {
        (us / 1e6, "s")
    } else if us >= 1e3 {
        (us / 1e3, "ms")
    } else {
        (us, "µs")
    };
    let s = format!("{v:.1}");
    format!("{} {unit}", s.trim_end_matches(".0"))
}

/// Draws the rows of several stream sweeps (each a name, e.g. the CSV's stem, and its
/// rows) into one figure at `path` (SVG).
pub fn reaction_vs_streams_of(sources: &[(String, Vec<StreamRow>)], path: &Path) -> Result<()> {
    let (lines, legend, shared) = lines_of(sources);
    if lines.is_empty() {
        return Err(plot_err(path, "no row has reaction times to plot"));
    }
    let mut cadences: Vec<u64> = lines.iter().map(|l| l.round_ns).collect();
    cadences.sort_unstable();
    cadences.dedup();
    let all = || lines.iter().flat_map(|l| l.points.iter());
    let (x_lo, x_hi) = (
        all().map(|p| p.0).fold(f64::INFINITY, f64::min),
        all().map(|p| p.0).fold(1.0, f64::max),
    );
    let (y_lo, y_hi) = (
        all().map(|p| p.1).fold(f64::INFINITY, f64::min),
        all().map(|p| p.1).fold(0.0, f64::max),
    );
    let (a, b) = ((x_lo / 1.6).log10(), (x_hi * 1.6).log10());
    let mut x_ticks = log_ticks(10f64.powf(a), 10f64.powf(b));
    if b - a > 3.0 {
        x_ticks.retain(|t| (t - t.round()).abs() < 1e-9);
    }
    let mut subtitle: Vec<String> = Vec::new();
    let first = &sources.iter().flat_map(|s| s.1.first()).next();
    if let Some(r) = first {
        let all_rows = || sources.iter().flat_map(|s| s.1.iter());
        if all_rows().all(|o| o.transport == r.transport) {
            subtitle.extend(words("transport", &r.transport));
        }
    }
    for w in shared {
        if !subtitle.contains(&w) {
            subtitle.push(w);
        }
    }
    subtitle.push("reaction: a window's last round due -> its correction received".into());
    let frame = Frame {
        title: "reaction time p99 by number of streams".into(),
        subtitle: subtitle.join(", "),
        panels: cadences.len(),
        key: vec![
            "filled marker: kept up".into(),
            "hollow marker: did not keep up".into(),
            "(rounds refused, windows lost, or fell behind)".into(),
        ],
        legend: legend
            .iter()
            .enumerate()
            .map(|(i, label)| LegendEntry {
                label: if label.is_empty() {
                    "(all rows)".into()
                } else {
                    label.clone()
                },
                style: style(i),
                two_lines: false,
            })
            .collect(),
        notes: Vec::new(),
    };
    let svg = render(&frame, path, |root, cells| {
        for (round_ns, plot) in cadences.iter().zip(cells) {
            let title = words("round_ns", &round_ns.to_string()).unwrap_or_default();
            let top = draw_title(&plot, &title, path)?;
            let x = TickedAxis {
                lo: a,
                hi: b,
                ticks: x_ticks.clone(),
            };
            let mut chart = ChartBuilder::on(&plot)
                .margin(10)
                .margin_right(18)
                .margin_top(top)
                .x_label_area_size(38)
                .y_label_area_size(64)
                .build_cartesian_2d(x, latency_axis(y_lo, y_hi))
                .map_err(|e| plot_err(path, e))?;
            chart
                .configure_mesh()
                .x_desc("streams (logical qubits, log)")
                .y_desc("reaction time p99 (log)")
                .label_style(("sans-serif", 12))
                .axis_desc_style(("sans-serif", 13))
                .x_label_formatter(&|v: &f64| format!("{:.0}", 10f64.powf(*v)))
                .y_label_formatter(&|v: &f64| format_duration(*v))
                .draw()
                .map_err(|e| plot_err(path, e))?;
            for l in lines.iter().filter(|l| l.round_ns == *round_ns) {
                let st = style(l.style);
                let xy: Vec<(f64, f64)> = l
                    .points
                    .iter()
                    .map(|p| (p.0.log10(), p.1.log10()))
                    .collect();
                chart
                    .draw_series(LineSeries::new(xy.clone(), st.color.stroke_width(2)))
                    .map_err(|e| plot_err(path, e))?;
                for (p, &(_, _, kept)) in xy.iter().zip(&l.points) {
                    draw_marker(root, chart.backend_coord(p), st, kept)?;
                }
            }
        }
        Ok(())
    })?;
    std::fs::write(path, svg).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        engine: &str,
        cpu: &str,
        streams: u32,
        round_ns: u64,
        p99: f64,
        kept_up: bool,
    ) -> StreamRow {
        StreamRow {
            engine: engine.into(),
            cpu: cpu.into(),
            host: "vm".into(),
            streams,
            distance: 5,
            window: 10,
            commit: 5,
            round_ns,
            reaction_samples: 10,
            reaction_p99_us: p99,
            kept_up,
            ..StreamRow::default()
        }
    }

    #[test]
    fn lines_never_join_two_hosts_and_styles_never_repeat() {
        let lab = vec![
            row("cpu-pool", "Xeon (16 cores)", 1, 1000, 5.0, true),
            row("cpu-pool", "Xeon (16 cores)", 10, 1000, 50.0, false),
            row("gpu", "Xeon (16 cores)", 10, 1000, 8.0, true),
            row("cpu-pool", "Xeon (16 cores)", 10, 10000, 9.0, true),
        ];
        let laptop = vec![
            row("cpu-pool", "EPYC (2 cores)", 1, 1000, 300.0, false),
            row("cpu-pool", "EPYC (2 cores)", 2, 1000, 400.0, false),
        ];
        let (lines, legend, _) = lines_of(&[("lab".into(), lab), ("laptop".into(), laptop)]);
        // Three configurations: the lab's CPU pool and GPU, the laptop's CPU pool.
        assert_eq!(
            legend,
            [
                "Xeon (16 cores), CPU pool",
                "Xeon (16 cores), GPU persistent kernel",
                "EPYC (2 cores), CPU pool"
            ]
        );
        // The lab's CPU pool has a line in each cadence, the same style in both.
        let lab_pool: Vec<&Line> = lines.iter().filter(|l| l.style == 0).collect();
        assert_eq!(lab_pool.len(), 2);
        assert_eq!(lab_pool[0].points.len(), 2);
        let laptop_line = lines.iter().find(|l| l.style == 2).unwrap();
        assert_eq!(
            laptop_line.points,
            [(1.0, 300.0, false), (2.0, 400.0, false)]
        );
        let styles: Vec<_> = (0..legend.len()).map(style).collect();
        for (i, a) in styles.iter().enumerate() {
            assert!(
                styles[i + 1..].iter().all(|b| b.color != a.color),
                "colour repeats"
            );
        }
    }

    #[test]
    fn two_files_of_one_host_are_told_apart_by_file() {
        let a = vec![row("cpu-pool", "Xeon", 1, 1000, 5.0, true)];
        let b = vec![row("cpu-pool", "Xeon", 1, 1000, 6.0, true)];
        let (lines, legend, _) = lines_of(&[("before".into(), a), ("after".into(), b)]);
        assert_eq!(lines.len(), 2);
        assert_eq!(legend, ["before", "after"]);
    }

    #[test]
    fn the_figure_has_a_panel_per_cadence_and_a_legend_beside_them() {
        let rows = vec![
            row("cpu-pool", "Xeon", 1, 1000, 5.0, true),
            row("cpu-pool", "Xeon", 10, 1000, 50.0, false),
            row("gpu", "Xeon", 10, 10000, 8.0, true),
        ];
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.svg");
        reaction_vs_streams(&rows, &p).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        for t in [
            "a round every 1 µs",
            "a round every 10 µs",
            "CPU pool",
            "GPU persistent kernel",
        ] {
            assert!(svg.contains(&format!(">\n{t}\n</text>")), "{t}");
        }
        assert!(!svg.contains("cpu-pool"), "raw values in the figure");
        assert!(reaction_vs_streams(&[], &p).is_err());
        assert_eq!(format_duration(3.0), "1 ms");
        assert_eq!(format_duration(1.0), "10 µs");
        assert_eq!(format_duration(6.0), "1 s");
    }
}
