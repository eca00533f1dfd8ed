//! What a newcomer meets first: `qfwd --help` in plain words, `qfwd run -h` short and
//! grouped with `--help` the long form, examples in every command we own, and one
//! start-up line per decoder.
#![forbid(unsafe_code)]

use std::process::{Command, Output};

fn qfwd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("qfwd runs")
}

fn stdout(args: &[&str]) -> String {
    let out = qfwd(args);
    assert!(out.status.success(), "qfwd {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The headings of `qfwd run --help`, in the order they appear; the common flags come
/// first, under clap's `Options:`.
const HEADINGS: &[&str] = &[
    "Options:",
    "Output and scripts:",
    "Limits and overload:",
    "GPU:",
    "NIC and data path:",
    "Decoder:",
    "Streams (many logical qubits):",
];

#[test]
fn qfwd_help_opens_in_plain_words() {
    let help = stdout(&["--help"]);
    let opening: String = help.split("\n\n").take(2).collect::<Vec<_>>().join(" ");
    for jargon in ["CUQR", "CUQS", "FNV", "function_id"] {
        assert!(
            !opening.contains(jargon),
            "{jargon} in the opening:\n{opening}"
        );
    }
    assert!(opening.contains("QPU controller") && opening.contains("decod"));
    assert!(
        help.contains("qfwd-latency"),
        "names the harness and its quick start"
    );
    assert!(help.contains("Examples:"));
}

#[test]
fn run_help_is_grouped_with_the_common_flags_first() {
    let long = stdout(&["run", "--help"]);
    let mut at = 0;
    for h in HEADINGS {
        let found = long[at..]
            .find(&format!("\n{h}\n"))
            .unwrap_or_else(|| panic!("heading {h:?} missing or out of order:\n{long}"));
        at += found + 1;
    }
    let common =
        &long[long.find("\nOptions:\n").unwrap()..long.find("\nOutput and scripts:\n").unwrap()];
    for flag in [
        "--config",
        "--listen",
        "--transport",
        "--topology",
        "--decoder",
        "--dem",
        "--cores",
        "--duration",
    ] {
        assert!(
            common.contains(flag),
            "{flag} is not among the common flags"
        );
    }
    let streams = &long[long.find("\nStreams (many logical qubits):\n").unwrap()..];
    assert!(streams.contains("--stream-engine") && streams.contains("--window"));
    assert!(long.contains("Examples"), "run --help has examples");
}

#[test]
fn run_short_help_is_a_summary_of_the_long_one() {
    let short = stdout(&["run", "-h"]);
    let long = stdout(&["run", "--help"]);
    let lines = |s: &str| s.lines().count();
    assert!(
        lines(&short) * 2 < lines(&long),
        "-h has {} lines, --help {}",
        lines(&short),
        lines(&long)
    );
    // Every flag -h shows is in --help; the finer tuning only in --help.
    for flag in ["--listen", "--decoder", "--streams", "--topology"] {
        assert!(short.contains(flag) && long.contains(flag), "{flag}");
    }
    for tuning in [
        "--uf-split-max-defects",
        "--pollers-per-slot",
        "--exit-with-parent",
    ] {
        assert!(!short.contains(tuning) && long.contains(tuning), "{tuning}");
    }
    // One line per flag in -h: no paragraph of details.
    assert!(!short.contains("1 ..= 65536"), "details belong to --help");
    assert!(long.contains("1 ..= 65536"));
    assert!(short.contains("Examples"), "-h keeps the examples");
}

#[test]
fn every_command_has_examples() {
    for cmd in ["run", "doctor"] {
        let help = stdout(&[cmd, "--help"]);
        assert!(
            help.contains("Examples"),
            "qfwd {cmd} --help has no examples"
        );
    }
}

#[test]
fn help_examples_do_not_pin_a_core_a_two_core_laptop_lacks() {
    for cmd in ["run", "doctor"] {
        let help = stdout(&[cmd, "--help"]);
        let examples = &help[help.find("Examples").unwrap()..];
        for line in examples.lines().filter(|l| l.contains("--cores")) {
            let cores = line
                .split("--cores ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap();
            assert!(
                cores.split(',').all(|c| c.parse::<usize>().unwrap() <= 1),
                "`{}` needs more than two cores",
                line.trim()
            );
        }
    }
}

#[test]
fn a_decoder_is_announced_once_at_start() {
    let out = qfwd(&[
        "run",
        "--decoder",
        "uf",
        "--dem",
        "tests/fixtures/surface_d5_r5_z_p001.dem",
        "--listen",
        "127.0.0.1:0",
        "--duration",
        "0.2",
        "--stats-interval",
        "0",
        "--idle",
        "yield",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr.matches("decoder uf for").count(),
        1,
        "the decoder's start-up line:\n{stderr}"
    );
    assert_eq!(stderr.matches("qfwd: serving").count(), 1, "{stderr}");
}
