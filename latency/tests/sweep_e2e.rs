//! End to end: scenario file -> forwarders -> emulator -> CSV rows + spectra -> report.
use std::path::{Path, PathBuf};
use std::process::Command;

use qfwd_latency::record::{read_csv, read_hgrm};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_qfwd-latency"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs the harness, which must succeed (else its stderr is the failure); returns stdout.
fn cli_ok(args: &[&str]) -> String {
    let out = cli(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn sweep_writes_one_checked_row_and_spectrum_per_point() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "tiny.toml",
        r#"
name = "tiny"
[forwarder]
idle = "yield"
[load]
warmup = 50
samples = 500
emulator_idle = "yield"
[[sweep]]
transport = ["inproc", "udp"]
payload_bytes = [32, 1024]
[[sweep]]
transport = ["udp"]
mode = ["open-loop"]
rate_hz = [5000]
"#,
    );
    let csv = dir.path().join("out/tiny.csv");
    cli_ok(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ]);
    let rows = read_csv(&csv).unwrap();
    assert_eq!(rows.len(), 5);
    for r in &rows {
        assert_eq!((r.samples, r.errors, r.dropped), (500, 0, 0), "{r:?}");
        assert!(
            r.min_ns > 0 && r.min_ns <= r.p50_ns && r.p50_ns <= r.p99_ns && r.p99_ns <= r.max_ns
        );
        // The emulator says how often it stalled, and the forwarder its own service time,
        // which the round trip holds (the median: a quantile of a part stays below the
        // same quantile of the whole, sample by sample).
        let stalled = r.stalled_samples.expect("measured by this harness");
        assert!(stalled <= r.samples && r.emulator_stalls.is_some(), "{r:?}");
        let fwd_p50 = r.forwarder_p50_ns.expect("in-process forwarder");
        assert!(fwd_p50 > 0 && fwd_p50 <= r.p50_ns, "{r:?}");
        assert!(r.forwarder_p99_ns.unwrap() >= fwd_p50, "{r:?}");
        // And how often its own loop stalled: at most every request it served (510).
        let fwd_stalled = r.forwarder_stalled_requests.expect("in-process forwarder");
        assert!(r.forwarder_stalls.is_some() && fwd_stalled <= 510, "{r:?}");
        assert_eq!(r.scenario, "tiny");
        assert_eq!(r.rtt_or_oneway, "rtt");
        let spectrum = read_hgrm(&csv.parent().unwrap().join(&r.spectrum)).unwrap();
        assert!(!spectrum.is_empty());
    }
    assert_eq!(rows[0].transport, "inproc");
    assert_eq!(rows[3].payload_bytes, 1024);
    assert_eq!(
        (rows[4].mode.as_str(), rows[4].offered_rate_hz),
        ("open-loop", 5000)
    );
    assert!(
        rows[4].achieved_rate_hz > 3000,
        "{}",
        rows[4].achieved_rate_hz
    );

    // The report reads it back, and draws.
    let svg = dir.path().join("svg");
    let md = dir.path().join("t.md");
    let out = cli_ok(&[
        "report",
        csv.to_str().unwrap(),
        "--baseline",
        "transport=udp,payload_bytes=32,mode=ping-pong",
        "--markdown",
        md.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let table = out;
    assert!(
        table.contains("inproc") && table.contains("open-loop"),
        "{table}"
    );
    assert!(std::fs::read_to_string(&md).unwrap().contains("| "));
    assert!(svg.join("percentiles.svg").is_file());
    // One open-loop rate: nothing to draw against rate, and the report says so.
    assert!(!svg.join("latency-vs-rate.svg").exists());
    assert!(table.contains("measured at one offered rate"), "{table}");
}

#[test]
fn report_spread_summarises_a_scenario_swept_twice() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "twice.toml",
        r#"
name = "twice"
[forwarder]
idle = "yield"
[load]
warmup = 20
samples = 200
emulator_idle = "yield"
[[sweep]]
payload_bytes = [16, 64]
"#,
    );
    let csvs: Vec<PathBuf> = ["a.csv", "b.csv"]
        .iter()
        .map(|n| dir.path().join(n))
        .collect();
    for csv in &csvs {
        cli_ok(&[
            "sweep",
            scenario.to_str().unwrap(),
            "--out",
            csv.to_str().unwrap(),
        ]);
    }
    let md = dir.path().join("spread.md");
    let text = cli_ok(&[
        "report",
        "--spread",
        "--p99-target-us",
        "1000000",
        csvs[0].to_str().unwrap(),
        csvs[1].to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert!(
        text.contains("4 rows from 2 file(s) in 2 configuration(s)"),
        "{text}"
    );
    // One line per payload size, each measured twice, both runs under the (generous) target.
    let lines: Vec<Vec<&str>> = text
        .lines()
        .skip(3)
        .take(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        (lines[0][1], lines[0][2], lines[0][3]),
        ("16", "2", "0"),
        "{text}"
    );
    assert_eq!((lines[1][1], lines[1][2]), ("64", "2"), "{text}");
    assert!(lines.iter().all(|l| l.contains(&"2/2")), "{text}");
    assert!(std::fs::read_to_string(&md).unwrap().contains("| runs |"));

    // --repeat sweeps the scenario twice into one CSV, every run with its own run_id and
    // spectra, and prints the spread.
    let csv = dir.path().join("repeat.csv");
    let text = cli_ok(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--repeat",
        "2",
        "--out",
        csv.to_str().unwrap(),
    ]);
    assert!(
        text.contains("4 rows from 1 file(s) in 2 configuration(s)"),
        "{text}"
    );
    let rows = read_csv(&csv).unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0].run_id, rows[1].run_id);
    assert_ne!(rows[0].run_id, rows[2].run_id);
    assert_eq!(rows[2].payload_bytes, 16, "the whole scenario, then again");
    let spectra: Vec<&str> = rows.iter().map(|r| r.spectrum.as_str()).collect();
    assert_eq!(
        spectra,
        [
            "repeat-hgrm/001.hgrm",
            "repeat-hgrm/002.hgrm",
            "repeat-hgrm/001-r2.hgrm",
            "repeat-hgrm/002-r2.hgrm"
        ]
    );
    for r in &rows {
        assert!(!read_hgrm(&dir.path().join(&r.spectrum)).unwrap().is_empty());
    }
    let out = cli(&["sweep", scenario.to_str().unwrap(), "--repeat", "0"]);
    assert!(!out.status.success(), "0 runs is refused");

    // The target needs --spread, and a nonsense target is refused.
    let out = cli(&["report", "--p99-target-us", "5", csvs[0].to_str().unwrap()]);
    assert!(!out.status.success());
    let out = cli(&[
        "report",
        "--spread",
        "--p99-target-us=0",
        csvs[0].to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("p99-target-us"));
}

