//! Column values in words, for plot titles, legends and notes: `topology=gpu-persistent`
//! reads "GPU persistent kernel", `payload_bytes=32` "32 B requests". A value that does
//! not apply to its row (`-`, no pollers on a CPU row, no offered rate in ping-pong) reads
//! as nothing, so a label names only what the row is.
//!
//! The `decoder` column holds the model and, on a GPU, the options that change its speed
//! but not its answers (`uf:surface_d5_r5_z_p001+table`). Plots split it in two: `decoder`
//! (what is decoded, shared by the CPU and GPU rows of one model) and [`DECODER_OPTIONS`].
#![forbid(unsafe_code)]

use super::axis::format_rate;
use crate::report::Entry;

/// Pseudo column of the plots: the `+...` options of a `decoder` value.
pub const DECODER_OPTIONS: &str = "decoder_options";

/// `columns` with [`DECODER_OPTIONS`] after `decoder`, where `decoder` is one of them.
pub fn plot_columns(columns: &[&'static str]) -> Vec<&'static str> {
    let mut out = Vec::with_capacity(columns.len() + 1);
    for &c in columns {
        out.push(c);
        if c == "decoder" {
            out.push(DECODER_OPTIONS);
        }
    }
    out
}

/// The value of `column` in `entry` as the plots group it (see the module docs).
pub fn plot_value(entry: &Entry, column: &str) -> String {
    match column {
        "decoder" => split_decoder(&entry.value("decoder").unwrap_or_default()).0,
        DECODER_OPTIONS => split_decoder(&entry.value("decoder").unwrap_or_default()).1,
        c => entry.value(c).unwrap_or_default(),
    }
}

/// `uf:model+table+split<=8` -> (`uf:model`, `+table+split<=8`).
fn split_decoder(v: &str) -> (String, String) {
    match v.find('+') {
        Some(i) => (v[..i].to_string(), v[i..].to_string()),
        None => (v.to_string(), String::new()),
    }
}

/// `value` of `column` in words; `None` where the value does not apply.
pub fn words(column: &str, value: &str) -> Option<String> {
    let v = value.trim();
    if v.is_empty() || (v == "-" && column != "decoder") {
        return None;
    }
    let count = |one: &str, many: &str| {
        if v == "1" {
            format!("1 {one}")
        } else {
            format!("{v} {many}")
        }
    };
    Some(match column {
        "topology" => match v {
            "cpu" => "CPU core".into(),
            "gpu-persistent" => "GPU persistent kernel".into(),
            "gpu-launch" => "GPU, a launch per request".into(),
            "gpu-graph" => "GPU, a CUDA graph per request".into(),
            other => other.into(),
        },
        "data_path" => match v {
            "cpu-forwarded" => "CPU-forwarded".into(),
            "gpu-direct" => "GPU-direct".into(),
            other => other.into(),
        },
        "links" => count("link", "links"),
        "transport" => match v {
            "inproc" => "in-process ring".into(),
            "udp" => "UDP".into(),
            "softnic" => "soft NIC".into(),
            "rdma" => "RDMA".into(),
            other => other.into(),
        },
        "rx_completion" => format!("{v} completion"),
        "doorbell" => match v {
            "blueflame" => "BlueFlame doorbell".into(),
            "cpu-assisted" => "CPU-assisted doorbell".into(),
            other => format!("{other} doorbell"),
        },
        "pollers" if v == "0" => return None,
        "pollers" => count("poller", "pollers"),
        "pollers_per_slot" if v == "0" => return None,
        "pollers_per_slot" if v == "1" => "1 poller per slot".into(),
        "pollers_per_slot" => format!("{v} pollers per slot"),
        "decoder" => match v.split_once(':') {
            _ if v == "-" => "parity handler".into(),
            Some((kind, model)) => format!("{kind} decoder, {model}"),
            None => format!("{v} decoder"),
        },
        DECODER_OPTIONS => decoder_options(v),
        "payload_bytes" => format!("{v} B requests"),
        "mode" => match v {
            "ping-pong" => "ping-pong".into(),
            "open-loop" => "open loop".into(),
            other => other.into(),
        },
        "offered_rate_hz" | "achieved_rate_hz" => match v.parse::<f64>() {
            Ok(hz) if hz > 0.0 => format!("{} req/s", format_rate(hz)),
            _ => return None,
        },
        "rtt_or_oneway" => match v {
            "rtt" => "round trip".into(),
            "oneway" => "one way".into(),
            other => other.into(),
        },
        "cpu" => v.replace("(R)", "").replace("(TM)", "").replace("  ", " "),
        "gpu" | "nic" | "pcie_path" if v == "none" => return None,
        "gpu" => gpu_name(v),
        "nic" => format!("NIC {v}"),
        "pcie_path" => format!("PCIe {v}"),
        "host" => format!("host {v}"),
        "scenario" => format!("scenario {v}"),
        "gpus" => format!("GPUs {v}"),
        "functions" if v == "1" || v == "0" => return None,
        "functions" => format!("{v} functions"),
        "csv" => std::path::Path::new(v)
            .file_stem()
            .map_or_else(|| v.to_string(), |s| s.to_string_lossy().into_owned()),
        // The stream plot's columns.
        "engine" => match v {
            "cpu-pool" => "CPU pool".into(),
            "gpu" => "GPU persistent kernel".into(),
            "gpu-launch" => "GPU, a launch per batch".into(),
            "cpu-batched" => "CPU, batched".into(),
            other => other.into(),
        },
        "distance" => format!("d={v}"),
        "window" => format!("window {v}"),
        "commit" => format!("commit {v}"),
        "gpu_threads" => format!("{v} threads a window"),
        "round_ns" => match v.parse::<f64>() {
            Ok(ns) => format!("a round every {} µs", ns / 1000.0),
            Err(_) => format!("rounds {v} ns"),
        },
        other => format!("{other} {v}"),
    })
}

/// What `column` is, in words, for a title saying it does not apply.
pub fn noun(column: &str) -> &str {
    match column {
        "rx_completion" => "completion mode",
        "pollers_per_slot" => "pollers per slot",
        "payload_bytes" => "payload",
        "offered_rate_hz" => "offered rate",
        "data_path" => "data path",
        DECODER_OPTIONS => "decoder options",
        "rtt_or_oneway" => "latency kind",
        c => c,
    }
}

/// `+table+split<=32` -> "with table, split at most 32".
fn decoder_options(v: &str) -> String {
    v.split('+')
        .filter(|o| !o.is_empty())
        .map(|o| match o {
            "table" => "with table".to_string(),
            "no-table" => "no table".to_string(),
            o => match o.split_once("<=") {
                Some(("table", k)) => format!("table to {k} defects"),
                Some(("split", n)) => format!("split to {n} defects"),
                _ => o.to_string(),
            },
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `NVIDIA H200 sm_90 0000:00:06.0` -> `NVIDIA H200 (sm_90)`: the PCI address says which
/// card of a host, not what it is.
fn gpu_name(v: &str) -> String {
    let words: Vec<&str> = v
        .split_whitespace()
        .filter(|w| !(w.matches(':').count() == 2 && w.contains('.')))
        .collect();
    match words.split_last() {
        Some((arch, name)) if arch.starts_with("sm_") && !name.is_empty() => {
            format!("{} ({arch})", name.join(" "))
        }
        _ => words.join(" "),
    }
}

/// The words of `columns` (indices into `names`) for one row's `values`, joined by
/// commas; the columns that do not apply are left out.
pub fn describe(names: &[&str], columns: &[usize], values: &[String]) -> String {
    columns
        .iter()
        .filter_map(|&j| words(names[j], &values[j]))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_words_and_inapplicable_ones_as_nothing() {
        assert_eq!(
            words("topology", "gpu-persistent").unwrap(),
            "GPU persistent kernel"
        );
        assert_eq!(words("payload_bytes", "32").unwrap(), "32 B requests");
        assert_eq!(words("offered_rate_hz", "200000").unwrap(), "200k req/s");
        assert_eq!(words("offered_rate_hz", "0"), None);
        assert_eq!(words("pollers", "0"), None);
        assert_eq!(words("rx_completion", "-"), None);
        assert_eq!(words("links", "1").unwrap(), "1 link");
        assert_eq!(words("decoder", "-").unwrap(), "parity handler");
        assert_eq!(
            words("decoder", "uf:surface_d5_r5_z_p001").unwrap(),
            "uf decoder, surface_d5_r5_z_p001"
        );
        assert_eq!(
            words(DECODER_OPTIONS, "+table+split<=32").unwrap(),
            "with table, split to 32 defects"
        );
        assert_eq!(
            words("gpu", "NVIDIA H200 sm_90 0000:00:06.0").unwrap(),
            "NVIDIA H200 (sm_90)"
        );
        assert_eq!(
            words("cpu", "Intel(R) Xeon(R) Processor (16 cores)").unwrap(),
            "Intel Xeon Processor (16 cores)"
        );
        assert_eq!(words("round_ns", "10000").unwrap(), "a round every 10 µs");
        for (c, v) in [
            ("topology", "cpu"),
            ("mode", "open-loop"),
            ("engine", "gpu"),
        ] {
            assert!(!words(c, v).unwrap().contains('='), "{c}={v}");
        }
    }

    #[test]
    fn the_decoder_splits_into_what_is_decoded_and_how_fast() {
        assert_eq!(
            split_decoder("uf:surface_d7_r7_z_p001+table+split<=32"),
            (
                "uf:surface_d7_r7_z_p001".to_string(),
                "+table+split<=32".to_string()
            )
        );
        assert_eq!(split_decoder("-"), ("-".to_string(), String::new()));
        assert_eq!(
            plot_columns(&["topology", "decoder", "mode"]),
            ["topology", "decoder", DECODER_OPTIONS, "mode"]
        );
    }
}
