//! Hostile and unexpected peers against the `qfwd` binary: stray datagrams, peers outside
//! the allowlist, dual-stack sockets, and listening beyond loopback.
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use qfwd::wire::{self, function_id, status};

/// A `qfwd run` child whose stderr is read line by line.
struct Qfwd {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Qfwd {
    /// Starts `qfwd run ARGS` and waits for its start-up line (`qfwd: serving ...`).
    fn start(args: &[&str]) -> (Qfwd, String) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_qfwd"))
            .arg("run")
            .args(["--idle", "yield", "--stats-interval", "0"])
            // Several threads share two cores in CI: a request may wait there longer than
            // the default queue deadline (10 ms), and these tests are not about overload.
            .args(["--queue-deadline-us", "1000000"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("qfwd starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let q = Qfwd { child, lines };
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let line = q
                .lines
                .recv_timeout(Duration::from_millis(100))
                .unwrap_or_default();
            seen.push_str(&line);
            seen.push('\n');
            if line.starts_with("qfwd: serving") {
                // The warning, if any, follows the start-up line.
                if let Ok(l) = q.lines.recv_timeout(Duration::from_millis(100)) {
                    seen.push_str(&l);
                    seen.push('\n');
                }
                return (q, seen);
            }
            assert!(Instant::now() < deadline, "qfwd did not start: {seen}");
        }
    }

    /// SIGTERM; the rest of stderr (the summary).
    fn stop(mut self) -> String {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let st = self.child.wait().unwrap();
        assert!(st.success(), "qfwd exited with {st}");
        let mut out = String::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            out.push_str(&l);
            out.push('\n');
        }
        out
    }
}

impl Drop for Qfwd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn request(id: u32, arg: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 64];
    let n = wire::write_request(&mut buf, function_id("parity"), id, 7, arg).unwrap();
    buf.truncate(n);
    buf
}

/// Sends `n` parity requests one at a time from `sock`; how many got a correct answer.
fn correct_answers(sock: &UdpSocket, to: SocketAddr, n: u32) -> u32 {
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut ok = 0;
    let mut buf = [0u8; 256];
    for id in 0..n {
        let arg = [id as u8, 0x5a];
        sock.send_to(&request(id, &arg), to).unwrap();
        if let Ok((len, _)) = sock.recv_from(&mut buf) {
            let r = wire::parse_response(&buf[..len]).unwrap();
            if r.header.request_id == id
                && r.header.status == status::OK
                && r.result == [qfwd::handler::parity(&arg)]
            {
                ok += 1;
            }
        }
    }
    ok
}

/// No answer to `datagram` from `sock` within 300 ms.
fn unanswered(sock: &UdpSocket, to: SocketAddr, datagram: &[u8]) -> bool {
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    sock.send_to(datagram, to).unwrap();
    let mut buf = [0u8; 256];
    sock.recv_from(&mut buf).is_err()
}

#[test]
fn softnic_is_not_taken_over_by_a_stray_datagram_and_counts_foreign_peers() {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let (fwd, _) = Qfwd::start(&["--transport", "softnic", "--listen", &addr.to_string()]);
    // One byte from another loopback address, before the QPU controller's first request.
    let stranger = UdpSocket::bind("127.0.0.2:0").unwrap();
    stranger.send_to(&[0x42], addr).unwrap();
    let qpu = UdpSocket::bind("127.0.0.1:0").unwrap();
    assert_eq!(correct_answers(&qpu, addr, 200), 200);
    // A well-formed request from the stranger now: the QP serves the controller only.
    assert!(unanswered(&stranger, addr, &request(9, &[1])));
    let summary = fwd.stop();
    assert!(
        summary.contains("received 202 = answered ok 200 + answered with error 0 + dropped 2"),
        "{summary}"
    );
    assert!(summary.contains("truncated_header   1"), "{summary}");
    assert!(summary.contains("foreign_peer       1"), "{summary}");
}

#[test]
fn softnic_honours_the_allowlist_and_counts_what_it_refuses() {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let (fwd, start) = Qfwd::start(&[
        "--transport",
        "softnic",
        "--listen",
        &addr.to_string(),
        "--allow",
        "127.0.0.1",
    ]);
    assert!(start.contains("allowing only 127.0.0.1"), "{start}");
    let stranger = UdpSocket::bind("127.0.0.2:0").unwrap();
    for id in 0..3 {
        assert!(unanswered(&stranger, addr, &request(id, &[1])));
    }
    let qpu = UdpSocket::bind("127.0.0.1:0").unwrap();
    assert_eq!(correct_answers(&qpu, addr, 20), 20);
    let summary = fwd.stop();
    assert!(
        summary.contains("received 23 = answered ok 20 + answered with error 0 + dropped 3"),
        "{summary}"
    );
    assert!(summary.contains("not_allowed        3"), "{summary}");
}

#[test]
fn ipv4_peers_of_a_dual_stack_socket_match_ipv4_allow_entries() {
    let port = free_port();
    if UdpSocket::bind(format!("[::]:{port}")).is_err() {
        eprintln!("skipped: this host has no IPv6 (cannot bind [::])");
        return;
    }
    let (fwd, start) = Qfwd::start(&["--listen", &format!("[::]:{port}"), "--allow", "127.0.0.1"]);
    assert!(start.contains("allowing only 127.0.0.1"), "{start}");
    let qpu = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(correct_answers(&qpu, to, 10), 10);
    let summary = fwd.stop();
    assert!(
        summary.contains("received 10 = answered ok 10 + answered with error 0 + dropped 0"),
        "{summary}"
    );
}

#[test]
fn listening_beyond_loopback_needs_an_allowlist_or_allow_any() {
    let listen = format!("0.0.0.0:{}", free_port());
    let out = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args(["run", "--listen", &listen, "--duration", "5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&listen) && err.contains("--allow") && err.contains("--allow-any"),
        "{err}"
    );
    let (fwd, start) = Qfwd::start(&["--listen", &listen, "--allow-any"]);
    assert!(
        start.contains("qfwd: warning: listening on 0.0.0.0") && start.contains("any host"),
        "{start}"
    );
    fwd.stop();
    // Loopback needs neither, and warns about nothing.
    let (fwd, start) = Qfwd::start(&["--listen", &format!("127.0.0.1:{}", free_port())]);
    assert!(!start.contains("warning"), "{start}");
    fwd.stop();
}
