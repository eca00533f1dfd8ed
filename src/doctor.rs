//! `qfwd doctor`: what this host offers the appliance — RDMA devices, ports, GIDs and link
//! state, GPUs, and which doorbell modes (docs/architecture.md) can be used here, each with
//! the reason when not.
//!
//! [`diagnose`] gathers a [`Report`] (testable, no printing); [`run`] prints it. Nothing
//! here needs a GPU, an RDMA device or the `rdma` feature to run: what is missing is
//! reported, never a panic.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::mlx5::Doorbell;
use crate::rdma::sysfs::{self, Device};

pub mod gpu_direct;

/// Options of `qfwd doctor`.
#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// Only this RDMA device (default: $QFWD_RDMA_DEVICE, else every device).
    #[arg(long)]
    pub device: Option<String>,
    /// Do not open devices with ibverbs (by default, with the `rdma` feature, each mlx5
    /// device gets a throwaway queue pair to read its BlueFlame register size).
    #[arg(long)]
    pub no_verbs: bool,
    /// Do not look for GPUs.
    #[arg(long)]
    pub no_gpu: bool,
    /// Also measure host jitter for this many seconds: one thread spins on the clock on
    /// each core (all at once) and counts the gaps when it did not run. Ranks the cores
    /// quietest first, for pinning the forwarder and the emulator.
    #[arg(long, value_name = "SECONDS")]
    pub jitter: Option<f64>,
    /// Cores for --jitter (comma-separated) [default: every online core].
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires = "jitter")]
    pub jitter_cores: Vec<usize>,
    /// Where the kernel lists RDMA devices.
    #[arg(long, default_value = sysfs::SYSFS_ROOT, hide = true)]
    pub sysfs_root: PathBuf,
    /// The cores qfwd will run on (comma-separated), for the lab host checks (isolated,
    /// no tick, no deep C-states, no NIC interrupts) [default: the isolated cores].
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub cores: Vec<usize>,
    /// text, or json (one object: lab host checks, RDMA devices, GPUs, doorbell modes).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// Root of the proc filesystem the lab host checks read (tests use fake trees).
    #[arg(long, default_value = "/proc", hide = true)]
    pub proc_root: PathBuf,
    /// Root of the sys filesystem the lab host checks read.
    #[arg(long, default_value = "/sys", hide = true)]
    pub sys_root: PathBuf,
    /// The nvidia-smi the GPU checks run.
    #[arg(long, default_value = "nvidia-smi", hide = true)]
    pub nvidia_smi: PathBuf,
}

impl Default for DoctorArgs {
    fn default() -> Self {
        DoctorArgs {
            device: None,
            no_verbs: false,
            no_gpu: false,
            jitter: None,
            jitter_cores: Vec::new(),
            sysfs_root: PathBuf::from(sysfs::SYSFS_ROOT),
            cores: Vec::new(),
            format: "text".into(),
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            nvidia_smi: PathBuf::from("nvidia-smi"),
        }
    }
}

impl DoctorArgs {
    /// Where the lab host checks look.
    pub fn roots(&self) -> crate::tuning::Roots {
        crate::tuning::Roots {
            proc: self.proc_root.clone(),
            sys: self.sys_root.clone(),
            nvidia_smi: (!self.no_gpu).then(|| self.nvidia_smi.clone()),
            cores: self.cores.clone(),
        }
    }
}

/// Whether a doorbell mode can be used, and why (not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Availability {
    pub doorbell: Doorbell,
    /// Where: `softnic` (CPU posting), `softnic+gpu`, `rdma` (real NIC).
    pub path: &'static str,
    pub usable: bool,
    pub reason: String,
}

/// What a verbs probe of one device found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsProbe {
    pub device: String,
    /// BlueFlame half size from `mlx5dv_init_obj` (0: none), or why it is unknown.
    pub bf_size: Result<u32, String>,
}

