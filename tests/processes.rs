//! `qfwd run` as a Unix process: SIGHUP drains like SIGTERM, and a forwarder started with
//! `--exit-with-parent` ends with the process that started it, even when that one is
//! killed with SIGKILL.
use std::io::{BufRead, BufReader, Read};
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use qfwd::wire::{self, function_id};

fn free_addr() -> String {
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // Field 3, after the parenthesised command name, is the state.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn wait_ended(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if ended(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn sighup_drains_like_sigterm() {
    let addr = free_addr();
    let mut child = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args([
            "run",
            "--listen",
            &addr,
            "--idle",
            "yield",
            "--stats-interval",
            "0",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.starts_with("qfwd: serving"), "{line}");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 64];
    let n = wire::write_request(&mut buf, function_id("parity"), 1, 0, &[1]).unwrap();
    sock.send_to(&buf[..n], &addr).unwrap();
    sock.recv_from(&mut buf).expect("an answer");
    Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "SIGHUP did not stop qfwd");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{status}: {rest}");
    assert!(
        rest.contains("received 1 = answered ok 1 + answered with error 0 + dropped 0"),
        "{rest}"
    );
}

#[test]
fn a_forwarder_ends_with_its_parent_even_when_the_parent_is_killed() {
    // A shell plays the harness: it starts qfwd, says its PID, and waits.
    let addr = free_addr();
    let script = format!(
        "\"$0\" run --listen {addr} --idle yield --stats-interval 0 --exit-with-parent $$ \
         2>/dev/null & echo $!; wait"
    );
    let mut shell = Command::new("sh")
        .args(["-c", &script, env!("CARGO_BIN_EXE_qfwd")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(shell.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let qfwd: u32 = line.trim().parse().expect("the shell prints qfwd's PID");
    // Serving: it answers.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = wire::write_request(&mut buf, function_id("parity"), 1, 0, &[1]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        sock.send_to(&buf[..n], &addr).unwrap();
        if sock.recv_from(&mut [0u8; 64]).is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "qfwd did not start");
    }
    shell.kill().unwrap(); // SIGKILL: the shell cannot pass anything on
    shell.wait().unwrap();
    let gone = wait_ended(qfwd, Duration::from_secs(10));
    if !gone {
        let _ = Command::new("kill")
            .args(["-KILL", &qfwd.to_string()])
            .status();
    }
    assert!(gone, "qfwd {qfwd} outlived its parent");
    // And its port is free again.
    UdpSocket::bind(&addr).expect("the port is free");
}

#[test]
fn exit_with_parent_refuses_a_pid_that_is_not_the_parent() {
    let out = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args(["run", "--listen", &free_addr(), "--exit-with-parent", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not this process's parent"), "{err}");
}
