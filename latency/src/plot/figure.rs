//! A figure's frame, shared by every plot: the title and the subtitle naming what every
//! line shares, a grid of panels, the legend in its own column right of them (never over
//! the data), and the footnotes. Also the styles: one colour and one marker per
//! configuration.
//!
//! Text is SVG `<text>` laid out by estimate (about 7 px a character at 13 px), so no
//! font is needed to draw; the viewer renders it.
#![forbid(unsafe_code)]

use std::path::Path;

use plotters::prelude::*;

use crate::{Error, Result};

pub(crate) type Area<'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;

/// Tableau 10: distinguishable on white.
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

/// Most styles with a colour of their own; beyond, colours repeat with another marker.
pub const COLORS: usize = PALETTE.len();

/// Marker shapes, in the order styles take them. The cross is not among them: it marks
/// a point in trouble (lost requests, not kept up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
    TriangleRight,
    TriangleLeft,
}

const MARKERS: &[Marker] = &[
    Marker::Circle,
    Marker::Square,
    Marker::TriangleUp,
    Marker::Diamond,
    Marker::TriangleDown,
    Marker::TriangleRight,
    Marker::TriangleLeft,
];

/// One configuration's look: its colour and marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: RGBColor,
    pub marker: Marker,
}

/// Style `i`: a colour of its own for the first [`COLORS`] styles, and a (colour, marker)
/// pair of its own for the first 70.
pub fn style(i: usize) -> Style {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    Style {
        color: RGBColor(r, g, b),
        marker: MARKERS[i % MARKERS.len()],
    }
}

/// Draws `m` centred on pixel `(x, y)` of `area`, filled or as an outline.
pub fn draw_marker(area: &Area<'_>, (x, y): (i32, i32), s: Style, filled: bool) -> Result<()> {
    let r = 5;
    let shape = |m: Marker| -> Vec<(i32, i32)> {
        match m {
            Marker::Circle => Vec::new(),
            Marker::Square => vec![
                (-r + 1, -r + 1),
                (r - 1, -r + 1),
                (r - 1, r - 1),
                (-r + 1, r - 1),
            ],
            Marker::TriangleUp => vec![(0, -r - 1), (r, r - 1), (-r, r - 1)],
            Marker::TriangleDown => vec![(0, r + 1), (r, -r + 1), (-r, -r + 1)],
            Marker::TriangleRight => vec![(r + 1, 0), (-r + 1, -r), (-r + 1, r)],
            Marker::TriangleLeft => vec![(-r - 1, 0), (r - 1, -r), (r - 1, r)],
            Marker::Diamond => vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)],
        }
    };
    let err = |e: plotters::drawing::DrawingAreaErrorKind<_>| Error::Plot {
        path: Path::new("<figure>").to_path_buf(),
        detail: e.to_string(),
    };
    let fill = if filled {
        s.color.filled()
    } else {
        WHITE.filled()
    };
    if s.marker == Marker::Circle {
        area.draw(&Circle::new((x, y), r - 1, fill)).map_err(err)?;
        return area
            .draw(&Circle::new((x, y), r - 1, s.color.stroke_width(2)))
            .map_err(err);
    }
    let pts: Vec<(i32, i32)> = shape(s.marker)
        .iter()
        .map(|&(dx, dy)| (x + dx, y + dy))
        .collect();
    area.draw(&Polygon::new(pts.clone(), fill)).map_err(err)?;
    let mut outline = pts.clone();
    outline.push(pts[0]);
    area.draw(&PathElement::new(outline, s.color.stroke_width(2)))
        .map_err(err)
}

/// One legend line: a configuration's label, its style, and whether its lines come in
/// two kinds (solid p50 over dashed p99).
#[derive(Debug, Clone)]
pub struct LegendEntry {
    pub label: String,
    pub style: Style,
    pub two_lines: bool,
}

/// What a figure shows around its panels.
pub struct Frame {
    pub title: String,
    /// What every line shares, in words ("" when nothing worth saying).
    pub subtitle: String,
    pub panels: usize,
    /// Lines at the top of the legend column saying how to read the marks.
    pub key: Vec<String>,
    pub legend: Vec<LegendEntry>,
    pub notes: Vec<String>,
}

