//! The harness as a newcomer meets it: examples in every command's help, and a quick
//! start that never writes over a result that is not its own.
#![forbid(unsafe_code)]

use std::process::{Command, Output};

fn harness(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qfwd-latency"))
        .args(args)
        .output()
        .expect("qfwd-latency runs")
}

#[test]
fn every_command_has_examples() {
    for cmd in [
        &["--help"][..],
        &["quickstart", "--help"],
        &["emulate", "--help"],
        &["sweep", "--help"],
        &["report", "--help"],
        &["stream-plot", "--help"],
    ] {
        let out = harness(cmd);
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && help.contains("Example"),
            "{cmd:?}:\n{help}"
        );
    }
}

#[test]
fn no_sweep_example_forces_over_a_committed_result() {
    let out = harness(&["sweep", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for line in help.lines().filter(|l| l.contains("--force")) {
        assert!(!line.contains("results/"), "`{}`", line.trim());
    }
}

#[test]
fn the_quickstart_refuses_a_file_that_is_not_its_own_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let committed = dir.path().join("h200-topologies.csv");
    let header = "run_id,scenario,topology\n";
    std::fs::write(&committed, header).unwrap();
    let out = harness(&["quickstart", "--out", committed.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("h200-topologies.csv") && stderr.contains("--force"),
        "{stderr}"
    );
    assert!(!stderr.contains("wrote"), "it measured:\n{stderr}");
    assert_eq!(std::fs::read_to_string(&committed).unwrap(), header);
    assert!(!dir.path().join("h200-topologies-hgrm").exists());
}