/// Everything `qfwd doctor` found.
#[derive(Debug, Clone)]
pub struct Report {
    pub sysfs_root: PathBuf,
    pub rdma_feature: bool,
    pub devices: Vec<Device>,
    /// Devices libibverbs lists (with the `rdma` feature).
    pub verbs_devices: Option<Vec<String>>,
    pub verbs_probes: Vec<VerbsProbe>,
    /// One line per GPU, or why there is none.
    pub gpus: Result<Vec<GpuLine>, String>,
    pub doorbells: Vec<Availability>,
    /// Lab host checks: isolation, governor, C-states, THP, memlock, IRQs, GPU clocks.
    pub lab: Vec<crate::tuning::Check>,
    /// What the `gpu-direct` kernel on a ConnectX needs ([`gpu_direct`]).
    pub gpu_direct: Vec<crate::tuning::Check>,
    /// GPU and NIC probed together (the `rdma` feature), for the doorbell lines.
    pub gpu_nic_probes: Vec<gpu_direct::Probe>,
}

/// A GPU as the doctor reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuLine {
    pub text: String,
    pub pci_bus_id: String,
    pub can_map_host_memory: bool,
}

impl Report {
    /// Devices with at least one active RoCE (Ethernet) port.
    pub fn roce_ready(&self) -> Vec<&Device> {
        self.devices
            .iter()
            .filter(|d| d.ports.iter().any(|p| p.is_active() && p.is_roce()))
            .collect()
    }

    /// Lab host checks that failed.
    pub fn failed(&self) -> usize {
        self.lab
            .iter()
            .filter(|c| c.status == crate::tuning::Status::Fail)
            .count()
    }