/// Panel width and height: one panel takes the width of two.
fn panel_size(cols: usize) -> (u32, u32) {
    if cols == 1 {
        (720, 420)
    } else {
        (470, 340)
    }
}
const LEGEND_W: u32 = 300;
const LEGEND_CHARS: usize = 36;
const LINE_H: u32 = 16;
const NOTE_H: u32 = 17;
/// Pixels per character of 13 px text, as laid out by estimate.
const CHAR_W: u32 = 7;
/// Most footnote lines under a figure; the rest are summarised.
const MAX_NOTES: usize = 12;

impl Frame {
    fn grid(&self) -> (usize, usize) {
        let cols = match self.panels {
            0 | 1 => 1,
            2 | 4 => 2,
            _ => 3,
        };
        (cols, self.panels.div_ceil(cols).max(1))
    }

    fn width(&self) -> u32 {
        let (cols, _) = self.grid();
        cols as u32 * panel_size(cols).0 + LEGEND_W
    }

    fn chars(&self) -> usize {
        ((self.width() - 24) / CHAR_W) as usize
    }

    fn subtitle_lines(&self) -> Vec<String> {
        if self.subtitle.is_empty() {
            Vec::new()
        } else {
            wrap(&self.subtitle, self.chars())
        }
    }

    fn note_lines(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        if notes.len() > MAX_NOTES {
            let more = notes.len() - (MAX_NOTES - 1);
            notes.truncate(MAX_NOTES - 1);
            notes.push(format!(
                "... and {more} more (qfwd-latency report prints them all)"
            ));
        }
        notes.iter().flat_map(|n| wrap(n, self.chars())).collect()
    }

    fn legend_height(&self) -> u32 {
        let entries: u32 = self
            .legend
            .iter()
            .map(|e| wrap(&e.label, LEGEND_CHARS).len() as u32 * LINE_H + 8)
            .sum();
        20 + self.key.len() as u32 * LINE_H + 10 + entries
    }

    fn head_height(&self) -> u32 {
        40 + self.subtitle_lines().len() as u32 * 18 + 6
    }

    /// The figure's pixel size.
    pub fn size(&self) -> (u32, u32) {
        let (cols, rows) = self.grid();
        let body = (rows as u32 * panel_size(cols).1).max(self.legend_height());
        let notes = self.note_lines().len() as u32 * NOTE_H;
        (self.width(), self.head_height() + body + notes + 14)
    }

    /// Draws the frame on `root` (sized by [`Frame::size`]) and returns one area per panel.
    pub fn draw<'b>(&self, root: &Area<'b>, path: &Path) -> Result<Vec<Area<'b>>> {
        let err = |e: plotters::drawing::DrawingAreaErrorKind<_>| plot_err(path, e);
        root.fill(&WHITE).map_err(err)?;
        let text = |s: &str, (x, y): (i32, i32), size: u32, gray: bool| {
            let font = ("sans-serif", size).into_font();
            let color = if gray { RGBColor(80, 80, 80) } else { BLACK };
            root.draw(&Text::new(s.to_string(), (x, y), font.color(&color)))
                .map_err(err)
        };
        text(&self.title, (12, 10), 20, false)?;
        for (i, line) in self.subtitle_lines().iter().enumerate() {
            text(line, (12, 40 + 18 * i as i32), 14, true)?;
        }
        let (_, h) = root.dim_in_pixel();
        let notes = self.note_lines();
        let notes_top = h as i32 - (notes.len() as u32 * NOTE_H + 8) as i32;
        for (i, n) in notes.iter().enumerate() {
            text(n, (12, notes_top + (i as u32 * NOTE_H) as i32), 13, true)?;
        }
        let (cols, _) = self.grid();
        let (pw, ph) = panel_size(cols);
        let top = self.head_height() as i32;
        let legend_x = (cols as u32 * pw) as i32 + 10;
        let mut y = top + 20;
        for line in &self.key {
            text(line, (legend_x, y), 13, true)?;
            y += LINE_H as i32;
        }
        y += 10;
        for e in &self.legend {
            draw_legend_entry(root, e, (legend_x, y), path)?;
            for line in wrap(&e.label, LEGEND_CHARS) {
                text(&line, (legend_x + 40, y), 13, false)?;
                y += LINE_H as i32;
            }
            y += 8;
        }
        let mut cells = Vec::with_capacity(self.panels);
        for i in 0..self.panels {
            let (c, r) = ((i % cols) as i32, (i / cols) as i32);
            let x0 = c * pw as i32;
            let y0 = top + r * ph as i32;
            cells.push(root.clone().shrink((x0, y0), (pw, ph)));
        }
        Ok(cells)
    }
}

