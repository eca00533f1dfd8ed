//! SVG plots of a [`Comparison`]: latency by percentile (`percentiles.svg`) and latency
//! against offered rate (`latency-vs-rate.svg`).
//!
//! A figure reads at a glance: its subtitle names what every line shares (scenario,
//! transport, host, GPU), each panel's title what its lines share (a decoder and its
//! model, a payload, a mode), and the legend, in its own column right of the panels, one
//! colour and marker per configuration, the same in every panel ([`facet`]). Titles and
//! labels are words, not `col=value` ([`words`]). Panels split by what was measured before
//! how, so the CPU and GPU runs of one decoder share a panel. Latency axes are log, as is
//! the rate axis where rates span more than a decade. A row that lost requests, answered
//! some with an error or late, or could not keep up with its offered rate ([`trouble`])
//! measured a queue, not the service: the percentile plot leaves it out and says so under
//! the panels, the rate plot marks its point with a cross above the panel. A rate plot is
//! drawn only when some configuration was measured at more than one rate.
//!
//! Plots use plotters' SVG backend without its `ttf` feature: text becomes SVG `<text>`,
//! so no font is needed; `scripts/render-plots.sh` turns the committed SVGs into PNGs.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::record::{self, Row};
use crate::report::{Comparison, Entry};
use crate::{Error, Result};

mod axis;
pub mod facet;
pub(crate) mod figure;
pub mod words;

pub use axis::format_rate;
use axis::{format_us, rate_axis};
pub(crate) use axis::{latency_axis, log_ticks, TickedAxis};
pub use facet::{layout, Layout, Panel};
use figure::{draw_marker, draw_title, plot_err, render, style, Area, Frame, LegendEntry};
use words::{describe, plot_columns, plot_value, words as in_words};

/// File name of the percentile-distribution plot inside `--svg DIR`.
pub const PERCENTILES_SVG: &str = "percentiles.svg";

/// File name of the latency-against-offered-rate plot inside `--svg DIR`.
pub const RATE_SVG: &str = "latency-vs-rate.svg";

/// Most lines in one percentile panel.
pub const MAX_SERIES: usize = 6;

/// Most configurations (styles) in one figure, each with a colour of its own.
pub const MAX_STYLES: usize = figure::COLORS;

/// Most configurations in one rate panel (each draws two lines: p50 and p99).
pub const MAX_RATE_SERIES: usize = 4;

/// Most panels in one figure; the rest are left out with a note (narrow with `--where`).
pub const MAX_PANELS: usize = 12;

/// Columns that say where a row was measured: left out of titles and legends when they
/// follow from the configuration (`gpu` is `none` exactly where the topology is `cpu`).
pub(crate) const PROVENANCE: &[&str] = &["cpu", "gpu", "nic", "pcie_path", "host"];

/// An open-loop row that achieved less than this share of its offered rate fell behind.
const KEPT_UP: f64 = 0.95;

/// Why a row's latencies describe a queue rather than the service, if they do: requests
/// lost, answered with an error or late, or an offered rate it did not keep up with.
pub fn trouble(row: &Row) -> Option<String> {
    let mut why = Vec::new();
    if row.samples == 0 {
        why.push("no samples".to_string());
    }
    if row.dropped > 0 {
        why.push(format!("{} lost", row.dropped));
    }
    if row.errors > 0 {
        why.push(format!("{} errors", row.errors));
    }
    if row.timeouts > 0 {
        why.push(format!("{} late", row.timeouts));
    }
    let offered = row.offered_rate_hz as f64;
    if row.mode == "open-loop" && offered > 0.0 && (row.achieved_rate_hz as f64) < offered * KEPT_UP
    {
        why.push(format!(
            "saturated: achieved {} of {} req/s",
            format_rate(row.achieved_rate_hz as f64),
            format_rate(offered)
        ));
    }
    (!why.is_empty()).then(|| why.join(", "))
}

