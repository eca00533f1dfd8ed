//! End to end: a stream scenario -> the CPU pool -> the stream emulator -> CSV rows,
//! spectra and the plot; a GPU scenario stops before measuring on a host without one.
use std::path::{Path, PathBuf};
use std::process::Command;

use qfwd_latency::streams::record::read;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_qfwd-latency"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap()
}

fn shots() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/stream/surface_d{distance}_r100_z_p001")
        .display()
        .to_string()
}

#[test]
fn a_stream_sweep_writes_rows_spectra_and_the_plot() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "s.toml",
        &format!(
            r#"
name = "s"
[service]
idle = "yield"
workers = 1
queue_slots = 4096
[streams]
rounds = 1500
warmup_rounds = 200
round_ns = 100000
emulator_idle = "yield"
shots = "{}"
[[sweep]]
streams = [1, 3]
"#,
            shots()
        ),
    );
    let csv = dir.path().join("out/s.csv");
    let out = cli(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("| cpu-pool | 5 | 3 | 100 µs |"), "{stdout}");
    let rows = read(&csv).unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!((r.distance, r.window, r.commit, r.workers), (5, 10, 5, 1));
        assert!(r.round_entries > 0 && r.rounds_committed > 0, "{r:?}");
        assert!(
            r.reaction_samples > 0 && r.reaction_p99_us >= r.reaction_p50_us,
            "{r:?}"
        );
        assert!(r.shots > 0 && r.ler >= 0.0, "{r:?}");
        assert!(csv.parent().unwrap().join(&r.spectrum).is_file());
    }
    // Streams play different shots: three streams finish about three times the shots.
    assert!(rows[1].shots > rows[0].shots, "{rows:?}");
    assert!(dir.path().join("out/s-plots/reaction-p99.svg").is_file());
    // Never over an earlier sweep without --force.
    let again = cli(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
}

#[test]
fn a_gpu_stream_scenario_stops_before_measuring_without_a_gpu_engine() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("g.csv");
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/streams-gpu.toml");
    let out = cli(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("engine = \"gpu\"") && err.contains("nothing was measured"),
        "{err}"
    );
    assert!(!csv.exists(), "nothing written");
    // Its shape lists, and its CPU half would run: --dry-run shows the points.
    let out = cli(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--dry-run",
        "--engine",
        "cpu-pool",
    ]);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert_eq!(listed.lines().count(), 16, "{listed}");
}
