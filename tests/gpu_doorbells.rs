//! GPU-initiated sends through the soft NIC (`regular` and `blueflame`,
//! docs/architecture.md): the persistent kernel builds each response's SEND WQE in the
//! NIC's send queue (pinned, GPU-mapped memory), updates the doorbell record and rings the
//! doorbell itself.
//!
//! `forward_doorbell_program_compiles_for_sm_90` needs only NVRTC (it skips without it,
//! unless `QFWD_REQUIRE_NVRTC=1`). The rest need an NVIDIA GPU and are `#[ignore]`d; run
//! them on the GPU host with:
//!
//! ```text
//! cargo test --release --test gpu_doorbells -- --ignored --test-threads=1
//! ```
//!
//! Each prints a skip notice and passes where no GPU is present. `QFWD_GPU` picks the
//! device (default 0).

mod gpu_common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_common::{gpu_index, gpu_or_skip};
use qfwd::abi::NicPostsParams;
use qfwd::forward::{ForwardConfig, Forwarder, IdlePolicy, StopWhen};
use qfwd::gpu::context::GpuContext;
use qfwd::gpu::memory::device_address_of;
use qfwd::gpu::nvrtc::{self, FORWARD_DOORBELL};
use qfwd::gpu::{self, DeviceBuffer, GpuOptions, Module, Stream};
use qfwd::handler::{parity, Registry};
use qfwd::mlx5::Doorbell;
use qfwd::queues::posting as device;
use qfwd::serve::wiring;
use qfwd::softnic::{self, DevicePostCounters, NicLayout, SoftNicConfig};
use qfwd::transport::Client;
use qfwd::wire::{self, function_id, status};

#[test]
fn forward_doorbell_program_compiles_for_sm_90() {
    if !nvrtc::nvrtc_available() {
        assert!(
            std::env::var("QFWD_REQUIRE_NVRTC").as_deref() != Ok("1"),
            "QFWD_REQUIRE_NVRTC=1 but libnvrtc cannot be loaded"
        );
        eprintln!("SKIP forward_doorbell_program_compiles_for_sm_90: libnvrtc not found");
        return;
    }
    let c = nvrtc::compile(&FORWARD_DOORBELL, "sm_90").unwrap_or_else(|e| panic!("{e}"));
    assert!(!c.has_warnings(), "warnings:\n{}", c.log);
    for entry in [
        "qfwd_persistent",
        "qfwd_serve_once",
        "qfwd_doorbell_nic_posts",
    ] {
        assert!(
            c.ptx.contains(&format!(".entry {entry}")),
            "{entry} missing"
        );
    }
    // The posting lock is a device-memory CAS with gpu-scope acquire/release.
    assert!(c.ptx.contains("atom.acquire.gpu"));
    assert!(c.ptx.contains("st.release.gpu"));
}

/// Small enough to wrap the SQ and CQs many times; the soft NIC thread spins on a GPU
/// host (16 cores).
fn nic_config(doorbell: Doorbell) -> SoftNicConfig {
    SoftNicConfig {
        idle: IdlePolicy::Spin,
        ..SoftNicConfig::new(doorbell)
    }
}

/// The persistent kernel answers through the NIC: every answer is checked by an
/// emulator-side client; forwarder, NIC and kernel counters add up.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_doorbells -- --ignored"]
fn persistent_kernel_rings_the_soft_nic_in_both_doorbell_modes() {
    let Some(_gpu) = gpu_or_skip("persistent_kernel_rings_the_soft_nic_in_both_doorbell_modes")
    else {
        return;
    };
    for doorbell in [Doorbell::Regular, Doorbell::BlueFlame] {
        for (pollers, per_slot) in [(1u32, 1u32), (8, 2)] {
            let (counters, nic, p50) = exchange(doorbell, pollers, per_slot, 20_000);
            eprintln!(
                "{doorbell}, {pollers} pollers ({per_slot} per slot): ping-pong p50 {:.2} us; \
                 device {counters:?}; NIC doorbells {}, SQ reads {}",
                p50 as f64 / 1e3,
                nic.doorbells,
                nic.sq_dma_reads
            );
        }
    }
}