/// What [`write_svgs`] did: the files written and what the reader should know (plots not
/// drawn, rows left out), one line each.
#[derive(Debug, Default)]
pub struct Plots {
    pub written: Vec<PathBuf>,
    pub notes: Vec<String>,
}

/// Draws the plots into `dir` (created if missing). A plot with nothing to show is not
/// drawn; [`Plots::notes`] says why.
pub fn write_svgs(c: &Comparison, dir: &Path) -> Result<Plots> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut plots = Plots::default();
    let (spectra, mut notes) = load_spectra(c);
    plots.notes.append(&mut notes);
    if spectra.is_empty() {
        plots.notes.push(format!(
            "no row has a readable spectrum: {PERCENTILES_SVG} not drawn"
        ));
    } else {
        let path = dir.join(PERCENTILES_SVG);
        let mut notes = draw_percentiles(&path, c, spectra)?;
        plots.notes.append(&mut notes);
        plots.written.push(path);
    }

    let (groups, single): (Vec<RateGroup>, Vec<RateGroup>) =
        rate_groups(c).into_iter().partition(|g| g.points.len() > 1);
    if groups.is_empty() && single.is_empty() {
        plots
            .notes
            .push(format!("no open-loop rows: {RATE_SVG} not drawn"));
    } else if groups.is_empty() {
        plots.notes.push(format!(
            "every configuration was measured at one offered rate: {RATE_SVG} not drawn \
             (the latencies are in {PERCENTILES_SVG})"
        ));
    } else {
        if !single.is_empty() {
            plots.notes.push(format!(
                "{} configuration(s) measured at one offered rate left out of {RATE_SVG} \
                 (their latencies are in {PERCENTILES_SVG})",
                single.len()
            ));
        }
        let path = dir.join(RATE_SVG);
        let mut notes = draw_rate(&path, c, groups)?;
        plots.notes.append(&mut notes);
        plots.written.push(path);
    }
    Ok(plots)
}

/// One line of the percentile plot: x = 1/(1-p), y = latency in µs.
#[derive(Debug, Clone, PartialEq)]
pub struct Spectrum {
    /// Index of its row in the comparison.
    pub entry: usize,
    pub points: Vec<(f64, f64)>,
}

