//! `qfwd decode` logic (`qfwd::decode_cli`): reports, JSON, and clear errors; predicting to
//! files and pipes, PyMatching's flag names, observables appended to the shots, models of
//! more than 64 observables, batches on several threads. PyMatching's forms (`predict`,
//! `count_mistakes`) in [`forms`], against PyMatching itself in [`pymatching_cli`]; what
//! is refused and what a refusal leaves behind in [`refusals`].
#![forbid(unsafe_code)]

#[path = "decode_cli/forms.rs"]
mod forms;
#[path = "decode_cli/pymatching_cli.rs"]
mod pymatching_cli;
#[path = "decode_cli/refusals.rs"]
mod refusals;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use qfwd::decode::{DecoderKind, ShotFormat, Shots};
use qfwd::decode_cli::{
    evaluate, predict, DecodeArgs, DecodeBackend, OutputFormat, DEFAULT_DECODER,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn args(name: &str, decoder: DecoderKind) -> DecodeArgs {
    DecodeArgs {
        obs: Some(fixture(&format!("{name}.obs.01"))),
        decoder,
        format: OutputFormat::Json,
        ..DecodeArgs::new(
            fixture(&format!("{name}.dem")),
            fixture(&format!("{name}.b8")),
        )
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
    // The matching decoder makes PyMatching's mistakes (a minimum-weight matching too).
    let r = evaluate(&args("surface_d5_r5_x_p005", DecoderKind::Matching)).unwrap();
    assert_eq!(r.decoder, DecoderKind::Matching);
    assert!(r.mistakes.abs_diff(311) <= 2, "{}", r.mistakes);
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
        obs: Some(short),
        ..args("surface_d3_r3_z_p005", DecoderKind::Uf)
    };
    let e = evaluate(&a).unwrap_err().to_string();
    assert!(
        e.contains("short.obs.01 ends after 2 shots") && e.contains("same sampling run"),
        "{e}"
    );

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

    // The matching decoder on the GPU backend: refused, with or without a GPU, naming uf.
    let a = DecodeArgs {
        backend: DecodeBackend::Gpu,
        ..args("surface_d3_r3_z_p005", DecoderKind::Matching)
    };
    let e = evaluate(&a).unwrap_err().to_string();
    assert!(e.contains("CPU only") && e.contains("--decoder uf"), "{e}");
    // It is the default: the refusal says so, for a command line that named no decoder.
    let a = DecodeArgs {
        backend: DecodeBackend::Gpu,
        ..DecodeArgs::new(
            fixture("surface_d3_r3_z_p005.dem"),
            fixture("surface_d3_r3_z_p005.b8"),
        )
    };
    let e = evaluate(&a).unwrap_err().to_string();
    assert!(
        e.contains("matching decoder, qfwd decode's default")
            && e.contains("CPU only")
            && e.contains("Add --decoder uf"),
        "{e}"
    );

    // A missing file is named.
    let a = DecodeArgs {
        dem: fixture("nope.dem"),
        ..args("surface_d3_r3_z_p005", DecoderKind::Uf)
    };
    let e = evaluate(&a).unwrap_err().to_string();
    assert!(e.contains("nope.dem"), "{e}");
}

/// `qfwd decode ARGS` as its command line parses them (`args` without the program name).
fn parse(args: &[&str]) -> Result<DecodeArgs, clap::Error> {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        decode: DecodeArgs,
    }
    let argv = std::iter::once("qfwd").chain(args.iter().copied());
    <Cli as clap::Parser>::try_parse_from(argv).map(|c| c.decode)
}

