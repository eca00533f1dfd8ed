//! What one decoder request costs by the make-up of its syndrome, without and with the
//! request budget (decode/src/budget.rs, docs/decoder-budget.md): no defect, the model's
//! own shots, every detector flagged, random halves, and exactly the budget's defects at
//! random places (the dearest request the budget still admits).
//!
//! Two measurements per model (the d = 5 and d = 7 surface codes, p = 0.001):
//! - the handler: `Handler::run` on one thread, each call timed (what the budget bounds);
//! - the round trip through `qfwd run` (topology cpu, UDP loopback, one request in
//!   flight), the binary given by `--qfwd` (default `target/release/qfwd`).
//!
//! ```text
//! cargo build --release && cargo run --release --example decoder_budget > results/cpu-decoder-budget.txt
//! ```
#![forbid(unsafe_code)]

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qfwd::decode::budget::expected_defects;
use qfwd::decode::sample::SplitMix64;
use qfwd::decode::{Decoder, DecoderKind, Shots};
use qfwd::handler::Handler;
use qfwd::wire::{self, function_id, status};

/// Requests per class (the handler); round trips per class.
const HANDLER_REQUESTS: usize = 20_000;
const ROUND_TRIPS: usize = 5_000;

/// Syndromes of one class, bit-packed.
struct Class {
    name: &'static str,
    syndromes: Vec<Vec<u8>>,
}

fn classes(dec: &Decoder, shots: &Shots, budget: u32) -> Vec<Class> {
    let (n, nb) = (dec.num_detectors(), dec.detector_bytes());
    let mut rng = SplitMix64(n as u64);
    let pad = |mut s: Vec<u8>| {
        if n % 8 != 0 {
            s[nb - 1] &= (1u8 << (n % 8)) - 1;
        }
        s
    };
    let random: Vec<Vec<u8>> = (0..256)
        .map(|_| pad((0..nb).map(|_| rng.next_u64() as u8).collect()))
        .collect();
    let at_budget: Vec<Vec<u8>> = (0..256)
        .map(|_| {
            let mut s = vec![0u8; nb];
            let mut set = 0;
            while set < budget as usize {
                let v = (rng.next_u64() % n as u64) as usize;
                if s[v / 8] & 1 << (v % 8) == 0 {
                    s[v / 8] |= 1 << (v % 8);
                    set += 1;
                }
            }
            s
        })
        .collect();
    vec![
        Class {
            name: "zero",
            syndromes: vec![vec![0; nb]],
        },
        Class {
            name: "model shots",
            syndromes: (0..shots.len()).map(|i| shots.row(i).to_vec()).collect(),
        },
        Class {
            name: "all ones",
            syndromes: vec![pad(vec![0xff; nb])],
        },
        Class {
            name: "random",
            syndromes: random,
        },
        Class {
            name: "at budget",
            syndromes: at_budget,
        },
    ]
}

/// (p50, p99, max, mean) of `ns`, in µs.
fn summary(ns: &mut [u64]) -> (f64, f64, f64, f64) {
    ns.sort_unstable();
    let q = |f: f64| ns[((ns.len() - 1) as f64 * f).round() as usize] as f64 / 1e3;
    let mean = ns.iter().sum::<u64>() as f64 / ns.len() as f64 / 1e3;
    (q(0.5), q(0.99), ns[ns.len() - 1] as f64 / 1e3, mean)
}

fn handler_rows(dec: &Arc<Decoder>, classes: &[Class], label: &str) {
    let h = Handler::Decoder(Arc::clone(dec));
    let mut out = [0u8; 64];
    for c in classes {
        let payloads: Vec<Vec<u8>> = c.syndromes.iter().map(|s| dec.payload(s)).collect();
        let (mut refused, mut ns) = (0usize, Vec::with_capacity(HANDLER_REQUESTS));
        for i in 0..HANDLER_REQUESTS {
            let p = &payloads[i % payloads.len()];
            let t = Instant::now();
            let r = h.run(p, &mut out);
            ns.push(t.elapsed().as_nanos() as u64);
            refused += usize::from(r == Err(status::OVER_BUDGET));
        }
        let (p50, p99, max, mean) = summary(&mut ns);
        println!(
            "handler  {label:<8} {:<12} {p50:>8.2} {p99:>8.2} {max:>8.2} {mean:>8.2}   {refused}/{HANDLER_REQUESTS} over budget",
            c.name
        );
    }
}

