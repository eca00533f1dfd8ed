//! SVG plots of a [`Comparison`]: latency by percentile (`percentiles.svg`) and latency
//! against offered rate (`latency-vs-rate.svg`).
//!
//! Both put latency on a log axis, so microsecond curves stay readable beside a slow one.
//! A row that lost requests, answered some with an error or late, or could not keep up
//! with its offered rate ([`trouble`]) measured a queue, not the service: the percentile
//! plot leaves it out and says so under the panels, the rate plot marks its point with a
//! cross above the panel, off the latency scale. Rows are split into panels (facets) by
//! the configuration columns that keep each panel to [`MAX_SERIES`] lines; a panel's title
//! names its facet values and its legend, beside the plot, only the columns that vary
//! within it. A rate plot is drawn only when some configuration was measured at more than
//! one rate.
//!
//! Plots use plotters' SVG backend without its `ttf` feature: text becomes SVG `<text>`
//! laid out by estimate, so no fontconfig and no system font is needed; the viewer renders
//! the text (`scripts/render-plots.sh` turns the committed SVGs into PNGs).
#![forbid(unsafe_code)]

use std::fmt::Display;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::record::{self, Row};
use crate::report::{Comparison, Entry};
use crate::{Error, Result};

mod axis;
mod facet;

pub use axis::format_rate;
use axis::{format_us, latency_axis, rate_axis, TickedAxis};
pub use facet::{facet, Panel};

/// File name of the percentile-distribution plot inside `--svg DIR`.
pub const PERCENTILES_SVG: &str = "percentiles.svg";

/// File name of the latency-against-offered-rate plot inside `--svg DIR`.
pub const RATE_SVG: &str = "latency-vs-rate.svg";

