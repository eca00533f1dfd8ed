//! `qfwd decode` logic (`qfwd::decode_cli`): reports, JSON, and clear errors.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use qfwd::decode::window::MatchLimits;
use qfwd::decode::{DecoderKind, Shots};
use qfwd::decode_cli::{evaluate, DecodeArgs, DecodeBackend, OutputFormat};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn args(name: &str, decoder: DecoderKind) -> DecodeArgs {
    DecodeArgs {
        dem: fixture(&format!("{name}.dem")),
        dets: fixture(&format!("{name}.b8")),
        obs: fixture(&format!("{name}.obs.01")),
        decoder,
        backend: DecodeBackend::Cpu,
        format: OutputFormat::Json,
        dets_format: None,
        obs_format: None,
        shots: None,
        predictions: None,
        window: None,
        match_defects: MatchLimits::DEFAULT.defects,
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qfwd-decode-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn reports_mistakes_rate_interval_and_times() {
    let a = args("surface_d3_r3_z_p005", DecoderKind::Uf);
    let r = evaluate(&a).unwrap();
    assert_eq!(r.shots, 50_000);
    assert_eq!(r.detectors, 24);
    assert!(r.mistakes > 500 && r.mistakes < 1500, "{}", r.mistakes);
    assert!((r.ler - r.mistakes as f64 / 50_000.0).abs() < 1e-12);
    assert!(r.ci_low < r.ler && r.ler < r.ci_high);
    assert!(r.p50_ns <= r.p99_ns && r.p99_ns <= r.max_ns && r.mean_ns > 0.0);
    let j = r.to_json();
    for key in [
        "\"shots\":50000",
        "\"decoder\":\"uf\"",
        "\"backend\":\"cpu\"",
        "\"mistakes\":",
        "\"mean_ns\":",
        "\"p50_ns\":",
        "\"p99_ns\":",
        "\"ler\":",
        "\"ci_low\":",
        "\"ci_high\":",
    ] {
        assert!(j.contains(key), "{key} missing from {j}");
    }
    assert!(j.starts_with('{') && j.ends_with('}') && !j.contains('\n'));
    let t = r.to_text();
    assert!(
        t.contains("mistakes") && t.contains("95% CI") && t.contains("p99"),
        "{t}"
    );
}

#[test]
fn lut_and_uf_agree_with_the_stored_pymatching_count_on_a_small_model() {
    let meta: toml::Table = std::fs::read_to_string(fixture("rep_d3_r3_p005.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let pm = meta["pymatching_mistakes"].as_integer().unwrap() as u64;
    for kind in [DecoderKind::Lut, DecoderKind::Uf] {
        let r = evaluate(&args("rep_d3_r3_p005", kind)).unwrap();
        assert!(
            r.mistakes <= pm + 6,
            "{kind}: {} vs pymatching {pm}",
            r.mistakes
        );
    }
}

#[test]
fn shot_limit_and_predictions_file() {
    let out = tmp("pred.01");
    let a = DecodeArgs {
        shots: Some(1000),
        predictions: Some(out.clone()),
        ..args("surface_d3_r3_x_p001", DecoderKind::Uf)
    };
    let r = evaluate(&a).unwrap();
    assert_eq!(r.shots, 1000);
    let p = Shots::read(&out, 1, None).unwrap();
    assert_eq!(p.len(), 1000);
    assert_eq!(p, r.predictions);
}

#[test]
fn mismatched_inputs_are_clear_errors() {
    // Detection events of another model.
    let a = DecodeArgs {
        dets: fixture("surface_d3_r3_z_p005.b8"),
        ..args("surface_d7_r7_z_p005", DecoderKind::Uf)
    };
    let e = evaluate(&a).unwrap_err().to_string();
    assert!(
        e.contains("surface_d3_r3_z_p005.b8") && e.contains("336 detectors"),
        "{e}"
    );

    // Observables with fewer shots than the detection events.
    let short = tmp("short.obs.01");
    std::fs::write(&short, "0\n1\n").unwrap();
    let a = DecodeArgs {
        obs: short,
        ..args("surface_d3_r3_z_p005", DecoderKind::Uf)
    };
    let e = evaluate(&a).unwrap_err().to_string();
    assert!(e.contains("50000 shots") && e.contains("holds 2"), "{e}");

    // A lut for a model too large for it.
    let e = evaluate(&args("surface_d5_r5_z_p001", DecoderKind::Lut))
        .unwrap_err()
        .to_string();
    assert!(e.contains("at most 24") && e.contains("120"), "{e}");

    // The GPU backend on a host without a GPU says so (tests/gpu_decoders.rs runs it on
    // one).
    if let Some(why) = qfwd::gpu::unavailable_reason() {
        let a = DecodeArgs {
            backend: DecodeBackend::Gpu,
            ..args("surface_d3_r3_z_p005", DecoderKind::Uf)
        };
        let e = evaluate(&a).unwrap_err().to_string();
        assert!(
            e.contains("needs an NVIDIA GPU") && e.contains(&why) && e.contains("--backend cpu"),
            "{e}"
        );
    }

    // A missing file is named.
    let a = DecodeArgs {
        dem: fixture("nope.dem"),
        ..args("surface_d3_r3_z_p005", DecoderKind::Uf)
    };
    let e = evaluate(&a).unwrap_err().to_string();
    assert!(e.contains("nope.dem"), "{e}");
}

#[test]
fn clap_parses_the_documented_command_line() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        decode: DecodeArgs,
    }
    let c = Cli::try_parse_from([
        "qfwd",
        "--dem",
        "F.dem",
        "--dets",
        "F.b8",
        "--obs",
        "F.01",
        "--decoder",
        "lut",
        "--backend",
        "gpu",
        "--format",
        "json",
    ])
    .unwrap();
    assert_eq!(c.decode.decoder, DecoderKind::Lut);
    assert_eq!(c.decode.backend, DecodeBackend::Gpu);
    assert_eq!(c.decode.format, OutputFormat::Json);
    let c = Cli::try_parse_from([
        "qfwd",
        "--dem",
        "F.dem",
        "--dets",
        "F.01",
        "--obs",
        "F.b8",
        "--decoder",
        "uf",
        "--dets-format",
        "01",
    ])
    .unwrap();
    assert_eq!(c.decode.backend, DecodeBackend::Cpu);
    assert_eq!(c.decode.format, OutputFormat::Text);
    assert!(Cli::try_parse_from(["qfwd", "--dem", "F.dem", "--decoder", "mwpm"]).is_err());
}

#[test]
fn streams_decode_each_shot_in_windows() {
    let whole = evaluate(&DecodeArgs {
        shots: Some(5000),
        ..args("surface_d5_r5_z_p005", DecoderKind::Uf)
    })
    .unwrap();
    let a = DecodeArgs {
        shots: Some(5000),
        window: Some((4, 2)),
        ..args("surface_d5_r5_z_p005", DecoderKind::Uf)
    };
    let r = evaluate(&a).unwrap();
    // Five syndrome rounds: one window (rounds 0..4 commit 0..2), then the last window.
    assert_eq!(r.windows_per_shot, 2.0);
    assert_eq!(r.window, Some((4, 2)));
    let j = r.to_json();
    assert!(
        j.contains("\"window\":[4,2]") && j.contains("\"windows_per_shot\":2"),
        "{j}"
    );
    assert!(r.to_text().contains("windows of 4 rounds committing 2"));
    // A window's buffer of 2 rounds loses little against the whole experiment here.
    assert!(
        r.mistakes >= whole.mistakes * 9 / 10 && r.mistakes <= whole.mistakes * 13 / 10,
        "{} vs {}",
        r.mistakes,
        whole.mistakes
    );

    for (a, needle) in [
        (
            DecodeArgs {
                window: Some((4, 2)),
                ..args("surface_d3_r3_z_p005", DecoderKind::Lut)
            },
            "uf",
        ),
        (
            DecodeArgs {
                window: Some((2, 2)),
                ..args("surface_d5_r5_z_p005", DecoderKind::Uf)
            },
            "1 <= C < W",
        ),
        (
            DecodeArgs {
                window: Some((4, 2)),
                backend: DecodeBackend::Gpu,
                ..args("surface_d5_r5_z_p005", DecoderKind::Uf)
            },
            "--backend cpu",
        ),
    ] {
        let e = evaluate(&a).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
}
