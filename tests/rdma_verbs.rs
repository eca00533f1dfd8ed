//! The RoCE path. Without hardware (CI): `qfwd doctor` reports what it finds and the verbs
//! path fails with a clear error, never a panic. With hardware (`#[ignore]`d): a loopback
//! through one RDMA device — the QPU side (`RdmaClient`) writes requests with
//! WRITE-with-immediate into qfwd's ring, the forwarding loop answers with SENDs.
//!
//! Run the hardware tests on a host with a RoCE-capable NIC (ConnectX, port up, a RoCEv2
//! GID configured), building with the `rdma` feature:
//!
//! ```text
//! QFWD_RDMA_DEVICE=mlx5_0 cargo test --release --features rdma --test rdma_verbs -- --ignored --nocapture
//! ```
//!
//! (`QFWD_RDMA_PORT`, `QFWD_RDMA_GID_INDEX` override port 1 and the RoCEv2 GID the kernel lists.)
#![forbid(unsafe_code)]

use qfwd::doctor::{self, DoctorArgs};
use qfwd::mlx5::Doorbell;

#[test]
fn doctor_reports_without_panicking() {
    let report = doctor::diagnose(&DoctorArgs {
        no_gpu: true,
        ..Default::default()
    });
    let text = report.render();
    println!("{text}");
    assert!(text.contains("== RDMA devices"));
    assert!(text.contains("== Doorbell modes"));
    if report.devices.is_empty() {
        assert!(
            text.contains("no RDMA device found (looked in /sys/class/infiniband"),
            "{text}"
        );
    }
    for d in Doorbell::ALL {
        assert!(report
            .doorbells
            .iter()
            .any(|a| a.doorbell == d && a.path == "softnic" && a.usable));
    }
    // With the GPU probe too: a host without CUDA gets a reason, not a panic.
    doctor::run(&DoctorArgs::default()).unwrap();
}

#[cfg(feature = "rdma")]
mod verbs {
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use qfwd::backend::CpuBackend;
    use qfwd::forward::{ForwardConfig, Forwarder, IdlePolicy, StopWhen};
    use qfwd::handler::{parity, Registry};
    use qfwd::rdma::{RdmaClient, RdmaConfig, RdmaListener};
    use qfwd::transport::Client;
    use qfwd::wire::{self, function_id, status};
    use qfwd::Error;

    fn config(control: SocketAddr) -> RdmaConfig {
        let env = |k: &str| std::env::var(k).ok();
        RdmaConfig {
            device: env("QFWD_RDMA_DEVICE"),
            port: env("QFWD_RDMA_PORT")
                .and_then(|p| p.parse().ok())
                .unwrap_or(1),
            gid_index: env("QFWD_RDMA_GID_INDEX").and_then(|g| g.parse().ok()),
            control,
            handshake_timeout: Duration::from_secs(10),
            slot_bytes: 1024,
            ..Default::default()
        }
    }

