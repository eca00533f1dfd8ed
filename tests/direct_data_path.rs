//! The `gpu-direct` data path end to end without a GPU: the CPU stand-in serves the links'
//! queues (the kernel's protocol in Rust), the test thread is every link's NIC and QPU
//! (`LinkClient`), in all three doorbell modes, under load (many requests in flight), with
//! every queue wrapping many times; malformed requests get the forwarder's answers and
//! counters; the soft NIC serves the same queues over UDP.
//!
//! The `gpu_*` tests run the same checks on the GPU kernel (`device/direct.cu`): they are
//! `#[ignore]`d; on a GPU host run
//! `cargo test --release --test direct_data_path -- --ignored --nocapture`.
#![forbid(unsafe_code)]

#[path = "gpu_common/mod.rs"]
mod gpu_common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qfwd::decode::{Decoder, DecoderKind, Shots};
use qfwd::direct::{DataPath, DirectOptions, DirectService, LinkClient};
use qfwd::handler::{parity, Handler, Registry};
use qfwd::idle::IdlePolicy;
use qfwd::mlx5::Doorbell;
use qfwd::stats::DropKind;
use qfwd::transport::udp::UdpClient;
use qfwd::transport::Client;
use qfwd::wire::{self, status, HEADER_LEN};

/// Small queues, so that a few thousand requests wrap every one of them many times.
fn options(links: u32, doorbell: Doorbell) -> DirectOptions {
    options_on(links, doorbell, false)
}

/// [`options`], on the GPU kernel when `gpu`.
fn options_on(links: u32, doorbell: Doorbell, gpu: bool) -> DirectOptions {
    let mut o = DirectOptions::new(links, doorbell, 256);
    if gpu {
        o.gpu = Some(qfwd::gpu::GpuOptions {
            device: gpu_common::gpu_index(),
            ..Default::default()
        });
    }
    o.queues.rx_slots = 8;
    o.queues.rx_cqes = 16;
    o.queues.sq_wqebbs = 16;
    o.queues.tx_cqes = 4;
    o.queues.signal_every = 4;
    o.queues.resp_slots = 8;
    o.queues.idle = IdlePolicy::Yield;
    o
}

fn request(function: &str, id: u32, arg: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_LEN + arg.len()];
    wire::write_request(
        &mut b,
        wire::function_id(function),
        id,
        0x1000 + u64::from(id),
        arg,
    )
    .unwrap();
    b
}

/// Sends `requests` on `client` with at most `window` unanswered, and returns every
/// response by request id. Fails the test if one does not come within seconds.
fn exchange(client: &mut LinkClient, requests: &[Vec<u8>], window: usize) -> HashMap<u32, Vec<u8>> {
    let mut got = HashMap::new();
    let mut next = 0;
    let mut buf = vec![0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < requests.len() {
        while next < requests.len() && next - got.len() < window {
            if !client.send(&requests[next]).unwrap() {
                break;
            }
            next += 1;
        }
        match client.try_recv(&mut buf).unwrap() {
            Some(n) => {
                let r = wire::parse_response(&buf[..n]).expect("a CUQS response");
                assert!(
                    got.insert(r.header.request_id, buf[..n].to_vec()).is_none(),
                    "duplicate"
                );
            }
            None => std::thread::yield_now(),
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} answered",
            got.len(),
            requests.len()
        );
    }
    got
}

fn parity_registry() -> Registry {
    let mut r = Registry::default();
    r.register("parity", Handler::Parity).unwrap();
    r
}

fn wraps_every_queue(doorbell: Doorbell) {
    wraps_every_queue_on(doorbell, false, 3000)
}