#[test]
fn child_process_forwarder_is_measured_and_its_counters_agree() {
    // The qfwd binary sits next to the test's deps folder once the workspace is built.
    let exe = std::env::current_exe().unwrap();
    let qfwd = exe.parent().unwrap().join("../qfwd");
    if !qfwd.is_file() {
        eprintln!(
            "skipped: {} not built (run `cargo test --workspace`)",
            qfwd.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "child.toml",
        &format!(
            "[forwarder]\nlaunch = \"child\"\ntransport = \"udp\"\nidle = \"yield\"\ncommand = {:?}\n[load]\nwarmup = 10\nsamples = 300\nemulator_idle = \"yield\"\n",
            qfwd.display().to_string()
        ),
    );
    let csv = dir.path().join("child.csv");
    cli_ok(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ]);
    let rows = read_csv(&csv).unwrap();
    assert_eq!(
        (rows[0].samples, rows[0].errors, rows[0].dropped),
        (300, 0, 0)
    );
    assert_eq!(rows[0].nic, "loopback");
    // The child's service time comes from its summary line.
    let fwd_p50 = rows[0]
        .forwarder_p50_ns
        .expect("parsed from the child's summary");
    assert!(fwd_p50 > 0 && fwd_p50 <= rows[0].p50_ns, "{:?}", rows[0]);
    // And its loop's stalls from the line beside it.
    let fwd_stalled = rows[0]
        .forwarder_stalled_requests
        .expect("parsed from the child's summary");
    assert!(
        rows[0].forwarder_stalls.is_some() && fwd_stalled <= 310,
        "{:?}",
        rows[0]
    );
}