struct Forwarder(Child);

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(qfwd: &Path, dem: &Path, budget: &str) -> (Forwarder, SocketAddr) {
    let port = UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free port")
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    let child = Command::new(qfwd)
        .args([
            "run",
            "--listen",
            &addr.to_string(),
            "--stats-interval",
            "0",
        ])
        .args(["--decoder", "uf", "--dem"])
        .arg(dem)
        .args(["--decoder-max-defects", budget])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (cargo build --release first)", qfwd.display()));
    (Forwarder(child), addr)
}

fn round_trip_rows(qfwd: &Path, dem: &Path, dec: &Decoder, classes: &[Class], budget: &str) {
    let (_fwd, addr) = start(qfwd, dem, budget);
    let sock = UdpSocket::bind("127.0.0.1:0").expect("client socket");
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let (mut req, mut resp) = (vec![0u8; 70_000], vec![0u8; 70_000]);
    let decode = function_id("decode");
    // Wait until it answers.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let n = wire::write_request(&mut req, decode, 0, 0, &dec.payload(&[])).expect("fits");
        sock.send_to(&req[..n], addr).expect("send");
        if sock.recv_from(&mut resp).is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "qfwd run did not answer");
    }
    let label = if budget == "0" { "off" } else { "default" };
    for c in classes {
        let payloads: Vec<Vec<u8>> = c.syndromes.iter().map(|s| dec.payload(s)).collect();
        let (mut refused, mut lost, mut ns) = (0usize, 0usize, Vec::with_capacity(ROUND_TRIPS));
        for i in 0..ROUND_TRIPS + 500 {
            let n =
                wire::write_request(&mut req, decode, i as u32, 0, &payloads[i % payloads.len()])
                    .expect("fits");
            let t = Instant::now();
            sock.send_to(&req[..n], addr).expect("send");
            let Ok((m, _)) = sock.recv_from(&mut resp) else {
                lost += 1;
                continue;
            };
            let elapsed = t.elapsed().as_nanos() as u64;
            let r = wire::parse_response(&resp[..m]).expect("a response");
            if i >= 500 {
                ns.push(elapsed);
                refused += usize::from(r.header.status == status::OVER_BUDGET);
            }
        }
        let (p50, p99, max, mean) = summary(&mut ns);
        println!(
            "udp      {label:<8} {:<12} {p50:>8.2} {p99:>8.2} {max:>8.2} {mean:>8.2}   {refused}/{} over budget, {lost} lost",
            c.name,
            ns.len()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let qfwd = args
        .iter()
        .position(|a| a == "--qfwd")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/release/qfwd"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let host = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("# host: {host}, {cores} cores; release build; times in µs");
    println!("# what     budget   class           p50      p99      max     mean");
    for name in ["surface_d5_r5_z_p001", "surface_d7_r7_z_p001"] {
        let dem = dir.join(format!("{name}.dem"));
        let mut dec = Decoder::from_dem_path(&dem, DecoderKind::Uf).expect("fixture model");
        let shots = Shots::read(&dir.join(format!("{name}.b8")), dec.num_detectors(), None)
            .expect("fixture shots");
        let budget = dec.max_defects();
        println!(
            "# {name}: {} detectors, {:.2} defects per shot expected, default budget {budget}",
            dec.num_detectors(),
            expected_defects(dec.graph())
        );
        let cls = classes(&dec, &shots, budget);
        dec.set_max_defects(Some(0)).expect("0 turns it off");
        handler_rows(&Arc::new(dec), &cls, "off");
        let dec = Arc::new(Decoder::from_dem_path(&dem, DecoderKind::Uf).expect("fixture model"));
        handler_rows(&dec, &cls, "default");
        if qfwd.exists() {
            round_trip_rows(&qfwd, &dem, &dec, &cls, "0");
            round_trip_rows(&qfwd, &dem, &dec, &cls, &budget.to_string());
        } else {
            println!("# no {}: round trips skipped", qfwd.display());
        }
    }
}