/// Converts `read_hgrm` points to (1/(1-p), µs). The p = 1.0 point (the maximum) is kept
/// at the last finite x, so the line ends in a vertical step to the max.
pub fn spectrum_points(hgrm: &[(f64, u64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(hgrm.len());
    let mut last_x = 1.0f64;
    for &(p, ns) in hgrm {
        // A percentile outside [0, 1] would put x off the axis; drop it.
        if !(0.0..=1.0).contains(&p) {
            continue;
        }
        let x = if p < 1.0 {
            (1.0 / (1.0 - p)).max(1.0)
        } else {
            last_x
        };
        if x.is_finite() {
            last_x = last_x.max(x);
            out.push((x, ns as f64 / 1000.0));
        }
    }
    out
}

/// Tick label for x = 10^k on the percentile axis: 0%, 90%, 99%, 99.9%, ...
pub fn percentile_label(k: u32) -> String {
    match k {
        0 => "0%".into(),
        1 => "90%".into(),
        2 => "99%".into(),
        _ => format!("99.{}%", "9".repeat(k as usize - 2)),
    }
}

/// The spectra of the rows worth drawing, and a note for each row left out.
fn load_spectra(c: &Comparison) -> (Vec<Spectrum>, Vec<String>) {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for (i, e) in c.entries.iter().enumerate() {
        let name = row_words(c, i);
        let Some(path) = e.spectrum_path() else {
            notes.push(format!(
                "{name}: no spectrum recorded; left out of {PERCENTILES_SVG}"
            ));
            continue;
        };
        match record::read_hgrm(&path) {
            Ok(hgrm) => {
                let points = spectrum_points(&hgrm);
                if points.is_empty() {
                    notes.push(format!(
                        "{name}: {} holds no percentiles; left out of {PERCENTILES_SVG}",
                        path.display()
                    ));
                } else {
                    out.push(Spectrum { entry: i, points });
                }
            }
            Err(err) => notes.push(format!("{name}: {err}; left out of {PERCENTILES_SVG}")),
        }
    }
    (out, notes)
}

/// One configuration of the rate plot: its rows by offered rate, sorted by rate.
#[derive(Debug, Clone, PartialEq)]
pub struct RateGroup {
    /// Index of its first row in the comparison (the group's values of every column but
    /// the rate are that row's).
    pub entry: usize,
    pub points: Vec<RatePoint>,
    /// Every row of the group, as indices into the comparison.
    pub rows: Vec<usize>,
}

/// One open-loop row: offered rate (Hz), p50 and p99 (µs), and its [`trouble`].
#[derive(Debug, Clone, PartialEq)]
pub struct RatePoint {
    pub rate_hz: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub trouble: Option<String>,
}

/// Open-loop rows with a rate, grouped by the label columns except `offered_rate_hz`,
/// groups in order of first appearance.
pub fn rate_groups(c: &Comparison) -> Vec<RateGroup> {
    let columns = without_rate(&plot_columns(&c.columns));
    let mut groups: Vec<(Vec<String>, RateGroup)> = Vec::new();
    for (i, e) in c.entries.iter().enumerate() {
        let r = &e.row;
        if r.mode != "open-loop" || r.offered_rate_hz == 0 {
            continue;
        }
        let key = values(e, &columns);
        let point = RatePoint {
            rate_hz: r.offered_rate_hz as f64,
            p50_us: r.p50_ns as f64 / 1000.0,
            p99_us: r.p99_ns as f64 / 1000.0,
            trouble: trouble(r),
        };
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => {
                g.1.points.push(point);
                g.1.rows.push(i);
            }
            None => groups.push((
                key,
                RateGroup {
                    entry: i,
                    points: vec![point],
                    rows: vec![i],
                },
            )),
        }
    }
    let mut groups: Vec<RateGroup> = groups.into_iter().map(|g| g.1).collect();
    for g in &mut groups {
        g.points.sort_by(|a, b| a.rate_hz.total_cmp(&b.rate_hz));
    }
    groups
}

fn without_rate(columns: &[&'static str]) -> Vec<&'static str> {
    columns
        .iter()
        .copied()
        .filter(|c| *c != "offered_rate_hz")
        .collect()
}

/// `e`'s values of the plot columns `columns` (the decoder split, [`words`]).
fn values(e: &Entry, columns: &[&str]) -> Vec<String> {
    columns.iter().map(|c| plot_value(e, c)).collect()
}

/// Row `i` in words, for the footnotes: its label columns, or `row N`.
fn row_words(c: &Comparison, i: usize) -> String {
    let columns = plot_columns(&c.columns);
    let all: Vec<usize> = (0..columns.len()).collect();
    let text = describe(&columns, &all, &values(&c.entries[i], &columns));
    if text.is_empty() {
        format!("row {}", i + 1)
    } else {
        format!("row {} ({text})", i + 1)
    }
}

/// What every drawn row (`rows`, indices into the comparison) shares, in words, then
/// `shared` (what every line shares where it applies): the figure's subtitle, naming
/// the plotted configuration.
fn subtitle(c: &Comparison, rows: &[usize], shared: &[String]) -> String {
    let columns = plot_columns(crate::report::CONFIG_COLUMNS);
    let Some(first) = rows.first().map(|&i| &c.entries[i]) else {
        return String::new();
    };
    let mut said: Vec<String> = columns
        .iter()
        .filter(|col| {
            let v = plot_value(first, col);
            rows.iter().all(|&i| plot_value(&c.entries[i], col) == v)
        })
        .filter_map(|col| in_words(col, &plot_value(first, col)))
        .collect();
    for s in shared {
        if !said.contains(s) {
            said.push(s.clone());
        }
    }
    said.join(", ")
}

/// The legend entries of a layout's styles; none for a lone configuration, which the
/// subtitle names.
fn legend_entries(legend: &[String], two_lines: bool) -> Vec<LegendEntry> {
    if legend.len() == 1 && legend[0].is_empty() {
        return Vec::new();
    }
    legend
        .iter()
        .enumerate()
        .map(|(i, label)| LegendEntry {
            label: label.clone(),
            style: style(i),
            two_lines,
        })
        .collect()
}

/// Panels beyond [`MAX_PANELS`] are dropped, with a note.
fn cap_panels<T>(mut panels: Vec<Panel<T>>, notes: &mut Vec<String>) -> Vec<Panel<T>> {
    if panels.len() > MAX_PANELS {
        notes.push(format!(
            "{} more panels not drawn: narrow the rows with --where COL=VALUE",
            panels.len() - MAX_PANELS
        ));
        panels.truncate(MAX_PANELS);
    }
    panels
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<TickedAxis, TickedAxis>>;

fn chart<'a, 'b>(
    plot: &'a Area<'b>,
    top: u32,
    x: TickedAxis,
    y: TickedAxis,
    path: &Path,
) -> Result<Chart<'a, 'b>> {
    ChartBuilder::on(plot)
        .margin(10)
        .margin_right(18)
        .margin_top(top)
        .x_label_area_size(38)
        .y_label_area_size(52)
        .build_cartesian_2d(x, y)
        .map_err(|e| plot_err(path, e))
}

fn mesh(
    chart: &mut Chart<'_, '_>,
    x_desc: &str,
    y_desc: &str,
    x_fmt: &dyn Fn(&f64) -> String,
    path: &Path,
) -> Result<()> {
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 13))
        .x_label_formatter(x_fmt)
        .y_label_formatter(&|v: &f64| format_us(*v))
        .draw()
        .map_err(|e| plot_err(path, e))
}

fn line(
    chart: &mut Chart<'_, '_>,
    points: Vec<(f64, f64)>,
    color: RGBColor,
    dashed: bool,
    path: &Path,
) -> Result<()> {
    let style = color.stroke_width(2);
    if dashed {
        chart.draw_series(DashedLineSeries::new(points, 8, 5, style))
    } else {
        chart.draw_series(LineSeries::new(points, style))
    }
    .map(|_| ())
    .map_err(|e| plot_err(path, e))
}

fn latency_desc(c: &Comparison) -> String {
    let first = &c.entries[0].row.rtt_or_oneway;
    let kind = match first.as_str() {
        "rtt" => "round trip, ",
        "oneway" => "one way, ",
        _ => "",
    };
    if !kind.is_empty() && c.entries.iter().all(|e| &e.row.rtt_or_oneway == first) {
        format!("latency ({kind}µs, log)")
    } else {
        "latency (µs, log)".into()
    }
}

// ---- the percentile plot ------------------------------------------------------------

/// The percentiles a line carries a marker at: p50, p90, p99, p99.9, ... as x = 1/(1-p).
fn marker_xs(max_x: f64) -> Vec<f64> {
    let mut xs = vec![2.0];
    let mut x = 10.0;
    while x <= max_x * (1.0 + 1e-9) {
        xs.push(x);
        x *= 10.0;
    }
    xs
}

/// The latency a spectrum reports at x = 1/(1-p): its first point at or beyond x.
fn at_percentile(points: &[(f64, f64)], x: f64) -> Option<f64> {
    points.iter().find(|p| p.0 >= x * (1.0 - 1e-9)).map(|p| p.1)
}

fn draw_percentiles(path: &Path, c: &Comparison, spectra: Vec<Spectrum>) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let mut kept = Vec::new();
    for s in spectra {
        match trouble(&c.entries[s.entry].row) {
            Some(why) => notes.push(format!(
                "not drawn (latencies of a queue, not of the service): {}: {why}",
                row_words(c, s.entry)
            )),
            None => kept.push(s),
        }
    }
    if kept.is_empty() {
        notes.push(format!(
            "every row lost requests or fell behind: {PERCENTILES_SVG} shows none"
        ));
    }
    let columns = plot_columns(&c.columns);
    let drawn: Vec<usize> = kept.iter().map(|s| s.entry).collect();
    let items = kept
        .into_iter()
        .map(|s| (values(&c.entries[s.entry], &columns), s))
        .collect();
    let laid = layout(&columns, items, MAX_SERIES, MAX_STYLES);
    let panels = cap_panels(laid.panels, &mut notes);
    let all = panels.iter().flat_map(|p| p.series.iter().map(|s| &s.1));
    let max_x = all
        .clone()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max);
    let decades = (max_x.log10() - 1e-9).ceil().clamp(1.0, 30.0) as u32;
    let ys = || {
        all.clone()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|y| *y > 0.0)
    };
    let (y_lo, y_hi) = (
        ys().fold(f64::INFINITY, f64::min),
        ys().fold(0.0f64, f64::max),
    );
    let y_desc = latency_desc(c);
    let frame = Frame {
        title: "latency by percentile".into(),
        subtitle: subtitle(c, &drawn, &laid.shared),
        panels: panels.len(),
        key: vec!["markers at p50, p90, p99, p99.9, ...".into()],
        legend: legend_entries(&laid.legend, false),
        notes: notes.clone(),
    };
    let svg = render(&frame, path, |root, cells| {
        for (panel, plot) in panels.iter().zip(cells) {
            let top = draw_title(&plot, &panel.title, path)?;
            let x = TickedAxis {
                lo: 0.0,
                hi: f64::from(decades),
                ticks: (0..=decades).map(f64::from).collect(),
            };
            let mut chart = chart(&plot, top, x, latency_axis(y_lo, y_hi), path)?;
            // Every decade ticked; about six labelled, so that long labels never overlap.
            let every = decades.div_ceil(6).max(1);
            let x_fmt = move |v: &f64| {
                let k = v.round().max(0.0) as u32;
                if k % every == 0 {
                    percentile_label(k)
                } else {
                    String::new()
                }
            };
            mesh(
                &mut chart,
                "percentile (1/(1-p), log)",
                &y_desc,
                &x_fmt,
                path,
            )?;
            for (i, s) in &panel.series {
                let st = style(*i);
                let points: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .filter(|p| p.1 > 0.0)
                    .map(|&(x, y)| (x.log10(), y.log10()))
                    .collect();
                line(&mut chart, points, st.color, false, path)?;
                let last_x = s.points.last().map_or(1.0, |p| p.0);
                for x in marker_xs(last_x) {
                    if let Some(y) = at_percentile(&s.points, x).filter(|y| *y > 0.0) {
                        let at = chart.backend_coord(&(x.log10(), y.log10()));
                        draw_marker(root, at, st, true)?;
                    }
                }
            }
        }
        Ok(())
    })?;
    write_file(path, &svg)?;
    Ok(notes)
}

