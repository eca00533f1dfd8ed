//! `scripts/stream-accuracy.py --self-test`: the paired mistake ratio and its interval on
//! known counts (the full comparison needs Stim and PyMatching: docs/streaming.md). Skips
//! where there is no `python3`.

use std::process::Command;

#[test]
fn the_accuracy_script_checks_its_statistics() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/stream-accuracy.py");
    let out = match Command::new("python3")
        .arg(script)
        .arg("--self-test")
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("SKIP stream_accuracy_script: cannot run python3 ({e})");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("self-test: ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let help = Command::new("python3")
        .arg(script)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--windows") && help.contains("stim==1.16.0"),
        "{help}"
    );
}