/// The swatch of a legend entry at `(x, y)` (its first text line's top): the line (two
/// for a p50/p99 pair: solid above dashed) with the marker on it.
fn draw_legend_entry(
    root: &Area<'_>,
    e: &LegendEntry,
    (x, y): (i32, i32),
    path: &Path,
) -> Result<()> {
    let err = |er: plotters::drawing::DrawingAreaErrorKind<_>| plot_err(path, er);
    let stroke = e.style.color.stroke_width(2);
    if e.two_lines {
        root.draw(&PathElement::new(vec![(x, y + 3), (x + 30, y + 3)], stroke))
            .map_err(err)?;
        for seg in [(x, x + 8), (x + 12, x + 20), (x + 24, x + 30)] {
            root.draw(&PathElement::new(
                vec![(seg.0, y + 14), (seg.1, y + 14)],
                stroke,
            ))
            .map_err(err)?;
        }
        draw_marker(root, (x + 15, y + 3), e.style, true)?;
        draw_marker(root, (x + 15, y + 14), e.style, false)
    } else {
        root.draw(&PathElement::new(vec![(x, y + 7), (x + 30, y + 7)], stroke))
            .map_err(err)?;
        draw_marker(root, (x + 15, y + 7), e.style, true)
    }
}

/// Splits a comma-separated label into lines of about `width` characters: at the commas
/// where it can (a line broken there ends with the comma), else at spaces, else inside a
/// word longer than a line.
pub fn wrap(label: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let len = |s: &str| s.chars().count();
    let mut lines: Vec<String> = Vec::new();
    for (i, part) in label.split(", ").enumerate() {
        if let Some(l) = lines.last_mut().filter(|l| len(l) + 2 + len(part) <= width) {
            l.push_str(", ");
            l.push_str(part);
            continue;
        }
        if i > 0 {
            if let Some(l) = lines.last_mut() {
                l.push(',');
            }
        }
        let mut line = String::new();
        for word in part.split(' ') {
            let chars: Vec<char> = word.chars().collect();
            for chunk in chars.chunks(width) {
                let w: String = chunk.iter().collect();
                if !line.is_empty() && len(&line) + 1 + len(&w) > width {
                    lines.push(std::mem::take(&mut line));
                }
                if !line.is_empty() {
                    line.push(' ');
                }
                line.push_str(&w);
            }
        }
        lines.push(line);
    }
    lines
}

/// Draws a panel's title (wrapped) at the top of `area`; returns the height it took.
pub fn draw_title(area: &Area<'_>, title: &str, path: &Path) -> Result<u32> {
    let (w, _) = area.dim_in_pixel();
    let lines = if title.is_empty() {
        Vec::new()
    } else {
        wrap(title, ((w - 70) / 8) as usize)
    };
    for (i, line) in lines.iter().enumerate() {
        area.draw(&Text::new(
            line.clone(),
            (60, 6 + 17 * i as i32),
            ("sans-serif", 14).into_font(),
        ))
        .map_err(|e| plot_err(path, e))?;
    }
    Ok(10 + 17 * lines.len() as u32)
}

pub fn plot_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Plot {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

/// Draws a figure: the frame, then `panels` on its panel areas, into an SVG string.
pub fn render(
    frame: &Frame,
    path: &Path,
    panels: impl for<'b> FnOnce(&Area<'b>, Vec<Area<'b>>) -> Result<()>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, frame.size()).into_drawing_area();
        let cells = frame.draw(&root, path)?;
        panels(&root, cells)?;
        root.present().map_err(|e| plot_err(path, e))?;
    }
    Ok(svg)
}