fn wraps_every_queue_on(doorbell: Doorbell, gpu: bool, requests_per_link: u32) {
    let started = Instant::now();
    #[allow(non_snake_case)]
    let N = requests_per_link;
    let mut service =
        DirectService::start(&options_on(2, doorbell, gpu), &parity_registry()).unwrap();
    let mut clients: Vec<LinkClient> = (0..2).map(|i| service.link_client(i).unwrap()).collect();
    for (l, client) in clients.iter_mut().enumerate() {
        // Arguments of 8 B land in the CQE; 40 B and 200 B in receive buffers.
        let requests: Vec<Vec<u8>> = (0..N)
            .map(|i| {
                let len = [8usize, 40, 200][(i % 3) as usize];
                let arg: Vec<u8> = (0..len).map(|k| (i as usize * 31 + k + l) as u8).collect();
                request("parity", i, &arg)
            })
            .collect();
        let got = exchange(client, &requests, 6);
        for (i, req) in requests.iter().enumerate() {
            let resp = &got[&(i as u32)];
            let r = wire::parse_response(resp).unwrap();
            assert_eq!(r.header.status, status::OK);
            assert_eq!(
                r.header.ptp_timestamp,
                0x1000 + i as u64,
                "timestamp echoed"
            );
            assert_eq!(
                r.result,
                &[parity(&req[HEADER_LEN..])],
                "link {l} request {i}"
            );
        }
    }
    let nic_rx: Vec<u64> = clients
        .iter()
        .map(|c| {
            c.nic_stats()
                .rx_messages
                .load(std::sync::atomic::Ordering::Relaxed)
        })
        .collect();
    assert_eq!(nic_rx, vec![N as u64; 2]);
    assert!(clients.iter().all(|c| c.overflow() == 0));
    let report = service.stop(Duration::from_secs(5)).unwrap();
    let s = &report.stats;
    assert!(s.adds_up(), "{s}");
    assert_eq!(
        (s.received, s.answered_ok),
        (2 * N as u64, 2 * N as u64),
        "{s}"
    );
    assert_eq!(report.undrained, 0);
    for link in &report.per_link {
        assert_eq!(link.get(qfwd::abi::CTR_POSTED), N as u64);
        assert!(link.get(qfwd::abi::CTR_POLLS) > 0, "the heartbeat moved");
    }
    eprintln!(
        "{doorbell}{}: 2 links x {N} requests in {:?}; torn reads {}, lost claims {}",
        if gpu { " (GPU)" } else { "" },
        started.elapsed(),
        report
            .per_link
            .iter()
            .map(|c| c.get(qfwd::abi::CTR_TORN))
            .sum::<u64>(),
        report
            .per_link
            .iter()
            .map(|c| c.get(qfwd::abi::CTR_LOST_CLAIMS))
            .sum::<u64>()
    );
}

#[test]
#[ignore = "needs a GPU: cargo test --release --test direct_data_path -- --ignored"]
fn gpu_wraps_every_queue_in_every_doorbell_mode() {
    let Some(_gpu) = gpu_common::gpu_or_skip("gpu_wraps_every_queue_in_every_doorbell_mode") else {
        return;
    };
    for doorbell in Doorbell::ALL {
        wraps_every_queue_on(doorbell, true, 20_000);
    }
}

#[test]
fn stand_in_wraps_every_queue_regular() {
    wraps_every_queue(Doorbell::Regular);
}

#[test]
fn stand_in_wraps_every_queue_blueflame() {
    wraps_every_queue(Doorbell::BlueFlame);
}

#[test]
fn stand_in_wraps_every_queue_cpu_assisted() {
    wraps_every_queue(Doorbell::CpuAssisted);
}

/// Malformed and unknown requests get exactly the CPU forwarder's answers and counters.
#[test]
fn malformed_requests_get_the_forwarders_answers() {
    malformed_on(false);
}

#[test]
#[ignore = "needs a GPU: cargo test --release --test direct_data_path -- --ignored"]
fn gpu_malformed_requests_get_the_forwarders_answers() {
    if let Some(_gpu) = gpu_common::gpu_or_skip("gpu_malformed_requests") {
        malformed_on(true);
    }
}

