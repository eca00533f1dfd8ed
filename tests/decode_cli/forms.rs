//! `qfwd decode predict` and `qfwd decode count_mistakes`: PyMatching's flags and defaults,
//! every shot format in and out, stdin and stdout, `N / M`; the same answers as the report
//! form.

use std::path::PathBuf;

use qfwd::decode::shots::ShotLayout;
use qfwd::decode::{DecoderKind, ShotFormat, ShotWriter, Shots};
use qfwd::decode_cli::pymatching::{count_mistakes, predict};
use qfwd::decode_cli::{
    evaluate, CountMistakesArgs, DecodeBackend, DecodeCli, DecodeCommand, DecoderChoice,
    PredictArgs, DEFAULT_DECODER,
};

use super::{args, fixture, run_with_stdin, tmp};

/// `qfwd decode ARGS` as its command line parses them.
fn parse(args: &[&str]) -> Result<DecodeCli, clap::Error> {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        decode: DecodeCli,
    }
    let argv = std::iter::once("qfwd").chain(args.iter().copied());
    <Cli as clap::Parser>::try_parse_from(argv).map(|c| c.decode)
}

fn predict_args(dem: PathBuf, input: Option<PathBuf>, out: Option<PathBuf>) -> PredictArgs {
    PredictArgs {
        dem,
        input,
        in_format: None,
        appended_observables: false,
        out,
        out_format: None,
        enable_correlations: false,
        decoder: DecoderChoice::default(),
    }
}

/// `count_mistakes` arguments; the count goes to a file (the test's stdout is not the
/// place).
fn count_args(dem: PathBuf, input: PathBuf, obs_in: Option<PathBuf>) -> CountMistakesArgs {
    CountMistakesArgs {
        dem,
        input: Some(input),
        in_format: None,
        appended_observables: false,
        obs_in,
        obs_in_format: None,
        out: Some(tmp("count.txt")),
        time: false,
        enable_correlations: false,
        decoder: DecoderChoice::default(),
    }
}

#[test]
fn the_subcommands_parse_pymatching_s_flags_and_defaults() {
    let c = parse(&[
        "predict",
        "--dem",
        "F.dem",
        "--in",
        "F.r8",
        "--in_format",
        "r8",
        "--out=P.hits",
        "--out_format",
        "hits",
        "--in_includes_appended_observables",
        "--threads",
        "2",
    ])
    .unwrap();
    let Some(DecodeCommand::Predict(p)) = c.command else {
        panic!("{c:?}")
    };
    assert_eq!(p.input, Some(PathBuf::from("F.r8")));
    assert_eq!(
        (p.in_format, p.out_format),
        (Some(ShotFormat::R8), Some(ShotFormat::Hits))
    );
    assert_eq!(p.out, Some(PathBuf::from("P.hits")));
    assert!(p.appended_observables && !p.enable_correlations);
    assert_eq!(p.decoder.threads, 2);
    // Left out: stdin, stdout, the default decoder on the CPU.
    let c = parse(&["predict", "--dem", "F.dem"]).unwrap();
    let Some(DecodeCommand::Predict(p)) = c.command else {
        panic!("{c:?}")
    };
    assert_eq!((p.input, p.out, p.in_format), (None, None, None));
    assert_eq!(p.decoder, DecoderChoice::default());

    for name in ["count_mistakes", "count-mistakes"] {
        let c = parse(&[
            name,
            "--dem",
            "F.dem",
            "--in-format",
            "dets",
            "--obs_in",
            "O.b8",
            "--obs-in-format",
            "b8",
            "--out",
            "S.txt",
            "--time",
            "--decoder",
            "lut",
            "--backend",
            "gpu",
        ])
        .unwrap();
        let Some(DecodeCommand::CountMistakes(m)) = c.command else {
            panic!("{c:?}")
        };
        assert_eq!(
            (m.in_format, m.obs_in_format),
            (Some(ShotFormat::Dets), Some(ShotFormat::B8))
        );
        assert_eq!(
            (m.obs_in, m.out),
            (Some("O.b8".into()), Some("S.txt".into()))
        );
        assert!(m.time);
        assert_eq!(
            (m.decoder.decoder, m.decoder.backend),
            (DecoderKind::Lut, DecodeBackend::Gpu)
        );
    }

    // The report's flags still parse without a subcommand.
    let c = parse(&[
        "--dem", "F.dem", "--dets", "F.b8", "--obs", "F.01", "--window", "15,5",
    ])
    .unwrap();
    assert!(c.command.is_none() && c.report.unwrap().window == Some((15, 5)));

    for (bad, needle) in [
        (
            &["predict", "--dem", "F.dem", "--in_format", "B8"][..],
            "ptb64",
        ),
        (
            &["predict", "--dem", "F.dem", "--decoder", "nope"],
            "available",
        ),
        (
            &["predict", "--dem", "F.dem", "--window", "15,5"],
            "--window",
        ),
        (&["predict", "--in", "F.b8"], "--dem"),
        (
            &[
                "count_mistakes",
                "--dem",
                "F.dem",
                "--obs_in",
                "O",
                "--in_includes_appended_observables",
            ],
            "cannot be used",
        ),
        (&["--dem", "F.dem", "predict"], "predict"),
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains(needle), "{bad:?}: {e}");
    }
}