    /// On a host without an RDMA device the error names what was looked at.
    #[test]
    fn no_device_is_a_clear_error() {
        if !qfwd::rdma::verbs::device_names().is_empty() {
            eprintln!("SKIP: this host has RDMA devices");
            return;
        }
        let Err(e) = RdmaListener::bind(&config("127.0.0.1:0".parse().unwrap())) else {
            panic!("bind succeeded without a device");
        };
        assert!(matches!(e, Error::NoRdmaDevice { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.starts_with("no RDMA device found (looked in /sys/class/infiniband"),
            "{msg}"
        );
    }

    /// One device, two QPs (qfwd and the QPU side), through the NIC's loopback.
    #[test]
    #[ignore = "needs an RDMA device: QFWD_RDMA_DEVICE=mlx5_0 cargo test --features rdma --test rdma_verbs -- --ignored"]
    fn loopback_write_imm_requests_and_send_responses() {
        let listener =
            RdmaListener::bind(&config("127.0.0.1:0".parse().unwrap())).expect("RDMA device");
        let control = listener.control_addr().unwrap();
        let server = std::thread::spawn(move || listener.accept());
        let mut client = RdmaClient::connect(&config("127.0.0.1:0".parse().unwrap()), control)
            .expect("QPU side");
        let transport = server.join().unwrap().expect("accept");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let fwd = std::thread::spawn(move || {
            let fc = ForwardConfig {
                max_request_bytes: 1000,
                idle: IdlePolicy::Spin,
                ..Default::default()
            };
            let mut f = Forwarder::new(
                transport,
                CpuBackend::new(fc.batch, 1000),
                Registry::with_parity(),
                fc,
            );
            let stats = f
                .run(
                    StopWhen {
                        flag: &flag,
                        deadline: None,
                    },
                    None,
                    |_, _| {},
                )
                .unwrap();
            (stats, f.transport().counters())
        });
        let mut req = [0u8; 1024];
        let mut resp = [0u8; 1024];
        const N: u32 = 10_000;
        let started = Instant::now();
        let mut rtts = Vec::with_capacity(N as usize);
        for i in 0..N {
            let payload: Vec<u8> = (0..32).map(|k| (i + k) as u8).collect();
            let n = wire::write_request(&mut req, function_id("parity"), i, i as u64, &payload)
                .unwrap();
            let t0 = Instant::now();
            assert!(client.send(&req[..n]).unwrap());
            let deadline = t0 + Duration::from_secs(1);
            let m = loop {
                if let Some(m) = client.try_recv(&mut resp).unwrap() {
                    break m;
                }
                assert!(Instant::now() < deadline, "no answer to request {i}");
            };
            rtts.push(t0.elapsed());
            let r = wire::parse_response(&resp[..m]).unwrap();
            assert_eq!((r.header.request_id, r.header.status), (i, status::OK));
            assert_eq!(r.result, &[parity(&payload)]);
        }
        rtts.sort();
        println!(
            "{N} round trips in {:?}: p50 {:?} p99 {:?} max {:?} ({})",
            started.elapsed(),
            rtts[rtts.len() / 2],
            rtts[rtts.len() * 99 / 100],
            rtts[rtts.len() - 1],
            client.describe()
        );
        client.stop().ok();
        stop.store(true, Ordering::Relaxed);
        let (stats, counters) = fwd.join().unwrap();
        assert_eq!(stats.answered_ok, N as u64);
        assert_eq!(
            counters.completion_errors + counters.unexpected,
            0,
            "{counters:?}"
        );
    }

    /// The mlx5 direct view of a real QP: SQ, doorbell record, BlueFlame register.
    #[test]
    #[ignore = "needs an mlx5 device: QFWD_RDMA_DEVICE=mlx5_0 cargo test --features rdma --test rdma_verbs -- --ignored"]
    fn mlx5dv_init_obj_describes_a_real_qp() {
        use qfwd::rdma::verbs::{Context, Cq, Pd, Qp, QpKind};
        let name = std::env::var("QFWD_RDMA_DEVICE").ok();
        let ctx = Context::open(name.as_deref()).expect("RDMA device");
        let pd = Pd::new(&ctx).unwrap();
        let cq = Cq::new(&ctx, 64).unwrap();
        let qp = Qp::new(&pd, &cq, &cq, QpKind::Uc, 64, 64, 128).unwrap();
        let dv = qp.mlx5_direct(&cq).expect("an mlx5 device");
        println!("{dv:#x?}");
        assert_eq!(dv.sq_stride, 64);
        assert!(dv.sq_wqe_cnt.is_power_of_two() && dv.sq_wqe_cnt >= 64);
        assert!(dv.cqe_cnt.is_power_of_two() && dv.cqe_size == 64);
        assert!(dv.dbrec != 0 && dv.sq_buf != 0 && dv.cq_buf != 0);
    }
}