// ---- the rate plot ------------------------------------------------------------------

fn draw_rate(path: &Path, c: &Comparison, groups: Vec<RateGroup>) -> Result<Vec<String>> {
    let columns = without_rate(&plot_columns(&c.columns));
    let drawn: Vec<usize> = groups.iter().flat_map(|g| g.rows.iter().copied()).collect();
    let items = groups
        .into_iter()
        .map(|g| (values(&c.entries[g.entry], &columns), g))
        .collect();
    let mut notes = Vec::new();
    let laid = layout(&columns, items, MAX_RATE_SERIES, MAX_STYLES);
    let panels = cap_panels(laid.panels, &mut notes);
    trouble_notes(&panels, &laid.legend, &mut notes);
    let (rate_lo, rate_hi, y_lo, y_hi) = rate_and_latency_ranges(&panels);
    let y_desc = latency_desc(c);
    let frame = Frame {
        title: "latency against offered rate".into(),
        subtitle: subtitle(c, &drawn, &laid.shared),
        panels: panels.len(),
        key: vec![
            "solid line, filled marker: p50".into(),
            "dashed line, hollow marker: p99".into(),
            "x above a panel: lost or saturated".into(),
        ],
        legend: legend_entries(&laid.legend, true),
        notes: notes.clone(),
    };
    let svg = render(&frame, path, |root, cells| {
        for (panel, plot) in panels.iter().zip(cells) {
            let (x_axis, x_log) = rate_axis(rate_lo, rate_hi);
            let tx = move |hz: f64| if x_log { hz.log10() } else { hz };
            let y_axis = latency_axis(y_lo, y_hi);
            let y_top = y_axis.hi;
            // Room above the plot for the crosses of lost or saturated points.
            let top = draw_title(&plot, &panel.title, path)? + 16;
            let mut chart = chart(&plot, top, x_axis, y_axis, path)?;
            let x_fmt = move |v: &f64| format_rate(if x_log { 10f64.powf(*v) } else { *v });
            let x_desc = if x_log {
                "offered rate (req/s, log)"
            } else {
                "offered rate (req/s)"
            };
            mesh(&mut chart, x_desc, &y_desc, &x_fmt, path)?;
            for (i, g) in &panel.series {
                let st = style(*i);
                let ok: Vec<&RatePoint> = g.points.iter().filter(|p| p.trouble.is_none()).collect();
                for (dashed, pick) in [(false, 0), (true, 1)] {
                    let pts: Vec<(f64, f64)> = ok
                        .iter()
                        .map(|p| (tx(p.rate_hz), [p.p50_us, p.p99_us][pick].log10()))
                        .collect();
                    line(&mut chart, pts.clone(), st.color, dashed, path)?;
                    for p in pts {
                        draw_marker(root, chart.backend_coord(&p), st, !dashed)?;
                    }
                }
                for p in g.points.iter().filter(|p| p.trouble.is_some()) {
                    // Above the plotting area: off the latency scale on purpose.
                    let (x, y) = chart.backend_coord(&(tx(p.rate_hz), y_top));
                    root.draw(&Cross::new((x, y - 12), 5, st.color.stroke_width(2)))
                        .map_err(|e| plot_err(path, e))?;
                }
            }
        }
        Ok(())
    })?;
    write_file(path, &svg)?;
    Ok(notes)
}

