//! What `qfwd decode`'s report mode measured, and how it prints it: lines for a person or
//! one JSON object.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::path::PathBuf;

use super::DecodeBackend;
use crate::decode::{DecoderKind, Shots};

/// What `qfwd decode` measured.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeReport {
    pub dem: PathBuf,
    pub decoder: DecoderKind,
    pub backend: DecodeBackend,
    pub detectors: usize,
    /// Detectors the decoder reads: a `uf` decoder's observable part
    /// ([`super::observable_part`]), else all of them.
    pub decoded_detectors: usize,
    pub observables: usize,
    pub edges: usize,
    pub shots: u64,
    pub mistakes: u64,
    /// mistakes / shots.
    pub ler: f64,
    /// Wilson 95% interval of the logical error rate.
    pub ci_low: f64,
    pub ci_high: f64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Wall time of the fastest untimed back-to-back pass / shots.
    pub batch_ns_per_shot: f64,
    /// Untimed back-to-back passes `batch_ns_per_shot` is the fastest of.
    pub batch_passes: u32,
    /// Parsing the model and building the decoder.
    pub setup_ms: f64,
    /// Predicted observable flips, one row per shot.
    pub predictions: Shots,
    /// `--window`: (W, C), and the windows a shot took on average (its commits).
    pub window: Option<(u32, u32)>,
    pub windows_per_shot: f64,
}

/// Wilson score interval for `k` successes in `n` trials at `z` standard deviations.
pub fn wilson_interval(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    ((center - half).max(0.0), (center + half).min(1.0))
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_f64(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".into()
    }
}

fn time(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

impl DecodeReport {
    /// What the per-shot times measure: `decode` (cpu) or `round_trip` (gpu: host to the
    /// persistent kernel and back, decode included).
    pub fn timing(&self) -> &'static str {
        match self.backend {
            DecodeBackend::Cpu => "decode",
            DecodeBackend::Gpu => "round_trip",
        }
    }

    /// One JSON object on one line.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"dem\":{},\"decoder\":\"{}\",\"backend\":\"{}\",\"detectors\":{},\"decoded_detectors\":{},\
             \"observables\":{},\"edges\":{},\"shots\":{},\"mistakes\":{},\"ler\":{},\"ci_low\":{},\"ci_high\":{},\
             \"mean_ns\":{},\"p50_ns\":{},\"p99_ns\":{},\"max_ns\":{},\"batch_ns_per_shot\":{},\
             \"batch_passes\":{},\"setup_ms\":{},\"timing\":\"{}\",\"window\":{},\"windows_per_shot\":{}}}",
            json_string(&self.dem.display().to_string()),
            self.decoder,
            self.backend.as_str(),
            self.detectors,
            self.decoded_detectors,
            self.observables,
            self.edges,
            self.shots,
            self.mistakes,
            json_f64(self.ler),
            json_f64(self.ci_low),
            json_f64(self.ci_high),
            json_f64((self.mean_ns * 10.0).round() / 10.0),
            self.p50_ns,
            self.p99_ns,
            self.max_ns,
            json_f64((self.batch_ns_per_shot * 10.0).round() / 10.0),
            self.batch_passes,
            json_f64((self.setup_ms * 1000.0).round() / 1000.0),
            self.timing(),
            self.window
                .map_or("null".to_string(), |(w, c)| format!("[{w},{c}]")),
            json_f64((self.windows_per_shot * 1000.0).round() / 1000.0),
        )
    }

    /// Lines for a person.
    pub fn to_text(&self) -> String {
        let stream = match self.window {
            Some((w, c)) => format!(
                "stream    windows of {w} rounds committing {c}: {:.1} windows per shot, \
                 {} per window (mean)\n",
                self.windows_per_shot,
                time(self.mean_ns / self.windows_per_shot.max(1.0))
            ),
            None => String::new(),
        };
        format!(
            "model     {}: {} detectors{}, {} observables, {} edges (loaded in {:.1} ms)\n\
             decoder   {} on {}\n\
             shots     {}\n\
             mistakes  {}\n\
             LER       {:.3e} per shot (95% CI {:.3e} .. {:.3e}, Wilson)\n\
             time      {}: mean {}, p50 {}, p99 {}, max {} per shot; {} per shot back to back \
             (fastest of {} passes)\n",
            self.dem.display(),
            self.detectors,
            if self.decoded_detectors < self.detectors {
                format!(
                    " ({} decoded: those whose components can flip an observable)",
                    self.decoded_detectors
                )
            } else {
                String::new()
            },
            self.observables,
            self.edges,
            self.setup_ms,
            self.decoder,
            self.backend.as_str(),
            self.shots,
            self.mistakes,
            self.ler,
            self.ci_low,
            self.ci_high,
            match self.backend {
                DecodeBackend::Cpu => "decode",
                DecodeBackend::Gpu => "round trip (host -> GPU -> host)",
            },
            time(self.mean_ns),
            time(self.p50_ns as f64),
            time(self.p99_ns as f64),
            time(self.max_ns as f64),
            time(self.batch_ns_per_shot),
            self.batch_passes,
        ) + &stream
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_known_values() {
        // 10 of 100 at 95%: (0.0552, 0.1744).
        let (lo, hi) = wilson_interval(10, 100, 1.959_963_984_540_054);
        assert!(
            (lo - 0.0552).abs() < 1e-4 && (hi - 0.1744).abs() < 1e-4,
            "{lo} {hi}"
        );
        let (lo, hi) = wilson_interval(0, 1000, 1.96);
        assert_eq!(lo, 0.0);
        assert!(hi > 0.003 && hi < 0.004, "{hi}");
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