fn malformed_on(gpu: bool) {
    let mut service =
        DirectService::start(&options_on(1, Doorbell::Regular, gpu), &parity_registry()).unwrap();
    let mut client = service.link_client(0).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut bad_magic = request("parity", 2, &[1]);
    bad_magic[0] ^= 0xff;
    let mut mismatch = request("parity", 3, &[1, 2, 3]);
    mismatch[8] = 9; // arg_len 9, 3 bytes follow
    let mut oversized = request("parity", 4, &[0; 200]);
    oversized[8..12].copy_from_slice(&300u32.to_le_bytes());
    let cases: Vec<(Vec<u8>, Option<i32>)> = vec![
        (vec![0x51; 10], None), // truncated: dropped
        (bad_magic, None),      // dropped
        (mismatch, Some(status::LENGTH_MISMATCH)),
        (oversized, Some(status::OVERSIZED)),
        // Over the 256 B limit and longer than the 320 B buffer (the NIC truncates it).
        (request("parity", 5, &[0; 300]), Some(status::OVERSIZED)),
        (request("nobody", 6, &[1]), Some(status::UNKNOWN_FUNCTION)),
        (request("parity", 7, &[3]), Some(status::OK)),
    ];
    for (req, want) in &cases {
        assert!(client.send(req).unwrap());
        let deadline = Instant::now() + Duration::from_secs(5);
        match want {
            None => {
                // Nothing comes back: the next good request's answer is the next datagram.
                let probe = request("parity", 99, &[1]);
                assert!(client.send(&probe).unwrap());
                let n = loop {
                    if let Some(n) = client.try_recv(&mut buf).unwrap() {
                        break n;
                    }
                    assert!(Instant::now() < deadline);
                };
                assert_eq!(
                    wire::parse_response(&buf[..n]).unwrap().header.request_id,
                    99
                );
            }
            Some(code) => {
                let n = loop {
                    if let Some(n) = client.try_recv(&mut buf).unwrap() {
                        break n;
                    }
                    assert!(Instant::now() < deadline);
                };
                let r = wire::parse_response(&buf[..n]).unwrap();
                assert_eq!(r.header.status, *code, "request {}", r.header.request_id);
            }
        }
    }
    let report = service.stop(Duration::from_secs(5)).unwrap();
    let s = &report.stats;
    assert!(s.adds_up(), "{s}");
    assert_eq!(s.received, 9, "7 cases and 2 probes");
    assert_eq!(s.dropped(DropKind::TruncatedHeader), 1);
    assert_eq!(s.dropped(DropKind::BadMagic), 1);
    assert_eq!(s.answered_with(status::LENGTH_MISMATCH), 1);
    assert_eq!(s.answered_with(status::OVERSIZED), 2);
    assert_eq!(s.answered_with(status::UNKNOWN_FUNCTION), 1);
    assert_eq!(s.answered_ok, 3);
}

/// A decoder over the direct path answers every fixture shot as the CPU decoder does.
#[test]
fn decoder_answers_match_the_cpu_reference() {
    decoder_matches("surface_d3_r3_z_p005", DecoderKind::Uf, false, 2000);
}

/// lut d=3, uf d=5 and d=7 on the GPU kernel: every fixture shot's correction equals the
/// CPU decoder's.
#[test]
#[ignore = "needs a GPU: cargo test --release --test direct_data_path -- --ignored"]
fn gpu_decoder_answers_match_the_cpu_reference() {
    let Some(_gpu) = gpu_common::gpu_or_skip("gpu_decoder_answers_match_the_cpu_reference") else {
        return;
    };
    for (name, kind) in [
        ("surface_d3_r3_z_p001", DecoderKind::Lut),
        ("surface_d5_r5_z_p001", DecoderKind::Uf),
        ("surface_d7_r7_z_p001", DecoderKind::Uf),
        ("surface_d7_r7_x_p005", DecoderKind::Uf),
    ] {
        decoder_matches(name, kind, true, usize::MAX);
    }
}