#[test]
fn clap_parses_the_documented_command_line() {
    let c = parse(&[
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
    assert_eq!(c.decoder, DecoderKind::Lut);
    assert_eq!(c.backend, DecodeBackend::Gpu);
    assert_eq!(c.format, OutputFormat::Json);
    let c = parse(&[
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
    assert_eq!(c.backend, DecodeBackend::Cpu);
    assert_eq!(c.format, OutputFormat::Text);
    assert!(parse(&["--dem", "F.dem", "--decoder", "mwpm"]).is_err());
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
                window: Some((4, 2)),
                ..args("surface_d5_r5_z_p005", DEFAULT_DECODER)
            },
            "--window decodes with uf only: add --decoder uf (the matching decoder",
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

/// Predictions written by predict mode equal those the counting mode computes, in both
/// formats, on any number of threads, with a shot limit.
#[test]
fn predict_writes_what_counting_predicts_on_any_number_of_threads() {
    let name = "surface_d5_r5_z_p005";
    let counted = evaluate(&args(name, DEFAULT_DECODER)).unwrap();
    for (threads, format, ext) in [(1, ShotFormat::Zero1, "01"), (3, ShotFormat::B8, "b8")] {
        let out = tmp(&format!("predict-{threads}.{ext}"));
        let a = DecodeArgs {
            predictions: Some(out.clone()),
            threads,
            ..DecodeArgs::new(
                fixture(&format!("{name}.dem")),
                fixture(&format!("{name}.b8")),
            )
        };
        assert!(!a.counts_mistakes());
        assert_eq!(predict(&a).unwrap(), counted.shots as usize);
        let p = Shots::read(&out, 1, Some(format)).unwrap();
        assert_eq!(p, counted.predictions, "{threads} threads, {ext}");
    }
    let out = tmp("predict-limit.01");
    let a = DecodeArgs {
        predictions: Some(out.clone()),
        shots: Some(5000),
        ..DecodeArgs::new(
            fixture(&format!("{name}.dem")),
            fixture(&format!("{name}.b8")),
        )
    };
    assert_eq!(predict(&a).unwrap(), 5000);
    assert_eq!(Shots::read(&out, 1, None).unwrap().len(), 5000);
}

fn qfwd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qfwd"))
}

/// Runs `qfwd decode ARGS` with `stdin` piped in; returns (status, stdout, stderr).
fn run_with_stdin(args: &[&str], stdin: &[u8]) -> (bool, Vec<u8>, String) {
    let mut child = qfwd()
        .arg("decode")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    (
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A Stim pipeline: shots on stdin, predictions on stdout, PyMatching's flag names; and
/// counting with the predictions on stdout puts the report on stderr.
#[test]
fn stdin_to_stdout_with_pymatching_flags() {
    let name = "surface_d3_r3_z_p005";
    let dem = fixture(&format!("{name}.dem"));
    let b8 = std::fs::read(fixture(&format!("{name}.b8"))).unwrap();
    let counted = evaluate(&DecodeArgs {
        shots: Some(2000),
        ..args(name, DEFAULT_DECODER)
    })
    .unwrap();
    let nb = 3; // 24 detectors
    let (ok, stdout, stderr) = run_with_stdin(
        &[
            "--dem",
            dem.to_str().unwrap(),
            "--in",
            "-",
            "--in_format",
            "b8",
            "--out",
            "-",
            "--out_format",
            "01",
        ],
        &b8[..2000 * nb],
    );
    assert!(ok, "{stderr}");
    assert_eq!(stdout, counted.predictions.to_01().into_bytes());
    assert!(stderr.is_empty(), "{stderr}");
    // b8 out, the dashed flag names.
    let (ok, stdout, stderr) = run_with_stdin(
        &[
            "--dem",
            dem.to_str().unwrap(),
            "--in",
            "-",
            "--in-format",
            "b8",
            "--out-format",
            "b8",
        ],
        &b8[..2000 * nb],
    );
    assert!(ok, "{stderr}");
    assert_eq!(stdout, counted.predictions.as_b8());
    // Counting from stdin with the observables in a file; predictions to stdout, the
    // report to stderr.
    let obs = fixture(&format!("{name}.obs.01"));
    let (ok, stdout, stderr) = run_with_stdin(
        &[
            "--dem",
            dem.to_str().unwrap(),
            "--dets",
            "-",
            "--dets-format",
            "b8",
            "--obs_in",
            obs.to_str().unwrap(),
            "--shots",
            "2000",
            "--out",
            "-",
            "--format",
            "json",
        ],
        &b8,
    );
    assert!(ok, "{stderr}");
    assert_eq!(stdout, counted.predictions.to_01().into_bytes());
    assert!(
        stderr.contains(&format!("\"mistakes\":{}", counted.mistakes))
            && stderr.contains("\"shots\":2000"),
        "{stderr}"
    );
    // A truncated b8 stream is an error that names stdin and the model.
    let (ok, _, stderr) = run_with_stdin(
        &[
            "--dem",
            dem.to_str().unwrap(),
            "--in",
            "-",
            "--in_format",
            "b8",
        ],
        &b8[..10],
    );
    assert!(
        !ok && stderr.contains("stdin") && stderr.contains("24 detectors"),
        "{stderr}"
    );
}

/// `--in-includes-appended-observables`: Stim's shots with the observables after the
/// detectors count the same mistakes as the two files.
#[test]
fn appended_observables_count_like_their_own_file() {
    let name = "surface_d3_r3_x_p005";
    let dets = Shots::read(&fixture(&format!("{name}.b8")), 24, None).unwrap();
    let obs = Shots::read(&fixture(&format!("{name}.obs.01")), 1, None).unwrap();
    let mut both = Shots::new(25);
    for i in 0..dets.len() {
        let mut bits: Vec<bool> = (0..24).map(|k| dets.get(i, k)).collect();
        bits.push(obs.get(i, 0));
        both.push_bits(&bits);
    }
    let path = tmp("appended.b8");
    both.write(&path, ShotFormat::B8).unwrap();
    let separate = evaluate(&args(name, DEFAULT_DECODER)).unwrap();
    let appended = evaluate(&DecodeArgs {
        appended_observables: true,
        obs: None,
        format: OutputFormat::Json,
        ..DecodeArgs::new(fixture(&format!("{name}.dem")), &path)
    })
    .unwrap();
    assert_eq!(
        (appended.mistakes, appended.shots),
        (separate.mistakes, separate.shots)
    );
    assert_eq!(appended.predictions, separate.predictions);
    // Without observables there is nothing to count against.
    let e = evaluate(&DecodeArgs::new(fixture(&format!("{name}.dem")), &path))
        .unwrap_err()
        .to_string();
    assert!(e.contains("--obs") && e.contains("appended"), "{e}");
}

/// A model of 301 observables (the fixture's L0 also L100 and L300): every observable is
/// predicted and counted, bit 100 and bit 300 as bit 0.
#[test]
fn models_past_64_observables_predict_and_count_every_observable() {
    let name = "surface_d3_r3_z_p005";
    let text = std::fs::read_to_string(fixture(&format!("{name}.dem"))).unwrap();
    let dem = tmp("wide.dem");
    std::fs::write(&dem, text.replace(" L0", " L0 L100 L300")).unwrap();
    let narrow = evaluate(&args(name, DecoderKind::Uf)).unwrap();
    let out = tmp("wide.01");
    let a = DecodeArgs {
        predictions: Some(out.clone()),
        ..DecodeArgs::new(&dem, fixture(&format!("{name}.b8")))
    };
    // The default decoder, matching, holds 64 observables and says what to use instead.
    let e = predict(&a).unwrap_err().to_string();
    assert!(
        e.contains("at most 64 observables") && e.contains("--decoder uf"),
        "{e}"
    );
    let a = DecodeArgs {
        decoder: DecoderKind::Uf,
        ..a
    };
    predict(&a).unwrap();
    let wide = Shots::read(&out, 301, None).unwrap();
    assert_eq!(wide.len(), narrow.predictions.len());
    for i in 0..wide.len() {
        let bit = narrow.predictions.get(i, 0);
        assert_eq!(
            (wide.get(i, 0), wide.get(i, 100), wide.get(i, 300)),
            (bit, bit, bit)
        );
    }
    // Counting against observables of 301 bits: L100 and L300 copy L0.
    let obs = Shots::read(&fixture(&format!("{name}.obs.01")), 1, None).unwrap();
    let mut wide_obs = Shots::new(301);
    for i in 0..obs.len() {
        let mut bits = vec![false; 301];
        (bits[0], bits[100], bits[300]) = (obs.get(i, 0), obs.get(i, 0), obs.get(i, 0));
        wide_obs.push_bits(&bits);
    }
    let obs_path = tmp("wide.obs.b8");
    wide_obs.write(&obs_path, ShotFormat::B8).unwrap();
    let r = evaluate(&DecodeArgs {
        obs: Some(obs_path),
        decoder: DecoderKind::Uf,
        ..DecodeArgs::new(&dem, fixture(&format!("{name}.b8")))
    })
    .unwrap();
    assert_eq!((r.observables, r.mistakes), (301, narrow.mistakes));
}

#[test]
fn pymatching_flag_names_parse_beside_qfwd_s() {
    let d = parse(&[
        "--dem",
        "F.dem",
        "--in",
        "-",
        "--in_format",
        "b8",
        "--out",
        "P.b8",
        "--out_format",
        "01",
        "--obs_in",
        "O.01",
        "--obs_in_format",
        "01",
        "--in_includes_appended_observables",
        "--threads",
        "2",
    ])
    .unwrap();
    assert_eq!(d.dets, PathBuf::from("-"));
    assert_eq!(d.dets_format, Some(ShotFormat::B8));
    assert_eq!(d.predictions, Some(PathBuf::from("P.b8")));
    assert_eq!(d.out_format, Some(ShotFormat::Zero1));
    assert_eq!(d.obs, Some(PathBuf::from("O.01")));
    assert_eq!(d.obs_format, Some(ShotFormat::Zero1));
    assert!(d.appended_observables && d.counts_mistakes());
    assert_eq!((d.threads, d.decoder), (2, DecoderKind::Matching));
    let c = parse(&["--dem", "F.dem", "--in", "F.b8"]).unwrap();
    assert!(!c.counts_mistakes());
    assert!(parse(&["--dem", "F.dem", "--in", "F.b8", "--threads", "0"]).is_err());
}
