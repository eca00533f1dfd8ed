//! End to end: the `qfwd run` binary on UDP loopback, driven by raw datagrams.
use std::io::Read;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use qfwd::wire::{self, function_id, status};

struct Forwarder {
    child: Child,
    addr: SocketAddr,
}

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(extra: &[&str]) -> Forwarder {
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args([
            "run",
            "--transport",
            "udp",
            "--listen",
            &addr.to_string(),
            "--idle",
            "yield",
            "--stats-interval",
            "0",
            // A busy CI host may leave a request in the socket longer than the default
            // queue deadline (10 ms); these tests are not about overload.
            "--queue-deadline-us",
            "1000000",
        ])
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("qfwd binary starts");
    // Wait until the socket answers: an unknown-function request gets a response.
    let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
    probe
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = wire::write_request(&mut buf, function_id("probe"), u32::MAX, 0, &[]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        probe.send_to(&buf[..n], addr).unwrap();
        let mut r = [0u8; 64];
        if probe.recv_from(&mut r).is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "qfwd did not start listening");
    }
    Forwarder { child, addr }
}

impl Forwarder {
    /// SIGTERM, then the final summary from stderr.
    fn stop(mut self) -> String {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert!(st.success(), "qfwd exited with {st}");
                break;
            }
            assert!(Instant::now() < deadline, "qfwd ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        err
    }
}

fn ask(sock: &UdpSocket, to: SocketAddr, datagram: &[u8]) -> Option<Vec<u8>> {
    sock.send_to(datagram, to).unwrap();
    let mut buf = [0u8; 2048];
    match sock.recv_from(&mut buf) {
        Ok((n, _)) => Some(buf[..n].to_vec()),
        Err(_) => None,
    }
}

#[test]
fn serves_parity_answers_errors_and_counts_everything() {
    let fwd = start(&["--max-request-bytes", "512"]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 2048];
    let parity = function_id("parity");

    // Correct answers, ids and timestamps echoed.
    for (id, arg) in [(1u32, vec![0b1011u8]), (2, vec![0xff, 0x01]), (3, vec![])] {
        let n = wire::write_request(&mut buf, parity, id, 1000 + id as u64, &arg).unwrap();
        let r = ask(&sock, fwd.addr, &buf[..n]).expect("answer");
        let v = wire::parse_response(&r).unwrap();
        assert_eq!(v.header.status, status::OK);
        assert_eq!(v.header.request_id, id);
        assert_eq!(v.header.ptp_timestamp, 1000 + id as u64);
        assert_eq!(v.result, &[qfwd::handler::parity(&arg)]);
    }
    // Errors with their own status codes.
    let n = wire::write_request(&mut buf, function_id("nope"), 10, 0, &[1]).unwrap();
    let v = ask(&sock, fwd.addr, &buf[..n]).unwrap();
    assert_eq!(
        wire::parse_response(&v).unwrap().header.status,
        status::UNKNOWN_FUNCTION
    );
    let n = wire::write_request(&mut buf, parity, 11, 0, &[1, 2, 3]).unwrap();
    let v = ask(&sock, fwd.addr, &buf[..n - 2]).unwrap();
    assert_eq!(
        wire::parse_response(&v).unwrap().header.status,
        status::LENGTH_MISMATCH
    );
    let n = wire::write_request(&mut buf, parity, 12, 0, &[0; 600]).unwrap();
    let v = ask(&sock, fwd.addr, &buf[..n]).unwrap();
    assert_eq!(
        wire::parse_response(&v).unwrap().header.status,
        status::OVERSIZED
    );
    // Unparseable: dropped, never answered.
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(ask(&sock, fwd.addr, b"short").is_none());
    assert!(ask(&sock, fwd.addr, &[0u8; 40]).is_none());

    let summary = fwd.stop();
    // +1 for the readiness probe (unknown function).
    assert!(
        summary.contains("received 9 = answered ok 3 + answered with error 4 + dropped 2"),
        "{summary}"
    );
    assert!(summary.contains("unknown_function   2"), "{summary}");
    assert!(summary.contains("bad_magic          1"), "{summary}");
    assert!(summary.contains("truncated_header   1"), "{summary}");
}