#[test]
fn bad_scenarios_fail_up_front_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(dir.path(), "bad.toml", "[load]\npayload_bytes = \"many\"\n");
    let out = cli(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--out",
        dir.path().join("x.csv").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml") && err.contains("payload_bytes"),
        "{err}"
    );
    assert!(
        !dir.path().join("x.csv").exists(),
        "nothing may run before the file is valid"
    );

    let out = cli(&["sweep", "/nonexistent.toml"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.toml"));
}

#[test]
fn emulate_runs_against_an_in_process_forwarder_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("e.csv");
    let out = cli_ok(&[
        "emulate",
        "--samples",
        "300",
        "--warmup",
        "10",
        "--yield-when-idle",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let text = out;
    assert!(
        text.contains("99.9%") && text.contains("sent 310 = ok 310"),
        "{text}"
    );
    assert_eq!(read_csv(&csv).unwrap()[0].samples, 300);
}

#[test]
fn decoder_replay_checks_every_correction_against_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let scenario = write(
        dir.path(),
        "dec.toml",
        &format!(
            "[forwarder]\nidle = \"yield\"\n[load]\nwarmup = 10\nsamples = 400\nemulator_idle = \"yield\"\n\
             [[sweep]]\ndecoder = [\"uf\", \"lut\"]\ndem = [{:?}]\ndets = [{:?}]\n",
            fixtures.join("surface_d3_r3_z_p005.dem").display().to_string(),
            fixtures.join("surface_d3_r3_z_p005.b8").display().to_string(),
        ),
    );
    let csv = dir.path().join("dec.csv");
    cli_ok(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ]);
    let rows = read_csv(&csv).unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!((r.samples, r.errors, r.dropped), (400, 0, 0), "{r:?}");
        // 24 detectors -> 3 bytes of events + a u32 count.
        assert_eq!(r.payload_bytes, 7);
    }
    assert_eq!(rows[0].decoder, "uf:surface_d3_r3_z_p005");
    assert_eq!(rows[1].decoder, "lut:surface_d3_r3_z_p005");
}

#[test]
fn a_closed_stdout_ends_the_report_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let csv = concat!(env!("CARGO_MANIFEST_DIR"), "/../results/h200-decoders.csv");
    // The reader is gone before the report writes its first line (`... | head` after it
    // has read enough): the report must end as `cat` does, not with an error or a panic.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_qfwd-latency"))
        .args(["report", csv])
        .stdout(writer)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(13), "ended by SIGPIPE: {err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn a_second_sweep_to_the_same_file_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "once.toml",
        r#"
name = "once"
[forwarder]
idle = "yield"
[load]
warmup = 10
samples = 100
emulator_idle = "yield"
"#,
    );
    let csv = dir.path().join("once.csv");
    let args = [
        "sweep",
        scenario.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ];
    cli_ok(&args);
    let first = std::fs::read(&csv).unwrap();

    let out = cli(&args);
    assert!(!out.status.success(), "a second sweep must not overwrite");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("once.csv already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&csv).unwrap(),
        first,
        "the first CSV is intact"
    );

    let mut forced = args.to_vec();
    forced.push("--force");
    cli_ok(&forced);
    let rows = read_csv(&csv).unwrap();
    assert_eq!(rows.len(), 1);
    assert_ne!(
        std::fs::read(&csv).unwrap(),
        first,
        "--force wrote a new sweep"
    );
}

#[test]
fn a_gpu_scenario_without_a_gpu_fails_before_measuring() {
    if let Ok(Some(gpus)) = qfwd::gpu::probe() {
        eprintln!("skipped: this host has {} GPU(s)", gpus.len());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "gpu.toml",
        r#"
name = "gpu"
[forwarder]
idle = "yield"
[load]
warmup = 10
samples = 100
emulator_idle = "yield"
[[sweep]]
topology = ["cpu", "gpu-persistent"]
"#,
    );
    let csv = dir.path().join("gpu.csv");
    let out = cli(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("gpu.toml") && err.contains("point 2 of 2 needs GPU 0"),
        "{err}"
    );
    assert!(err.contains("--topology cpu"), "{err}");
    assert!(!csv.exists(), "no partial CSV");
    assert!(!dir.path().join("gpu-hgrm").exists(), "no spectra");
}