    /// The whole report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "lab_host": self.lab,
            "gpu_direct": self.gpu_direct,
            "rdma_feature": self.rdma_feature,
            "rdma_devices": self.devices.iter().map(|d| serde_json::json!({
                "name": d.name,
                "driver": d.driver,
                "firmware": d.firmware,
                "pci": d.pci,
                "ports": d.ports.iter().map(|p| serde_json::json!({
                    "number": p.number,
                    "state": p.state,
                    "link_layer": p.link_layer,
                    "rate": p.rate,
                    "roce": p.is_roce(),
                    "active": p.is_active(),
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "gpus": match &self.gpus {
                Ok(g) => serde_json::json!(g.iter().map(|l| serde_json::json!({
                    "description": l.text,
                    "pci_bus_id": l.pci_bus_id,
                    "can_map_host_memory": l.can_map_host_memory,
                })).collect::<Vec<_>>()),
                Err(e) => serde_json::json!({ "none": e }),
            },
            "doorbells": self.doorbells.iter().map(|a| serde_json::json!({
                "doorbell": a.doorbell,
                "path": a.path,
                "usable": a.usable,
                "reason": a.reason,
            })).collect::<Vec<_>>(),
        })
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "== Lab host");
        for c in &self.lab {
            let _ = writeln!(s, "{c}");
        }
        if !self.gpu_direct.is_empty() {
            let _ = writeln!(s, "== gpu-direct on a ConnectX (docs/lab-gpu-direct.md)");
            for c in &self.gpu_direct {
                let _ = writeln!(s, "{c}");
            }
        }
        self.render_rdma(&mut s);
        self.render_gpus(&mut s);
        self.render_doorbells(&mut s);
        s
    }

    /// The RDMA devices, their ports and GIDs, and what libibverbs says.
    fn render_rdma(&self, s: &mut String) {
        let _ = writeln!(s, "== RDMA devices ({})", self.sysfs_root.display());
        if self.devices.is_empty() {
            let _ = writeln!(
                s,
                "  no RDMA device found (looked in {}: {})",
                self.sysfs_root.display(),
                sysfs::summary(&self.sysfs_root, &self.devices)
            );
        }
        for d in &self.devices {
            let _ = writeln!(
                s,
                "  {}  driver {}  firmware {}  PCI {}{}",
                d.name,
                d.driver.as_deref().unwrap_or("?"),
                d.firmware.as_deref().unwrap_or("?"),
                d.pci.as_deref().unwrap_or("?"),
                numa(d.pci.as_deref())
                    .map(|n| format!("  NUMA {n}"))
                    .unwrap_or_default()
            );
            for p in &d.ports {
                let _ = writeln!(
                    s,
                    "    port {}: {} ({}), {}, {}",
                    p.number, p.state, p.phys_state, p.link_layer, p.rate
                );
                for g in &p.gids {
                    let _ = writeln!(
                        s,
                        "      gid[{}] {} {}{}",
                        g.index,
                        g.gid,
                        g.kind.as_deref().unwrap_or("?"),
                        g.netdev
                            .as_deref()
                            .map(|n| format!(" on {n}"))
                            .unwrap_or_default()
                    );
                }
            }
        }
        if !self.rdma_feature {
            let _ = writeln!(
                s,
                "  this qfwd was built without the `rdma` feature: no ibverbs (rebuild with \
                 `cargo build --features rdma`, which needs libibverbs-dev)"
            );
        }
        match &self.verbs_devices {
            Some(v) if v.is_empty() => {
                let _ = writeln!(s, "  libibverbs lists no device");
            }
            Some(v) => {
                let _ = writeln!(s, "  libibverbs lists: {}", v.join(", "));
            }
            None => {}
        }
        for p in &self.verbs_probes {
            let _ = match &p.bf_size {
                Ok(0) => writeln!(s, "  {}: no BlueFlame register (bf.size 0)", p.device),
                Ok(n) => writeln!(s, "  {}: BlueFlame register, {n} bytes per half", p.device),
                Err(e) => writeln!(s, "  {}: BlueFlame size unknown: {e}", p.device),
            };
        }
    }

    /// The GPUs, with their NUMA nodes.
    fn render_gpus(&self, s: &mut String) {
        let _ = writeln!(s, "== GPUs");
        match &self.gpus {
            Ok(g) if g.is_empty() => {
                let _ = writeln!(s, "  none");
            }
            Ok(g) => {
                for l in g {
                    let _ = writeln!(
                        s,
                        "  {}{}",
                        l.text,
                        numa(Some(&l.pci_bus_id.to_ascii_lowercase()))
                            .map(|n| format!("  NUMA {n}"))
                            .unwrap_or_default()
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(s, "  {e}");
            }
        }
    }

    /// Which doorbell mode works on which path, and why.
    fn render_doorbells(&self, s: &mut String) {
        let _ = writeln!(s, "== Doorbell modes");
        for a in &self.doorbells {
            let _ = writeln!(
                s,
                "  {:<12} {:<12} {}  {}",
                a.doorbell.as_str(),
                a.path,
                if a.usable { "yes" } else { "no " },
                a.reason
            );
        }
    }
}

/// NUMA node of a PCI function, from sysfs.
fn numa(pci: Option<&str>) -> Option<String> {
    let pci = pci?;
    let v = std::fs::read_to_string(
        Path::new("/sys/bus/pci/devices")
            .join(pci)
            .join("numa_node"),
    )
    .ok()?;
    let v = v.trim();
    (v != "-1").then(|| v.to_string())
}

fn gpus(args: &DoctorArgs) -> Result<Vec<GpuLine>, String> {
    if args.no_gpu {
        return Err("not looked for (--no-gpu)".into());
    }
    match crate::gpu::probe() {
        Ok(Some(list)) => Ok(list
            .iter()
            .map(|g| GpuLine {
                text: g.to_string(),
                pci_bus_id: g.pci_bus_id.clone(),
                can_map_host_memory: g.can_map_host_memory,
            })
            .collect()),
        Ok(None) => {
            Err(crate::gpu::unavailable_reason().unwrap_or_else(|| "no CUDA device".into()))
        }
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(feature = "rdma")]
fn verbs(args: &DoctorArgs, devices: &[Device]) -> (Option<Vec<String>>, Vec<VerbsProbe>) {
    use crate::rdma::verbs::{Context, Cq, Pd, Qp, QpKind};
    let names = crate::rdma::verbs::device_names();
    let mut probes = vec![];
    if !args.no_verbs {
        for d in devices.iter().filter(|d| d.is_mlx5()) {
            let bf = (|| -> crate::Result<u32> {
                let ctx = Context::open(Some(&d.name))?;
                let pd = Pd::new(&ctx)?;
                let cq = Cq::new(&ctx, 16)?;
                let qp = Qp::new(&pd, &cq, &cq, QpKind::Uc, 16, 16, 64)?;
                Ok(qp.mlx5_direct(&cq)?.bf_size)
            })();
            probes.push(VerbsProbe {
                device: d.name.clone(),
                bf_size: bf.map_err(|e| e.to_string()),
            });
        }
    }
    (Some(names), probes)
}

#[cfg(not(feature = "rdma"))]
fn verbs(_args: &DoctorArgs, _devices: &[Device]) -> (Option<Vec<String>>, Vec<VerbsProbe>) {
    (None, vec![])
}

/// Which doorbell modes can be used, on which path, and why not.
pub fn doorbells(report: &Report) -> Vec<Availability> {
    let mut out = vec![];
    let gpu_ok = matches!(&report.gpus, Ok(g) if g.iter().any(|g| g.can_map_host_memory));
    let gpu_why = match &report.gpus {
        Ok(g) if g.iter().any(|g| g.can_map_host_memory) => String::new(),
        Ok(g) if !g.is_empty() => "the GPU cannot map host memory".to_string(),
        Ok(_) => "no GPU".to_string(),
        Err(e) if e.starts_with("not looked") => "GPUs not looked for (--no-gpu)".to_string(),
        Err(e) => e.clone(),
    };
    for d in Doorbell::ALL {
        out.push(Availability {
            doorbell: d,
            path: "softnic",
            usable: true,
            reason: "CPU posting to the soft NIC (transport = softnic) works everywhere".into(),
        });
    }
    for d in Doorbell::ALL {
        out.push(Availability {
            doorbell: d,
            path: "softnic+gpu",
            usable: gpu_ok,
            reason: if gpu_ok {
                "a GPU kernel posts to the soft NIC's mapped pages (device/doorbell.cu)".into()
            } else {
                gpu_why.clone()
            },
        });
    }
    let roce = report.roce_ready();
    let mlx5: Vec<&&Device> = roce.iter().filter(|d| d.is_mlx5()).collect();
    for d in Doorbell::ALL {
        let (usable, reason) = rdma_availability(report, d, &roce, &mlx5, gpu_ok, &gpu_why);
        out.push(Availability {
            doorbell: d,
            path: "rdma",
            usable,
            reason,
        });
    }
    out
}

/// Whether doorbell mode `d` can be used on the `rdma` path (`roce`: the devices with an
/// active RoCE port, `mlx5`: those of them qfwd rings), and why (not).
fn rdma_availability(
    report: &Report,
    d: Doorbell,
    roce: &[&Device],
    mlx5: &[&&Device],
    gpu_ok: bool,
    gpu_why: &str,
) -> (bool, String) {
    let names = |v: &[&&Device]| {
        v.iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !report.rdma_feature {
        (false, "built without the `rdma` feature".to_string())
    } else if roce.is_empty() {
        (false, "no RDMA device with an active RoCE port".to_string())
    } else {
        match d {
            Doorbell::CpuAssisted => (
                true,
                format!(
                    "the GPU writes responses to host memory, a CPU thread posts them ({})",
                    roce.iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Doorbell::Regular | Doorbell::BlueFlame if mlx5.is_empty() => (
                false,
                "no mlx5 (ConnectX) device: its doorbells are the only ones qfwd rings".to_string(),
            ),
            Doorbell::Regular | Doorbell::BlueFlame if !gpu_ok => (false, gpu_why.to_string()),
            Doorbell::Regular | Doorbell::BlueFlame
                if !report.gpu_nic_probes.is_empty()
                    && report.gpu_nic_probes.iter().all(|p| p.uar.is_err()) =>
            {
                let p = &report.gpu_nic_probes[0];
                (
                    false,
                    format!(
                        "GPU {} cannot map {}'s UAR page: {}",
                        p.gpu,
                        p.nic,
                        p.uar.clone().err().unwrap_or_default()
                    ),
                )
            }
            Doorbell::Regular => (
                true,
                format!(
                    "GPU rings {} (UAR via cuMemHostRegister IOMEMORY: confirm with the GPU tests; \
                     best when GPU and NIC share a PCIe switch)",
                    names(mlx5)
                ),
            ),
            Doorbell::BlueFlame => {
                let sizes: Vec<&VerbsProbe> = report.verbs_probes.iter().collect();
                match sizes.iter().find(|p| matches!(p.bf_size, Ok(n) if n > 0)) {
                    Some(p) => (true, format!("{} has a BlueFlame register", p.device)),
                    None if sizes.is_empty() => (
                        true,
                        format!("{} (BlueFlame size not probed: --no-verbs)", names(mlx5)),
                    ),
                    None => (
                        false,
                        "no BlueFlame register on the mlx5 devices (bf.size 0)".to_string(),
                    ),
                }
            }
        }
    }
}

/// Gathers the report.
pub fn diagnose(args: &DoctorArgs) -> Report {
    let mut devices = sysfs::devices_in(&args.sysfs_root);
    let only = args
        .device
        .clone()
        .or_else(|| std::env::var("QFWD_RDMA_DEVICE").ok());
    if let Some(name) = &only {
        devices.retain(|d| &d.name == name);
    }
    let (verbs_devices, verbs_probes) = verbs(args, &devices);
    let mlx5 = devices
        .iter()
        .filter(|d| d.is_mlx5())
        .map(|d| (d.name.clone(), d.pci.clone()))
        .collect();
    let facts = gpu_direct::gather(
        &args.proc_root,
        &args.sys_root,
        (!args.no_gpu).then_some(args.nvidia_smi.as_path()),
        mlx5,
        !args.no_verbs,
    );
    let mut report = Report {
        sysfs_root: args.sysfs_root.clone(),
        rdma_feature: cfg!(feature = "rdma"),
        devices,
        verbs_devices,
        verbs_probes,
        gpus: gpus(args),
        doorbells: vec![],
        lab: crate::tuning::checks(&args.roots()),
        gpu_direct: gpu_direct::checks(&facts),
        gpu_nic_probes: facts.probes,
    };
    report.doorbells = doorbells(&report);
    report
}

/// `qfwd doctor`: prints the report; an error when a lab host check failed (after the
/// report, and after `--jitter`).
pub fn run(args: &DoctorArgs) -> crate::Result<()> {
    for (flag, cores) in [("cores", &args.cores), ("jitter_cores", &args.jitter_cores)] {
        for (i, &c) in cores.iter().enumerate() {
            crate::limits::CORE.check_as(&format!("{flag}[{i}]"), c)?;
        }
    }
    let report = diagnose(args);
    if args.format == "json" {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.to_json()).expect("a JSON value serializes")
        );
    } else {
        print!("{}", report.render());
    }
    if let Some(seconds) = args.jitter {
        if !(seconds.is_finite() && seconds > 0.0 && seconds <= 3600.0) {
            return Err(crate::Error::InvalidSetting {
                key: "jitter",
                detail: format!("{seconds} s: expected more than 0 and at most 3600"),
            });
        }
        let cores = if args.jitter_cores.is_empty() {
            crate::host::online_cores().unwrap_or_else(|| vec![0])
        } else {
            args.jitter_cores.clone()
        };
        tracing::info!(
            "doctor: measuring jitter on {} cores for {seconds} s (each core spins)",
            cores.len()
        );
        let results =
            crate::host::measure(&cores, std::time::Duration::from_secs_f64(seconds), false)?;
        print!("{}", crate::host::render(&results));
    }
    match report.failed() {
        0 => Ok(()),
        failed => Err(crate::Error::DoctorFailed { failed }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_without_rdma_or_gpu_still_gets_the_soft_nic() {
        let args = DoctorArgs {
            sysfs_root: PathBuf::from("/nonexistent/infiniband"),
            no_gpu: true,
            ..Default::default()
        };
        let r = diagnose(&args);
        let text = r.render();
        assert!(
            text.contains("no RDMA device found (looked in /nonexistent/infiniband"),
            "{text}"
        );
        for d in Doorbell::ALL {
            assert!(r
                .doorbells
                .iter()
                .any(|a| a.doorbell == d && a.path == "softnic" && a.usable));
            assert!(r
                .doorbells
                .iter()
                .any(|a| a.doorbell == d && a.path == "rdma" && !a.usable));
        }
        assert!(text.contains("cpu-assisted"), "{text}");
    }

    #[test]
    fn an_active_mlx5_port_and_a_gpu_enable_gpu_doorbells() {
        let mut r = diagnose(&DoctorArgs {
            sysfs_root: PathBuf::from("/nonexistent"),
            no_gpu: true,
            ..Default::default()
        });
        r.rdma_feature = true;
        r.devices = vec![Device {
            name: "mlx5_0".into(),
            driver: Some("mlx5_core".into()),
            firmware: None,
            pci: None,
            ports: vec![sysfs::Port {
                number: 1,
                state: "4: ACTIVE".into(),
                phys_state: "5: LinkUp".into(),
                link_layer: "Ethernet".into(),
                rate: "200 Gb/sec".into(),
                gids: vec![],
            }],
        }];
        r.gpus = Ok(vec![GpuLine {
            text: "GPU 0".into(),
            pci_bus_id: "0000:19:00.0".into(),
            can_map_host_memory: true,
        }]);
        r.verbs_probes = vec![VerbsProbe {
            device: "mlx5_0".into(),
            bf_size: Ok(256),
        }];
        let a = doorbells(&r);
        assert!(
            a.iter().filter(|a| a.path == "rdma").all(|a| a.usable),
            "{a:?}"
        );
        r.verbs_probes[0].bf_size = Ok(0);
        let a = doorbells(&r);
        let bf = a
            .iter()
            .find(|a| a.path == "rdma" && a.doorbell == Doorbell::BlueFlame)
            .unwrap();
        assert!(!bf.usable && bf.reason.contains("bf.size 0"));

        // A GPU that cannot map the UAR page rings no ConnectX doorbell; cpu-assisted stays.
        r.verbs_probes[0].bf_size = Ok(256);
        r.gpu_nic_probes = vec![gpu_direct::Probe {
            nic: "mlx5_0".into(),
            gpu: 0,
            uar: Err("CUDA_ERROR_NOT_SUPPORTED".into()),
            dma_buf: Ok("registered".into()),
            peer_memory: Err("no nvidia_peermem".into()),
        }];
        let a = doorbells(&r);
        for d in [Doorbell::Regular, Doorbell::BlueFlame] {
            let x = a
                .iter()
                .find(|a| a.path == "rdma" && a.doorbell == d)
                .unwrap();
            assert!(!x.usable && x.reason.contains("UAR page"), "{x:?}");
        }
        assert!(a
            .iter()
            .any(|a| a.path == "rdma" && a.doorbell == Doorbell::CpuAssisted && a.usable));
    }

    #[test]
    fn gpu_direct_lines_go_to_text_and_json() {
        let mut r = diagnose(&DoctorArgs {
            sysfs_root: PathBuf::from("/nonexistent"),
            no_gpu: true,
            ..Default::default()
        });
        assert!(r.gpu_direct.is_empty(), "--no-gpu: {:?}", r.gpu_direct);
        r.gpu_direct = vec![crate::tuning::Check::warn(
            "gpu-direct peer memory",
            "neither dma-buf nor nvidia_peermem",
            "sudo modprobe nvidia_peermem",
        )];
        let text = r.render();
        assert!(text.contains("== gpu-direct on a ConnectX"), "{text}");
        assert!(text.contains("[warn] gpu-direct peer memory"), "{text}");
        let v = r.to_json();
        assert_eq!(v["gpu_direct"][0]["status"], "warn");
        assert_eq!(v["gpu_direct"][0]["fix"], "sudo modprobe nvidia_peermem");
    }
}