/// Runs `n` requests (the first half with up to 8 in flight, the rest one at a time, timed)
/// through a forwarder whose kernel posts with `doorbell`; returns the kernel's posting
/// counters, the NIC's, and the ping-pong p50 in ns.
fn exchange(
    doorbell: Doorbell,
    pollers: u32,
    per_slot: u32,
    n: u32,
) -> (DevicePostCounters, softnic::NicCounters, u64) {
    let cfg = nic_config(doorbell);
    let layout = NicLayout::new(&cfg).unwrap();
    let region = gpu::mapped_nic_region(gpu_index(), layout.len).unwrap();
    let (mut client, transport) = wiring::softnic_inproc_in(&cfg, region, true).unwrap();
    let posting = transport.device_posting().unwrap();
    let options = GpuOptions {
        device: gpu_index(),
        pollers,
        pollers_per_slot: per_slot,
        ..GpuOptions::default()
    };
    let backend = gpu::persistent_backend_with_nic(&options, &posting).unwrap();
    let fc = ForwardConfig {
        max_request_bytes: 1000,
        idle: IdlePolicy::Spin,
        watchdog: Duration::from_secs(5),
        ..Default::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let fwd = std::thread::spawn(move || {
        let mut fwd = Forwarder::new(transport, backend, Registry::with_parity(), fc);
        fwd.run(
            StopWhen {
                flag: &flag,
                deadline: Some(Instant::now() + Duration::from_secs(120)),
            },
            None,
            |_, _| {},
        )
        .expect("forwarder loop");
        fwd
    });

    let parity_id = function_id("parity");
    let payload = |i: u32| -> Vec<u8> {
        let len = if i % 2 == 0 {
            32
        } else {
            1 + (i as usize * 13) % 256
        };
        (0..len)
            .map(|k| (i.wrapping_mul(29) ^ k as u32) as u8)
            .collect()
    };
    let mut pending: HashMap<u32, (Vec<u8>, Instant)> = HashMap::new();
    let mut rtts = Vec::with_capacity(n as usize / 2);
    let mut req = vec![0u8; 2048];
    let mut resp = vec![0u8; 70_000];
    let (mut sent, mut got) = (0u32, 0u32);
    let deadline = Instant::now() + Duration::from_secs(60);
    while got < n {
        assert!(
            Instant::now() < deadline,
            "{doorbell}: stalled at {sent} sent, {got} answered"
        );
        let window = if sent < n / 2 { 8 } else { 1 };
        if sent < n && sent - got < window {
            let p = payload(sent);
            let len = wire::write_request(&mut req, parity_id, sent, 77 + sent as u64, &p).unwrap();
            if client.send(&req[..len]).unwrap() {
                pending.insert(sent, (p, Instant::now()));
                sent += 1;
            }
        }
        if let Some(len) = client.try_recv(&mut resp).unwrap() {
            let at = Instant::now();
            let r = wire::parse_response(&resp[..len]).expect("a CUQS response");
            let id = r.header.request_id;
            let (p, t0) = pending
                .remove(&id)
                .unwrap_or_else(|| panic!("{doorbell}: answer {id} unknown or twice"));
            assert_eq!(r.header.status, status::OK, "{doorbell}: request {id}");
            assert_eq!(r.header.ptp_timestamp, 77 + id as u64);
            assert_eq!(r.result, &[parity(&p)], "{doorbell}: parity of {id}");
            if id >= n / 2 {
                rtts.push((at - t0).as_nanos() as u64);
            }
            got += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let fwd = fwd.join().unwrap();
    let s = fwd.stats();
    assert_eq!(s.received, n as u64);
    assert_eq!(s.answered_ok, n as u64);
    assert!(s.adds_up(), "{s}");
    let t = fwd.transport().counters();
    assert_eq!(t.posted, 0, "the host sent nothing: {t:?}");
    let nic = fwd.transport().nic_counters();
    assert_eq!(nic.wire_sent, n as u64, "{nic:?}");
    assert_eq!(nic.wqes_executed, n as u64, "{nic:?}");
    assert_eq!(nic.error_cqes + nic.host_sends, 0, "{nic:?}");
    assert!(nic.doorbells >= 1 && nic.doorbells <= n as u64, "{nic:?}");
    let mut backend = fwd.into_backend();
    backend.shutdown(Duration::from_secs(2)).unwrap();
    let counters = backend.device().nic_counters().expect("kernel counters");
    assert_eq!(counters.posted, n as u64, "{counters:?}");
    assert_eq!(counters.fallbacks + counters.error_cqes, 0, "{counters:?}");
    rtts.sort_unstable();
    (counters, nic, rtts[rtts.len() / 2])
}

/// Many warps post through one send queue at once (`qfwd_doorbell_nic_posts`): every
/// message reaches the wire exactly once, intact.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_doorbells -- --ignored"]
fn concurrent_warps_post_every_message_exactly_once() {
    let Some(_gpu) = gpu_or_skip("concurrent_warps_post_every_message_exactly_once") else {
        return;
    };
    const WARPS: u32 = 32;
    const PER_WARP: u32 = 300;
    const LEN: u32 = 40;
    for doorbell in [Doorbell::Regular, Doorbell::BlueFlame] {
        let cfg = nic_config(doorbell);
        let layout = NicLayout::new(&cfg).unwrap();
        let region = gpu::mapped_nic_region(gpu_index(), layout.len).unwrap();
        let (mut client, mut transport) = wiring::softnic_inproc_in(&cfg, region, true).unwrap();
        // One request connects the QP to the client.
        let mut buf = vec![0u8; 4096];
        let n = wire::write_request(&mut buf, 1, 0, 0, &[]).unwrap();
        assert!(client.send(&buf[..n]).unwrap());
        let t0 = Instant::now();
        while qfwd::transport::Transport::try_recv(&mut transport, &mut buf)
            .unwrap()
            .is_none()
        {
            assert!(t0.elapsed() < Duration::from_secs(5), "no request");
        }
        let posting = transport.device_posting().unwrap();

        let ctx = GpuContext::open(gpu_index()).unwrap();
        let module = Module::compile_and_load(&ctx, &FORWARD_DOORBELL).unwrap();
        let kernel = module.kernel::<NicPostsParams>().unwrap();
        let base = device_address_of(&ctx, posting.region().host_addr(0), "NIC").unwrap();
        let block = DeviceBuffer::zeroed(&ctx, device::BLOCK_BYTES).unwrap();
        block
            .write_u64s(&posting.desc(base).to_u64_words())
            .unwrap();
        let result = DeviceBuffer::zeroed(&ctx, WARPS as usize * 4).unwrap();
        let stream = Stream::new(&ctx).unwrap();
        let params = NicPostsParams {
            nic: block.device_ptr(),
            result: result.device_ptr(),
            n: PER_WARP,
            len: LEN,
        };
        // SAFETY: the block, result buffer and NIC region outlive the kernel (waited for
        // below).
        let launched = Instant::now();
        unsafe { kernel.launch(&ctx, &stream, WARPS, 32, 0, &params) }.unwrap();

        let mut seen: HashMap<u32, u32> = HashMap::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.len() < (WARPS * PER_WARP) as usize {
            assert!(
                Instant::now() < deadline,
                "{doorbell}: {} of {} messages",
                seen.len(),
                WARPS * PER_WARP
            );
            if let Some(n) = client.try_recv(&mut buf).unwrap() {
                assert_eq!(n, LEN as usize);
                let id = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
                let (w, m) = (id >> 16, id & 0xffff);
                for (k, &b) in buf[..n].iter().enumerate().skip(4) {
                    assert_eq!(
                        b as u32,
                        (w * 7 + m + k as u32) & 0xff,
                        "{doorbell}: byte {k} of warp {w} message {m}"
                    );
                }
                *seen.entry(id).or_default() += 1;
            }
        }
        assert!(
            seen.values().all(|&c| c == 1),
            "{doorbell}: a message came twice"
        );
        while !stream.query().unwrap() {
            assert!(Instant::now() < deadline, "kernel did not finish");
        }
        let took = launched.elapsed();
        let mut words = vec![0u64; WARPS as usize / 2];
        result.read_u64s(&mut words).unwrap();
        let posted: u64 = words.iter().map(|w| (w & 0xffff_ffff) + (w >> 32)).sum();
        assert_eq!(posted, (WARPS * PER_WARP) as u64);
        let mut cw = vec![0u64; device::BLOCK_BYTES / 8];
        block.read_u64s(&mut cw).unwrap();
        let c = DevicePostCounters::from_words(&cw[device::COUNTERS_OFFSET / 8..]);
        assert_eq!(c.posted, (WARPS * PER_WARP) as u64, "{c:?}");
        assert_eq!(c.fallbacks + c.error_cqes, 0, "{c:?}");
        let nic_c = transport.nic_counters();
        assert_eq!(nic_c.error_cqes, 0, "{nic_c:?}");
        eprintln!(
            "{doorbell}: {WARPS} warps x {PER_WARP} posts in {took:?} ({:.2} us per post, \
             posts serialized by the lock): {c:?}",
            took.as_secs_f64() * 1e6 / (WARPS * PER_WARP) as f64
        );
        drop(stream);
        drop(module);
    }
}
