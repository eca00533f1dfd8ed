//! The harness as a Unix process: `emulate` says by its exit status that requests were
//! lost, and a forwarder a sweep started as a child process ends with the sweep, even
//! when the sweep is killed.
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn harness() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qfwd-latency"))
}

/// The `qfwd` binary beside the test's deps folder (built by `cargo test --workspace`).
fn qfwd_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let q = exe.parent()?.join("../qfwd");
    q.is_file().then_some(q)
}

/// Child processes of `pid` (every thread's list).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn emulate_exits_nonzero_when_requests_are_lost() {
    // Nobody listens on this port: every request is lost.
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = harness()
        .args(["emulate", "--target", &format!("127.0.0.1:{port}")])
        .args(["--samples", "20", "--warmup", "0", "--timeout-ms", "20"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("requests lost"), "{err}");
    // And 0 when every answer is right.
    let out = harness()
        .args(["emulate", "--samples", "200", "--warmup", "10"])
        .arg("--yield-when-idle")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_killed_sweep_takes_its_child_forwarder_with_it() {
    let Some(qfwd) = qfwd_binary() else {
        eprintln!("skipped: the qfwd binary is not built (run `cargo test --workspace`)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("child.toml");
    // A minute of open loop: the sweep is killed long before it ends.
    std::fs::write(
        &scenario,
        format!(
            "[forwarder]\nlaunch = \"child\"\ntransport = \"udp\"\nidle = \"yield\"\n\
             command = {:?}\n[load]\nmode = \"open-loop\"\nrate_hz = 1000\nduration_s = 60.0\n\
             emulator_idle = \"yield\"\n",
            qfwd.display().to_string()
        ),
    )
    .unwrap();
    let mut sweep = harness()
        .arg("sweep")
        .arg(&scenario)
        .arg("--out")
        .arg(dir.path().join("child.csv"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let forwarder = loop {
        let qfwd_children: Vec<u32> = children(sweep.id())
            .into_iter()
            .filter(|c| {
                std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "qfwd")
            })
            .collect();
        if let Some(&c) = qfwd_children.first() {
            break c;
        }
        assert!(Instant::now() < deadline, "the sweep started no forwarder");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Let it serve a moment, then kill the sweep outright.
    std::thread::sleep(Duration::from_millis(300));
    sweep.kill().unwrap();
    sweep.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ended(forwarder) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let gone = ended(forwarder);
    if !gone {
        let _ = Command::new("kill")
            .args(["-KILL", &forwarder.to_string()])
            .status();
    }
    assert!(
        gone,
        "the child forwarder {forwarder} outlived the killed sweep"
    );
}