fn decoder_matches(name: &str, kind: DecoderKind, gpu: bool, most: usize) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dec = Arc::new(Decoder::from_dem_path(&dir.join(format!("{name}.dem")), kind).unwrap());
    let shots = Shots::read(&dir.join(format!("{name}.b8")), dec.num_detectors(), None).unwrap();
    let mut reg = Registry::default();
    reg.register("decode", Handler::Decoder(Arc::clone(&dec)))
        .unwrap();
    let mut service = DirectService::start(&options_on(1, Doorbell::BlueFlame, gpu), &reg).unwrap();
    let mut client = service.link_client(0).unwrap();
    let n = shots.len().min(most);
    let requests: Vec<Vec<u8>> = (0..n)
        .map(|i| request("decode", i as u32, &dec.payload(shots.row(i))))
        .collect();
    let got = exchange(&mut client, &requests, 4);
    let mut scratch = dec.new_scratch();
    for i in 0..n {
        let r = wire::parse_response(&got[&(i as u32)]).unwrap();
        assert_eq!(r.header.status, status::OK, "{name} shot {i}");
        assert_eq!(
            r.result,
            dec.result_bytes(dec.decode(&mut scratch, shots.row(i))),
            "{name} shot {i}"
        );
    }
    let report = service.stop(Duration::from_secs(5)).unwrap();
    assert!(report.stats.adds_up());
    assert_eq!(report.stats.answered_ok, n as u64);
    let gpu = if gpu { " (GPU)" } else { "" };
    eprintln!("{name} {kind}{gpu}: {n} shots, every correction equal to the CPU decoder's");
}

/// `qfwd run --data-path gpu-direct --transport softnic`: a soft NIC thread per link takes
/// UDP datagrams into the queues and sends what the device side posts.
#[test]
fn soft_nic_serves_the_links_over_udp() {
    let mut service =
        DirectService::start(&options(2, Doorbell::Regular), &parity_registry()).unwrap();
    let addrs =
        qfwd::serve::wiring::direct_udp(&mut service, "127.0.0.1:0".parse().unwrap(), &[]).unwrap();
    assert_eq!(addrs.len(), 2);
    let mut buf = vec![0u8; 4096];
    for (l, addr) in addrs.iter().enumerate() {
        let mut client = UdpClient::connect(*addr).unwrap();
        for i in 0..200u32 {
            let arg = [i as u8, l as u8, 7];
            assert!(client.send(&request("parity", i, &arg)).unwrap());
            let deadline = Instant::now() + Duration::from_secs(5);
            let n = loop {
                if let Some(n) = client.try_recv(&mut buf).unwrap() {
                    break n;
                }
                assert!(Instant::now() < deadline, "link {l} request {i} unanswered");
                std::thread::yield_now();
            };
            let r = wire::parse_response(&buf[..n]).unwrap();
            assert_eq!((r.header.request_id, r.result), (i, &[parity(&arg)][..]));
        }
    }
    let report = service.stop(Duration::from_secs(5)).unwrap();
    assert!(report.stats.adds_up());
    assert_eq!(report.stats.answered_ok, 400);
    assert_eq!(report.nics.iter().map(|n| n.wire_sent).sum::<u64>(), 400);
}

#[test]
fn each_link_has_one_nic_and_names_parse() {
    let mut service =
        DirectService::start(&options(1, Doorbell::Regular), &parity_registry()).unwrap();
    let _c = service.link_client(0).unwrap();
    assert!(service.link_client(0).is_err());
    assert!(service.link_client(1).is_err());
    assert_eq!(
        "gpu-direct".parse::<DataPath>().unwrap(),
        DataPath::GpuDirect
    );
    assert_eq!(
        "cpu-forwarded".parse::<DataPath>().unwrap(),
        DataPath::CpuForwarded
    );
    assert!("gpu".parse::<DataPath>().is_err());
    service.stop(Duration::from_secs(1)).unwrap();
}