/// `name`'s first `shots` shots (a multiple of 64, for ptb64) written in every format
/// (`dets.FORMAT`, `obs.FORMAT`, `both.FORMAT`: observables appended), into a directory of
/// `test`'s own (tests run at once).
fn every_format(test: &str, name: &str, shots: usize) -> (PathBuf, Shots, Shots) {
    let dir = tmp(&format!("formats-{test}"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut dets = Shots::read(&fixture(&format!("{name}.b8")), 24, None).unwrap();
    let mut obs = Shots::read(&fixture(&format!("{name}.obs.01")), 1, None).unwrap();
    dets.truncate(shots);
    obs.truncate(shots);
    let mut both = Shots::new(25);
    for i in 0..shots {
        let mut bits: Vec<bool> = (0..24).map(|k| dets.get(i, k)).collect();
        bits.push(obs.get(i, 0));
        both.push_bits(&bits);
    }
    let both_layout = ShotLayout {
        detectors: 24,
        observables: 1,
    };
    for f in ShotFormat::ALL {
        let at = |what: &str| dir.join(format!("{what}.{f}"));
        dets.write(&at("dets"), f).unwrap();
        obs.write_layout(&at("obs"), ShotLayout::observables(1), f)
            .unwrap();
        both.write_layout(&at("both"), both_layout, f).unwrap();
    }
    (dir, dets, obs)
}

/// `shots` (one observable each) in `format`, as Stim writes predictions.
fn encoded(shots: &Shots, format: ShotFormat) -> Vec<u8> {
    let mut w = ShotWriter::with_layout(Vec::new(), ShotLayout::observables(1), format);
    for i in 0..shots.len() {
        w.write(shots.row(i)).unwrap();
    }
    w.finish().unwrap()
}

/// `predict` reads every format (the extension names it), with observables appended or
/// not, and writes every format: the report form's predictions, byte for byte as Stim
/// writes them.
#[test]
fn predict_reads_and_writes_every_format() {
    let name = "surface_d3_r3_z_p005";
    let (dir, _, _) = every_format("predict", name, 1024);
    let dem = fixture(&format!("{name}.dem"));
    let report = evaluate(&qfwd::decode_cli::DecodeArgs {
        shots: Some(1024),
        ..args(name, DEFAULT_DECODER)
    })
    .unwrap();
    for fin in ShotFormat::ALL {
        for (what, appended) in [("dets", false), ("both", true)] {
            for fout in ShotFormat::ALL {
                let out = dir.join(format!("pred-{what}-{fin}.{fout}"));
                let a = PredictArgs {
                    appended_observables: appended,
                    ..predict_args(
                        dem.clone(),
                        Some(dir.join(format!("{what}.{fin}"))),
                        Some(out.clone()),
                    )
                };
                assert_eq!(predict(&a).unwrap(), 1024, "{what}.{fin} -> {fout}");
                assert_eq!(
                    std::fs::read(&out).unwrap(),
                    encoded(&report.predictions, fout),
                    "{what}.{fin} -> {fout}"
                );
            }
        }
    }
}

/// `count_mistakes` counts what the report counts, whatever the formats, with the
/// observables in their own file or appended.
#[test]
fn count_mistakes_counts_what_the_report_counts() {
    let name = "surface_d3_r3_x_p005";
    let (dir, _, _) = every_format("count", name, 2048);
    let dem = fixture(&format!("{name}.dem"));
    let report = evaluate(&qfwd::decode_cli::DecodeArgs {
        shots: Some(2048),
        ..args(name, DEFAULT_DECODER)
    })
    .unwrap();
    let want = (report.mistakes, 2048);
    assert!(want.0 > 10, "{want:?}");
    for fin in ShotFormat::ALL {
        for fobs in ShotFormat::ALL {
            let a = count_args(
                dem.clone(),
                dir.join(format!("dets.{fin}")),
                Some(dir.join(format!("obs.{fobs}"))),
            );
            assert_eq!(count_mistakes(&a).unwrap(), want, "dets.{fin} obs.{fobs}");
        }
        let a = CountMistakesArgs {
            appended_observables: true,
            ..count_args(dem.clone(), dir.join(format!("both.{fin}")), None)
        };
        assert_eq!(count_mistakes(&a).unwrap(), want, "both.{fin}");
    }
    // Threads change nothing.
    let a = CountMistakesArgs {
        decoder: DecoderChoice {
            threads: 3,
            ..DecoderChoice::default()
        },
        ..count_args(dem, dir.join("dets.b8"), Some(dir.join("obs.01")))
    };
    assert_eq!(count_mistakes(&a).unwrap(), want);
}

/// As PyMatching reads them: `--in` left out is stdin, `--out` left out is stdout;
/// `predict` reads b8 and writes 01, `count_mistakes` reads 01 and prints `N / M`; `--out`
/// takes the count to a file; `--time` adds two lines on stderr.
#[test]
fn stdin_and_stdout_as_pymatching_reads_them() {
    let name = "surface_d3_r3_z_p005";
    let (dir, dets, obs) = every_format("stdio", name, 1024);
    let dem = fixture(&format!("{name}.dem"));
    let dem = dem.to_str().unwrap();
    let report = evaluate(&qfwd::decode_cli::DecodeArgs {
        shots: Some(1024),
        ..args(name, DEFAULT_DECODER)
    })
    .unwrap();
    let (ok, stdout, stderr) = run_with_stdin(&["predict", "--dem", dem], dets.as_b8());
    assert!(ok && stderr.is_empty(), "{stderr}");
    assert_eq!(stdout, report.predictions.to_01().into_bytes());
    let (ok, stdout, stderr) = run_with_stdin(
        &[
            "predict",
            "--dem",
            dem,
            "--in",
            "-",
            "--out",
            "-",
            "--out_format",
            "b8",
        ],
        dets.as_b8(),
    );
    assert!(ok, "{stderr}");
    assert_eq!(stdout, report.predictions.as_b8());

    let obs01 = dir.join("obs.01");
    let count = format!("{} / 1024\n", report.mistakes);
    let (ok, stdout, stderr) = run_with_stdin(
        &[
            "count_mistakes",
            "--dem",
            dem,
            "--obs_in",
            obs01.to_str().unwrap(),
        ],
        dets.to_01().as_bytes(),
    );
    assert!(ok && stderr.is_empty(), "{stderr}");
    assert_eq!(String::from_utf8(stdout).unwrap(), count);
    // The observables on stdin, the events from a file; the count to a file; timed.
    let stats = dir.join("stats.txt");
    let (ok, stdout, stderr) = run_with_stdin(
        &[
            "count_mistakes",
            "--dem",
            dem,
            "--in",
            dir.join("dets.dets").to_str().unwrap(),
            "--in_format",
            "dets",
            "--obs_in",
            "-",
            "--out",
            stats.to_str().unwrap(),
            "--time",
        ],
        obs.to_01().as_bytes(),
    );
    assert!(ok, "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&stats).unwrap(), count);
    assert!(
        stderr.contains("Total decoding time: ") && stderr.contains("Decoding time per shot: "),
        "{stderr}"
    );
    // No shots: PyMatching's `0 / 0`, and no predictions.
    let empty = dir.join("empty.obs.01");
    std::fs::write(&empty, "").unwrap();
    let (ok, stdout, stderr) = run_with_stdin(
        &[
            "count_mistakes",
            "--dem",
            dem,
            "--obs_in",
            empty.to_str().unwrap(),
        ],
        b"",
    );
    assert!(ok, "{stderr}");
    assert_eq!(stdout, b"0 / 0\n");
    let (ok, stdout, _) = run_with_stdin(&["predict", "--dem", dem], b"");
    assert!(ok && stdout.is_empty());
}
