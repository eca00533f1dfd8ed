//! The README's lab example, `examples/lab.toml`: it loads, passes every check, and a
//! forwarder started from it answers decoder requests as the CPU reference does.
#![forbid(unsafe_code)]

use std::io::Read;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use qfwd::config::RunConfig;
use qfwd::decode::{Decoder, DecoderKind, Shots};
use qfwd::wire::{self, function_id, status};

const LAB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/lab.toml");

#[test]
fn the_lab_example_loads_and_passes_every_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::env::set_current_dir(root).unwrap();
    let config = RunConfig::from_file(Path::new(LAB)).unwrap();
    config.validate().unwrap();
    assert!(
        !config.listen.ip().is_loopback(),
        "the lab listens on the lab network"
    );
    assert!(!config.allow.is_empty(), "the lab names its QPU controller");
    assert!(!config.allow_any);
    assert!(config.dem.is_some() && config.decoder.is_some());
}

#[test]
fn a_forwarder_started_from_the_lab_example_decodes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Loopback, this test as the controller, and no pinning or spinning on a shared host:
    // everything else comes from the file.
    let mut child = Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .current_dir(root)
        .args(["run", "--config", LAB, "--listen", &addr.to_string()])
        .args(["--allow", "127.0.0.1", "--cores", "0", "--idle", "yield"])
        .args(["--queue-deadline-us", "1000000", "--stats-interval", "0"])
        .args(["--duration", "60"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("qfwd starts");

    let dem = root.join("tests/fixtures/surface_d5_r5_z_p001.dem");
    let dec = Decoder::from_dem_path(&dem, DecoderKind::Uf).unwrap();
    let shots = Shots::read(
        &root.join("tests/fixtures/surface_d5_r5_z_p001.b8"),
        dec.num_detectors(),
        None,
    )
    .unwrap();
    let mut scratch = dec.new_scratch();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let decode = function_id("decode");
    let mut out = [0u8; 2048];
    let mut answered = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0..200u32 {
        let row = shots.row(i as usize);
        let n = wire::write_request(&mut out, decode, i, 0, &dec.payload(row)).unwrap();
        let want = dec.result_bytes(dec.decode(&mut scratch, row));
        // Until the forwarder listens, requests go unanswered: resend.
        let answer = loop {
            sock.send_to(&out[..n], addr).unwrap();
            let mut r = [0u8; 2048];
            if let Ok((len, _)) = sock.recv_from(&mut r) {
                break r[..len].to_vec();
            }
            assert!(Instant::now() < deadline, "no answer to request {i}");
        };
        let v = wire::parse_response(&answer).unwrap();
        assert_eq!(v.header.request_id, i);
        assert_eq!(v.header.status, status::OK);
        assert_eq!(v.result, &want[..], "shot {i}");
        answered += 1;
    }
    assert_eq!(answered, 200);

    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let stop = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < stop, "qfwd ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{err}");
}
