//! The plots' axes: a linear f64 axis with our own ticks (log10 values where the scale is
//! logarithmic), and the tick values and labels for latency and request rate.
#![forbid(unsafe_code)]

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;

/// A linear f64 axis with explicit ticks. Both plots put already-transformed values on it
/// (log10 where the axis is logarithmic) so tick positions and labels are ours to choose;
/// plotters' own `WithKeyPoints` over f64 has no value formatter, hence this small type.
pub(crate) struct TickedAxis {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) ticks: Vec<f64>,
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        let frac = if span > 0.0 {
            (value - self.lo) / span
        } else {
            0.5
        };
        // `as` saturates, so a wild value lands off the plot instead of overflowing.
        limit.0 + (f64::from(limit.1 - limit.0) * frac).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Bold ticks only: no light grid between them.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// A log10 latency axis (µs) spanning `lo..hi`, with 1-2-5 ticks (only powers of ten when
/// it spans more than three decades).
pub(crate) fn latency_axis(lo: f64, hi: f64) -> TickedAxis {
    let (lo, hi) = match (lo.is_finite() && lo > 0.0, hi.is_finite() && hi > lo) {
        (true, true) => (lo, hi),
        (true, false) => (lo, lo * 10.0),
        _ => (1.0, 10.0),
    };
    let (a, b) = ((lo * 0.9).log10(), (hi * 1.1).log10());
    let mut ticks = log_ticks(10f64.powf(a), 10f64.powf(b));
    if b - a > 3.0 {
        ticks.retain(|t| (t - t.round()).abs() < 1e-9);
    }
    if ticks.len() < 3 {
        // Less than a decade: 1-2-5 may leave one tick; a finer ladder gives a scale.
        ticks = ticks_with(
            10f64.powf(a),
            10f64.powf(b),
            &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0],
        );
    }
    TickedAxis {
        lo: a,
        hi: b,
        ticks,
    }
}

/// `0.5`, `2`, `15`, `300`, `2000`: a latency tick in µs.
pub(super) fn format_us(log_us: f64) -> String {
    let us = 10f64.powf(log_us);
    if us >= 10.0 {
        format!("{us:.0}")
    } else if us >= 1.0 {
        let s = format!("{us:.1}");
        s.trim_end_matches(".0").to_string()
    } else {
        let s = format!("{us:.2}");
        s.trim_end_matches('0').to_string()
    }
}

/// `1.5k`, `2M`, `800`: compact request rates for tick labels.
pub fn format_rate(hz: f64) -> String {
    let (v, unit) = if hz.abs() >= 1e6 {
        (hz / 1e6, "M")
    } else if hz.abs() >= 1e3 {
        (hz / 1e3, "k")
    } else {
        (hz, "")
    };
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{unit}")
}

/// About six round-numbered ticks (1, 2 or 5 times a power of ten apart) in [lo, hi].
pub(super) fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = hi - lo;
    if span <= 0.0 || !span.is_finite() {
        return vec![lo];
    }
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = mag
        * match raw / mag {
            n if n <= 1.0 => 1.0,
            n if n <= 2.0 => 2.0,
            n if n <= 5.0 => 5.0,
            _ => 10.0,
        };
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 && out.len() < 100 {
        out.push(v);
        v += step;
    }
    out
}

/// log10 of the 1-2-5 values between lo and hi (both > 0).
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    ticks_with(lo, hi, &[1.0, 2.0, 5.0])
}

/// log10 of the values `m` x 10^k (each `m` of `mantissas`) between lo and hi.
fn ticks_with(lo: f64, hi: f64, mantissas: &[f64]) -> Vec<f64> {
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    let mut out = Vec::new();
    for e in first..=last {
        for &m in mantissas {
            let v = m * 10f64.powi(e);
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                out.push(v.log10());
            }
        }
    }
    out
}

/// The rate axis: log when the rates span more than a decade.
pub(super) fn rate_axis(lo: f64, hi: f64) -> (TickedAxis, bool) {
    if hi / lo > 10.0 {
        let (a, b) = (lo.log10(), hi.log10());
        let pad = (b - a) * 0.06;
        let (a, b) = (a - pad, b + pad);
        let ticks = log_ticks(10f64.powf(a), 10f64.powf(b));
        (
            TickedAxis {
                lo: a,
                hi: b,
                ticks,
            },
            true,
        )
    } else {
        let pad = ((hi - lo) * 0.08).max(lo * 0.1);
        let (a, b) = ((lo - pad).max(0.0), hi + pad);
        (
            TickedAxis {
                lo: a,
                hi: b,
                ticks: linear_ticks(a, b),
            },
            false,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_axis_has_a_scale_even_within_a_decade() {
        let labels = |lo: f64, hi: f64| -> Vec<String> {
            latency_axis(lo, hi)
                .ticks
                .iter()
                .map(|t| format_us(*t))
                .collect()
        };
        assert_eq!(labels(12_000.0, 33_000.0), ["15000", "20000", "30000"]);
        assert_eq!(
            labels(0.4, 200.0),
            ["0.5", "1", "2", "5", "10", "20", "50", "100", "200"]
        );
        assert_eq!(labels(1.0, 50_000.0), ["1", "10", "100", "1000", "10000"]);
    }
}