/// Most lines in one percentile panel.
pub const MAX_SERIES: usize = 6;

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
        let name = c.label(i);
        let Some(path) = e.spectrum_path() else {
            notes.push(format!(
                "row {} ({name}): no spectrum recorded; left out of {PERCENTILES_SVG}",
                i + 1
            ));
            continue;
        };
        match record::read_hgrm(&path) {
            Ok(hgrm) => {
                let points = spectrum_points(&hgrm);
                if points.is_empty() {
                    notes.push(format!(
                        "row {} ({name}): {} holds no percentiles; left out of {PERCENTILES_SVG}",
                        i + 1,
                        path.display()
                    ));
                } else {
                    out.push(Spectrum { entry: i, points });
                }
            }
            Err(err) => notes.push(format!(
                "row {} ({name}): {err}; left out of {PERCENTILES_SVG}",
                i + 1
            )),
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
    let columns = without_rate(&c.columns);
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
            Some(g) => g.1.points.push(point),
            None => groups.push((
                key,
                RateGroup {
                    entry: i,
                    points: vec![point],
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

fn values(e: &Entry, columns: &[&str]) -> Vec<String> {
    columns
        .iter()
        .map(|c| e.value(c).unwrap_or_default())
        .collect()
}

// ---- layout -------------------------------------------------------------------------

/// Width of one panel's plot (axes included) and of its legend beside it; panel height.
const PLOT_W: u32 = 460;
const LEGEND_W: u32 = 250;
const PANEL_H: u32 = 340;
const TITLE_H: u32 = 44;
/// Narrowest figure, so that footnotes fit beside a single panel.
const MIN_W: u32 = 1000;
const NOTE_H: u32 = 18;
/// Most footnote lines under a figure; the rest are summarised.
const MAX_NOTES: usize = 10;
/// Legend label characters per line before it wraps.
const LEGEND_CHARS: usize = 30;
/// Panel title characters per line before it wraps.
const TITLE_CHARS: usize = 56;

/// Tableau 10: distinguishable on white; a panel never needs more than [`MAX_SERIES`].
const PALETTE: &[(u8, u8, u8)] = &[
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

fn palette_color(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

type Area<'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;

/// The figure's grid: panels per row, and the pixel size for `panels` panels and `notes`
/// footnote lines.
fn grid(panels: usize, notes: usize) -> (usize, (u32, u32)) {
    let cols = match panels {
        0 | 1 => 1,
        2..=4 => 2,
        _ => 3,
    };
    let rows = panels.div_ceil(cols).max(1);
    let width = (cols as u32 * (PLOT_W + LEGEND_W)).max(MIN_W);
    let height = TITLE_H + rows as u32 * PANEL_H + notes as u32 * NOTE_H + 12;
    (cols, (width, height))
}

/// The notes shown under a figure: at most [`MAX_NOTES`], then how many more.
fn footnotes(mut notes: Vec<String>) -> Vec<String> {
    if notes.len() > MAX_NOTES {
        let more = notes.len() - (MAX_NOTES - 1);
        notes.truncate(MAX_NOTES - 1);
        notes.push(format!(
            "... and {more} more (qfwd-latency report prints them all)"
        ));
    }
    notes
}

/// Draws the figure frame (background, title, footnotes) and returns one drawing area per
/// panel, plot and legend side by side.
fn frame<'b>(
    root: &Area<'b>,
    title: &str,
    panels: usize,
    notes: &[String],
    path: &Path,
) -> Result<Vec<(Area<'b>, Area<'b>)>> {
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let (_, h) = root.dim_in_pixel();
    root.draw(&Text::new(
        title.to_string(),
        (12, 12),
        ("sans-serif", 20).into_font(),
    ))
    .map_err(|e| plot_err(path, e))?;
    let notes_top = h as i32 - (notes.len() as u32 * NOTE_H + 8) as i32;
    for (i, n) in notes.iter().enumerate() {
        root.draw(&Text::new(
            n.clone(),
            (12, notes_top + (i as u32 * NOTE_H) as i32),
            ("sans-serif", 13).into_font().color(&RGBColor(80, 80, 80)),
        ))
        .map_err(|e| plot_err(path, e))?;
    }
    let (cols, _) = grid(panels, notes.len());
    let body = root.margin(TITLE_H, notes.len() as u32 * NOTE_H + 12, 0, 0);
    let rows = panels.div_ceil(cols).max(1);
    let cells = body.split_evenly((rows, cols));
    Ok(cells
        .into_iter()
        .take(panels)
        .map(|cell| cell.split_horizontally(PLOT_W))
        .collect())
}

/// The legend beside a panel: a swatch and the label (wrapped) per series; `dashed`
/// marks a rate series (solid p50 over dashed p99).
fn draw_legend(area: &Area<'_>, entries: &[(String, RGBColor, bool)], path: &Path) -> Result<()> {
    if let [(label, _, _)] = entries {
        if label.is_empty() {
            // One line, nothing to tell apart.
            return Ok(());
        }
    }
    let mut y = 40;
    for (label, color, dashed) in entries {
        let style = color.stroke_width(2);
        // A rate series is a solid p50 and a dashed p99 line: its swatch shows both.
        let swatch: Vec<Vec<(i32, i32)>> = if *dashed {
            vec![
                vec![(4, y + 3), (28, y + 3)],
                vec![(4, y + 11), (11, y + 11)],
                vec![(17, y + 11), (24, y + 11)],
            ]
        } else {
            vec![vec![(4, y + 7), (28, y + 7)]]
        };
        for seg in swatch {
            area.draw(&PathElement::new(seg, style))
                .map_err(|e| plot_err(path, e))?;
        }
        let label = if label.is_empty() {
            "(all rows)"
        } else {
            label
        };
        for line in wrap(label, LEGEND_CHARS) {
            area.draw(&Text::new(line, (34, y), ("sans-serif", 13).into_font()))
                .map_err(|e| plot_err(path, e))?;
            y += 16;
        }
        y += 6;
    }
    Ok(())
}

/// Draws a panel's title (wrapped) at the top of `area`; returns the height it took.
fn draw_title(area: &Area<'_>, title: &str, path: &Path) -> Result<u32> {
    let lines = if title.is_empty() {
        Vec::new()
    } else {
        wrap(title, TITLE_CHARS)
    };
    for (i, line) in lines.iter().enumerate() {
        area.draw(&Text::new(
            line.clone(),
            (56, 6 + 17 * i as i32),
            ("sans-serif", 14).into_font(),
        ))
        .map_err(|e| plot_err(path, e))?;
    }
    Ok(10 + 17 * lines.len() as u32)
}

/// Splits a `col=value, col=value` label into lines of about `width` characters, at the
/// commas where it can.
fn wrap(label: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let parts = label.split(", ").flat_map(|part| {
        // A single value longer than a line is cut into pieces.
        let chars: Vec<char> = part.chars().collect();
        chars
            .chunks(width.max(1))
            .map(|c| c.iter().collect::<String>())
            .collect::<Vec<_>>()
    });
    for part in parts {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 2 + part.chars().count() <= width => {
                l.push_str(", ");
                l.push_str(&part);
            }
            _ => lines.push(part),
        }
    }
    lines
}

fn plot_err(path: &Path, e: impl Display) -> Error {
    Error::Plot {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<TickedAxis, TickedAxis>>;

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
    if !first.is_empty() && c.entries.iter().all(|e| &e.row.rtt_or_oneway == first) {
        format!("latency ({first}, µs, log)")
    } else {
        "latency (µs, log)".into()
    }
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

// ---- the percentile plot ------------------------------------------------------------

fn draw_percentiles(path: &Path, c: &Comparison, spectra: Vec<Spectrum>) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let mut kept = Vec::new();
    for s in spectra {
        match trouble(&c.entries[s.entry].row) {
            Some(why) => notes.push(format!(
                "not drawn (latencies of a queue, not of the service): {}: {why}",
                c.label(s.entry)
            )),
            None => kept.push(s),
        }
    }
    if kept.is_empty() {
        notes.push(format!(
            "every row lost requests or fell behind: {PERCENTILES_SVG} shows none"
        ));
    }
    let items = kept
        .into_iter()
        .map(|s| (values(&c.entries[s.entry], &c.columns), s))
        .collect();
    let panels = cap_panels(facet(&c.columns, items, MAX_SERIES), &mut notes);
    let notes = footnotes(notes);
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

    let mut svg = String::new();
    {
        let (_, size) = grid(panels.len(), notes.len());
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let cells = frame(&root, "latency by percentile", panels.len(), &notes, path)?;
        for (panel, (plot, legend)) in panels.iter().zip(cells) {
            let top = draw_title(&plot, &panel.title, path)?;
            let mut chart = ChartBuilder::on(&plot)
                .margin(10)
                .margin_top(top)
                .x_label_area_size(38)
                .y_label_area_size(52)
                .build_cartesian_2d(
                    TickedAxis {
                        lo: 0.0,
                        hi: f64::from(decades),
                        ticks: (0..=decades).map(f64::from).collect(),
                    },
                    latency_axis(y_lo, y_hi),
                )
                .map_err(|e| plot_err(path, e))?;
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
            let mut swatches = Vec::new();
            for (i, (label, s)) in panel.series.iter().enumerate() {
                let points = s
                    .points
                    .iter()
                    .filter(|p| p.1 > 0.0)
                    .map(|&(x, y)| (x.log10(), y.log10()))
                    .collect();
                line(&mut chart, points, palette_color(i), false, path)?;
                swatches.push((label.clone(), palette_color(i), false));
            }
            draw_legend(&legend, &swatches, path)?;
        }
        root.present().map_err(|e| plot_err(path, e))?;
    }
    write_file(path, &svg)?;
    Ok(notes)
}

// ---- the rate plot ------------------------------------------------------------------

fn draw_rate(path: &Path, c: &Comparison, groups: Vec<RateGroup>) -> Result<Vec<String>> {
    let columns = without_rate(&c.columns);
    let items = groups
        .into_iter()
        .map(|g| (values(&c.entries[g.entry], &columns), g))
        .collect();
    let mut notes = Vec::new();
    let panels = cap_panels(facet(&columns, items, MAX_RATE_SERIES), &mut notes);
    trouble_notes(&panels, &mut notes);
    let notes = footnotes(notes);
    let (rate_lo, rate_hi, y_lo, y_hi) = rate_and_latency_ranges(&panels);
    let y_desc = latency_desc(c);

    let mut svg = String::new();
    {
        let (_, size) = grid(panels.len(), notes.len());
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let title = "latency vs offered rate (solid: p50, dashed: p99; x: lost or saturated)";
        let cells = frame(&root, title, panels.len(), &notes, path)?;
        for (panel, (plot, legend)) in panels.iter().zip(cells) {
            let (x_axis, x_log) = rate_axis(rate_lo, rate_hi);
            let tx = move |hz: f64| if x_log { hz.log10() } else { hz };
            let y_axis = latency_axis(y_lo, y_hi);
            let y_top = y_axis.hi;
            // Room above the plot for the crosses of lost or saturated points.
            let top = draw_title(&plot, &panel.title, path)? + 16;
            let mut chart = ChartBuilder::on(&plot)
                .margin(10)
                .margin_top(top)
                .x_label_area_size(38)
                .y_label_area_size(52)
                .build_cartesian_2d(x_axis, y_axis)
                .map_err(|e| plot_err(path, e))?;
            let x_fmt = move |v: &f64| format_rate(if x_log { 10f64.powf(*v) } else { *v });
            let x_desc = if x_log {
                "offered rate (req/s, log)"
            } else {
                "offered rate (req/s)"
            };
            mesh(&mut chart, x_desc, &y_desc, &x_fmt, path)?;
            let mut swatches = Vec::new();
            for (i, (label, g)) in panel.series.iter().enumerate() {
                let color = palette_color(i);
                let ok: Vec<&RatePoint> = g.points.iter().filter(|p| p.trouble.is_none()).collect();
                let p50: Vec<(f64, f64)> = ok
                    .iter()
                    .map(|p| (tx(p.rate_hz), p.p50_us.log10()))
                    .collect();
                let p99: Vec<(f64, f64)> = ok
                    .iter()
                    .map(|p| (tx(p.rate_hz), p.p99_us.log10()))
                    .collect();
                line(&mut chart, p50.clone(), color, false, path)?;
                line(&mut chart, p99.clone(), color, true, path)?;
                chart
                    .draw_series(p50.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| plot_err(path, e))?;
                chart
                    .draw_series(
                        p99.iter()
                            .map(|&p| TriangleMarker::new(p, 4, color.filled())),
                    )
                    .map_err(|e| plot_err(path, e))?;
                for p in g.points.iter().filter(|p| p.trouble.is_some()) {
                    // Above the plotting area: off the latency scale on purpose.
                    let (x, y) = chart.backend_coord(&(tx(p.rate_hz), y_top));
                    root.draw(&Cross::new((x, y - 12), 5, color.stroke_width(2)))
                        .map_err(|e| plot_err(path, e))?;
                }
                swatches.push((label.clone(), color, true));
            }
            draw_legend(&legend, &swatches, path)?;
        }
        root.present().map_err(|e| plot_err(path, e))?;
    }
    write_file(path, &svg)?;
    Ok(notes)
}

/// A footnote for every lost or saturated point: the plot marks it with a cross above
/// the latency scale, and the note says which one it is and why.
fn trouble_notes(panels: &[Panel<RateGroup>], notes: &mut Vec<String>) {
    for panel in panels {
        for (label, g) in &panel.series {
            let name: Vec<&str> = [panel.title.as_str(), label.as_str()]
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

#[cfg(test)]
mod tests;
