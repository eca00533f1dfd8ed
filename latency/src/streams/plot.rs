//! The stream plot: reaction p99 against the number of streams, one line per engine,
//! distance and cadence; a filled marker where the engine kept up, a cross where it did
//! not. SVG through plotters without system fonts (as `report` draws).
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::record::StreamRow;
use crate::{Error, Result};

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

fn plot_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Plot {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

/// One line's label for a row.
pub fn series_label(r: &StreamRow) -> String {
    format!(
        "{} d={} {} µs rounds",
        r.engine,
        r.distance,
        r.round_ns as f64 / 1e3
    )
}

/// Draws `rows` into `path` (SVG). Rows without reaction samples are left out.
pub fn reaction_vs_streams(rows: &[StreamRow], path: &Path) -> Result<()> {
    let series = lines_of(rows);
    if series.is_empty() {
        return Err(plot_err(path, "no row has reaction times to plot"));
    }
    let all = series.values().flat_map(|(_, p)| p);
    let x_hi = all.clone().map(|p| p.0).fold(1.0, f64::max) * 2.0;
    let y_lo = all.clone().map(|p| p.1).fold(f64::INFINITY, f64::min) / 2.0;
    let y_hi = all.map(|p| p.1).fold(0.0, f64::max) * 2.0;
    let mut svg = String::new();
    {
        let height = 520 + 22 * series.len() as u32;
        let root = SVGBackend::with_string(&mut svg, (900, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption("reaction time p99 by number of streams", ("sans-serif", 22))
            .margin(15)
            .margin_right(40)
            .x_label_area_size(70)
            .y_label_area_size(75)
            .build_cartesian_2d(
                (0.7f64..x_hi).log_scale(),
                (y_lo.min(1.0)..y_hi).log_scale(),
            )
            .map_err(|e| plot_err(path, e))?;
        chart
            .configure_mesh()
            .x_desc("streams (logical qubits), log scale")
            .y_desc("reaction p99, µs (log scale)")
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 16))
            .light_line_style(WHITE)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v}"))
            .draw()
            .map_err(|e| plot_err(path, e))?;
        draw_lines(&mut chart, &series, path)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(|e| plot_err(path, e))?;
        root.draw(&Text::new(
            "● kept up   ✕ did not keep up (refused rounds, lost windows, or fell behind)",
            (90, height as i32 - 16),
            ("sans-serif", 13),
        ))
        .map_err(|e| plot_err(path, e))?;
        root.present().map_err(|e| plot_err(path, e))?;
    }
    std::fs::write(path, svg).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// One line of the plot: its label and its points (streams, reaction p99 in µs, kept up).
type Line = (String, Vec<(f64, f64, bool)>);

/// The plot's lines, keyed by (engine, distance, cadence), so the legend reads in that order.
type Lines = BTreeMap<(String, u32, u64), Line>;

/// The rows with reaction samples as lines, each line's points in order of streams.
fn lines_of(rows: &[StreamRow]) -> Lines {
    let mut series: Lines = BTreeMap::new();
    for r in rows.iter().filter(|r| r.reaction_samples > 0) {
        series
            .entry((r.engine.clone(), r.distance, r.round_ns))
            .or_insert_with(|| (series_label(r), Vec::new()))
            .1
            .push((f64::from(r.streams), r.reaction_p99_us.max(0.01), r.kept_up));
    }
    for (_, points) in series.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

/// Draws every line, its legend sample and its markers (kept up or not) into `chart`.
fn draw_lines<'a, 'b: 'a>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<LogCoord<f64>, LogCoord<f64>>>,
    series: &Lines,
    path: &Path,
) -> Result<()> {
    // Colour by (distance, cadence), the same for both engines; the line says the
    // engine (solid: CPU pool, dotted: a launch per batch, dashed: the persistent GPU
    // kernel), so no two series look alike.
    let shapes: Vec<(u32, u64)> = {
        let mut v: Vec<(u32, u64)> = series.keys().map(|k| (k.1, k.2)).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    for ((engine, distance, round_ns), (label, points)) in series {
        let i = shapes
            .iter()
            .position(|s| *s == (*distance, *round_ns))
            .unwrap_or(0);
        let color = PALETTE[i % PALETTE.len()];
        let style = color.stroke_width(2);
        let xy = points.iter().map(|p| (p.0, p.1));
        let drawn = match engine.as_str() {
            "cpu-pool" => chart.draw_series(LineSeries::new(xy, style)),
            "gpu-launch" => chart.draw_series(DashedLineSeries::new(xy, 2, 4, style)),
            _ => chart.draw_series(DashedLineSeries::new(xy, 8, 5, style)),
        };
        // The legend's sample, four strokes: joined (solid), two dashes, or four dots.
        let strokes: [(i32, i32); 4] = match engine.as_str() {
            "cpu-pool" => [(0, 5), (5, 10), (10, 15), (15, 20)],
            "gpu-launch" => [(0, 2), (6, 8), (12, 14), (18, 20)],
            _ => [(0, 8), (12, 20), (20, 20), (20, 20)],
        };
        drawn
            .map_err(|e| plot_err(path, e))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                let seg = |(a, b): (i32, i32)| PathElement::new(vec![(a, 0), (b, 0)], style);
                EmptyElement::at((x, y))
                    + seg(strokes[0])
                    + seg(strokes[1])
                    + seg(strokes[2])
                    + seg(strokes[3])
            });
        chart
            .draw_series(points.iter().map(|&(x, y, kept)| {
                if kept {
                    Circle::new((x, y), 5, color.filled()).into_dyn()
                } else {
                    Cross::new((x, y), 6, color.stroke_width(3)).into_dyn()
                }
            }))
            .map_err(|e| plot_err(path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_engine_distance_and_cadence() {
        let row = |engine: &str, streams, p99, kept_up| StreamRow {
            engine: engine.into(),
            streams,
            distance: 5,
            round_ns: 1000,
            reaction_samples: 10,
            reaction_p99_us: p99,
            kept_up,
            ..StreamRow::default()
        };
        let rows = vec![
            row("cpu-pool", 1, 5.0, true),
            row("cpu-pool", 10, 50.0, false),
            row("gpu", 10, 8.0, true),
        ];
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.svg");
        reaction_vs_streams(&rows, &p).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.contains("cpu-pool d=5 1 µs rounds") && svg.contains("gpu d=5 1 µs rounds"));
        assert!(reaction_vs_streams(&[], &p).is_err());
    }
}