#[test]
fn peers_outside_the_allowlist_are_dropped_and_counted() {
    // Only 127.0.0.1 port 9 may send: our sockets use other ports.
    let fwd_addr = {
        let port = free_port();
        format!("127.0.0.1:{port}")
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args([
            "run",
            "--listen",
            &fwd_addr,
            "--allow",
            "127.0.0.1:9",
            "--idle",
            "yield",
            "--duration",
            "1.5",
            "--stats-interval",
            "0",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = wire::write_request(&mut buf, function_id("parity"), 1, 0, &[1]).unwrap();
    for _ in 0..3 {
        assert!(ask(&sock, fwd_addr.parse().unwrap(), &buf[..n]).is_none());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "--duration did not stop qfwd");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("allowing only 127.0.0.1:9"), "{err}");
    assert!(
        err.contains("received 3 = answered ok 0 + answered with error 0 + dropped 3"),
        "{err}"
    );
    assert!(err.contains("not_allowed        3"), "{err}");
}

#[test]
fn bad_flags_fail_with_a_message_not_a_panic() {
    let out = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args(["run", "--handler", "nosuch", "--duration", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown handler") && err.contains("parity"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    let out = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args(["run", "--config", "/nonexistent/qfwd.toml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/qfwd.toml"));
}

#[test]
fn serves_a_decoder_beside_parity() {
    let dem = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/surface_d3_r3_z_p005.dem"
    );
    let fwd = start(&["--decoder", "uf", "--dem", dem, "--name", "d3"]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let decoder = qfwd::decode::Decoder::from_dem_path(
        std::path::Path::new(dem),
        qfwd::decode::DecoderKind::Uf,
    )
    .unwrap();
    let mut scratch = decoder.new_scratch();
    let mut buf = [0u8; 256];
    // No events, then two events: answers equal the reference decoder's.
    for (id, dets) in [(1u32, vec![0u8; 3]), (2, vec![0b0000_0011, 0, 0])] {
        let arg = decoder.payload(&dets);
        let n = wire::write_request(&mut buf, function_id("d3"), id, 0, &arg).unwrap();
        let r = ask(&sock, fwd.addr, &buf[..n]).expect("answer");
        let v = wire::parse_response(&r).unwrap();
        assert_eq!(v.header.status, status::OK);
        let want = decoder.result_bytes(decoder.decode(&mut scratch, &dets));
        assert_eq!(v.result, &want[..]);
    }
    // A payload whose event count does not match the model.
    let n =
        wire::write_request(&mut buf, function_id("d3"), 3, 0, &[0, 0, 0, 25, 0, 0, 0]).unwrap();
    let v = ask(&sock, fwd.addr, &buf[..n]).unwrap();
    assert_eq!(
        wire::parse_response(&v).unwrap().header.status,
        status::BAD_ARGUMENT
    );
    // Parity is still served.
    let n = wire::write_request(&mut buf, function_id("parity"), 4, 0, &[1]).unwrap();
    assert!(ask(&sock, fwd.addr, &buf[..n]).is_some());
    let summary = fwd.stop();
    assert!(summary.contains("bad_argument"), "{summary}");

    let out = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args([
            "run",
            "--decoder",
            "uf",
            "--dem",
            "/nonexistent.dem",
            "--duration",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.dem"));
}

#[test]
fn a_closed_stdout_ends_decode_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let fixture = |ext: &str| {
        format!(
            "{}/tests/fixtures/rep_d3_r3_p005{ext}",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args(["decode", "--decoder", "lut", "--dem"])
        .arg(fixture(".dem"))
        .arg("--dets")
        .arg(fixture(".b8"))
        .arg("--obs")
        .arg(fixture(".obs.01"))
        .stdout(writer)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(13), "ended by SIGPIPE: {err}");
    assert!(!err.contains("panicked") && !err.contains("error"), "{err}");
}

/// `--stats-format json`: one JSON object per line on stdout, an interval every
/// --stats-interval and a summary at the end whose counters add up.
#[test]
fn stats_format_json_streams_intervals_then_a_summary() {
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args(["run", "--listen", &addr.to_string(), "--idle", "yield"])
        .args([
            "--stats-interval",
            "0.1",
            "--stats-format",
            "json",
            "--duration",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qfwd binary starts");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = wire::write_request(&mut buf, function_id("parity"), 1, 0, &[0b1011]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut answered = 0;
    while answered < 5 {
        assert!(Instant::now() < deadline, "qfwd did not answer");
        if ask(&sock, addr, &buf[..n]).is_some() {
            answered += 1;
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let (summary, intervals) = lines.split_last().expect("some JSON lines");
    assert!(intervals.len() >= 5, "{} intervals in 2 s", intervals.len());
    assert!(intervals.iter().all(|i| i["kind"] == "interval"));
    assert!(intervals
        .iter()
        .any(|i| i["rate_hz"].as_f64().unwrap() > 0.0));
    assert_eq!(summary["kind"], "summary");
    assert_eq!(summary["adds_up"], true);
    let received = summary["received"].as_u64().unwrap();
    assert!(received >= 5, "{summary}");
    assert_eq!(summary["answered_ok"].as_u64().unwrap(), received);
    assert!(summary["service_ns"]["p50"].as_u64().unwrap() > 0);
    // The human summary stays on stderr.
    assert!(String::from_utf8_lossy(&out.stderr).contains("received"));
}
