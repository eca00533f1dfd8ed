//! A careless operator's input: every number out of its range is refused at start with
//! an error naming the key, the value and the range; never a panic, never a giant
//! allocation, never a forwarder that floods the terminal.
use std::process::{Command, Output};

fn qfwd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args(args)
        .output()
        .expect("qfwd binary starts")
}

/// Runs `qfwd run ARGS` (on a port of its own) and returns its stderr, asserting it failed
/// cleanly: exit 1, no panic, no abort.
fn refused(args: &[&str]) -> String {
    let mut all = vec!["run", "--listen", "127.0.0.1:0"];
    // A bound on a run that was wrongly accepted.
    if !args.iter().any(|a| a.starts_with("--duration")) {
        all.extend(["--duration", "5"]);
    }
    all.extend_from_slice(args);
    let out = qfwd(&all);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("memory allocation"),
        "{err}"
    );
    err
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("qfwd-input-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn huge_batch_and_in_flight_are_refused_with_key_value_and_range() {
    let e = refused(&["--batch", "18446744073709551615"]);
    assert!(
        e.contains("batch") && e.contains("18446744073709551615") && e.contains("1 ..= 1024"),
        "{e}"
    );
    let e = refused(&["--batch", "100000000"]);
    assert!(e.contains("batch") && e.contains("100000000"), "{e}");
    let e = refused(&["--max-in-flight", "100000000"]);
    assert!(
        e.contains("max_in_flight") && e.contains("100000000") && e.contains("1 ..= 65536"),
        "{e}"
    );
    let e = refused(&["--slots", "1000000000"]);
    assert!(e.contains("slots") && e.contains("1 ..= 4096"), "{e}");
    let e = refused(&["--cores", "0,99999"]);
    assert!(e.contains("cores[1]") && e.contains("99999"), "{e}");
}

#[test]
fn huge_durations_and_tiny_stats_intervals_are_refused() {
    for d in ["1e30", "1e19", "inf", "NaN", "-1", "0"] {
        let e = refused(&[&format!("--duration={d}")]);
        assert!(
            e.contains("duration_s") && e.contains("31536000"),
            "{d}: {e}"
        );
    }
    let e = refused(&["--stats-interval", "1e-9"]);
    assert!(
        e.contains("stats_interval_s") && e.contains("0.1 ..= 86400 s, or 0 (off)"),
        "{e}"
    );
    let dir = temp_dir("toml");
    let p = dir.join("run.toml");
    std::fs::write(&p, "duration_s = 1e30\n").unwrap();
    let out = qfwd(&["run", "--config", p.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("duration_s") && e.contains("1000000000000000000000000000000"),
        "{e}"
    );
    std::fs::write(&p, "watchdog_us = 9000000000000000000\n").unwrap();
    let out = qfwd(&["run", "--config", p.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("watchdog_us") && e.contains("1 ..= 60000000 us"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_model_too_big_for_the_request_limit_is_refused_at_load_with_both_numbers() {
    // A chain of 40 000 detectors: a request carries 5 000 bytes of events + a u32 count.
    let dir = temp_dir("big-model");
    let dem = dir.join("chain40000.dem");
    let mut text = String::from("error(0.1) D0 L0\n");
    for i in 0..39_999 {
        text.push_str(&format!("error(0.1) D{i} D{}\n", i + 1));
    }
    std::fs::write(&dem, text).unwrap();
    let e = refused(&["--decoder", "uf", "--dem", dem.to_str().unwrap()]);
    assert!(
        e.contains("max_request_bytes") && e.contains("5004") && e.contains("4096"),
        "{e}"
    );
    assert!(e.contains("40000 detectors"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_as_the_model_says_so() {
    let dir = temp_dir("dem-dir");
    let e = refused(&["--decoder", "uf", "--dem", dir.to_str().unwrap()]);
    assert!(e.contains("is a directory"), "{e}");
    assert!(!e.contains("no such file"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