/// A footnote for every lost or saturated point: the plot marks it with a cross above
/// the latency scale, and the note says which one it is and why.
fn trouble_notes(panels: &[Panel<RateGroup>], legend: &[String], notes: &mut Vec<String>) {
    for panel in panels {
        for (style, g) in &panel.series {
            let name: Vec<&str> = [panel.title.as_str(), legend[*style].as_str()]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect();
            for p in &g.points {
                if let Some(why) = &p.trouble {
                    notes.push(format!(
                        "x: {}{} req/s: {why}",
                        if name.is_empty() {
                            String::new()
                        } else {
                            format!("{} at ", name.join(", "))
                        },
                        format_rate(p.rate_hz)
                    ));
                }
            }
        }
    }
}

/// The offered rates' lowest and highest, and the latencies' (p50 and p99, in µs) of the
/// points that are neither lost nor saturated: the axes' extents, shared by every panel.
fn rate_and_latency_ranges(panels: &[Panel<RateGroup>]) -> (f64, f64, f64, f64) {
    let points = || {
        panels
            .iter()
            .flat_map(|p| p.series.iter().flat_map(|s| s.1.points.iter()))
    };
    let rate_lo = points().map(|p| p.rate_hz).fold(f64::INFINITY, f64::min);
    let rate_hi = points().map(|p| p.rate_hz).fold(0.0f64, f64::max);
    let clean = || points().filter(|p| p.trouble.is_none());
    let y_lo = clean()
        .map(|p| p.p50_us.min(p.p99_us))
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let y_hi = clean()
        .map(|p| p.p50_us.max(p.p99_us))
        .fold(0.0f64, f64::max);
    (rate_lo, rate_hi, y_lo, y_hi)
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests;
