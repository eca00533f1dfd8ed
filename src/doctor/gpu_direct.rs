//! `qfwd doctor`'s gpu-direct lines: what this host offers the `gpu-direct` kernel on a
//! ConnectX (`docs/lab-gpu-direct.md`), each pass or warn with the fix, in the lab host
//! checks' style ([`crate::tuning::Check`]).
//!
//! - receive buffers in GPU memory: dma-buf (Linux 5.12+, the driver's
//!   `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`, `ibv_reg_dmabuf_mr` in libibverbs), or the
//!   legacy peer-memory module (`/sys/module/nvidia_peermem`);
//! - the GPU and the NIC on one PCIe switch (`nvidia-smi topo -m`: PIX, PXB pass; PHB,
//!   NODE, SYS warn), from the PCI paths under `/sys/bus/pci/devices` where `nvidia-smi`
//!   says nothing;
//! - the NIC's queues and UAR page mappable for the GPU (`HOST_REGISTER_SUPPORTED`, and an
//!   `IOMEMORY` registration of a real UAR page when the `rdma` feature and the devices are
//!   there).
//!
//! [`gather`] reads the host into [`Facts`]; [`checks`] turns facts into lines (tested on
//! made-up facts and fake `/sys` trees). Nothing here fails: gpu-direct is one data path of
//! several, and the soft NIC and CPU-forwarded paths need none of this.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use crate::gpu::NicMemorySupport;
use crate::tuning::Check;

/// A GPU as these checks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuFacts {
    pub index: usize,
    /// As CUDA prints it (`00000000:19:00.0`).
    pub pci_bus_id: String,
    /// The driver's answers, or why they could not be read.
    pub support: Result<NicMemorySupport, String>,
}

/// What trying a GPU and an RDMA device together showed (the `rdma` feature's probe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub nic: String,
    pub gpu: usize,
    /// UAR page mapped for the GPU (`IOMEMORY`): what worked, or why not.
    pub uar: Result<String, String>,
    pub dma_buf: Result<String, String>,
    pub peer_memory: Result<String, String>,
}

/// Everything the gpu-direct checks look at.
#[derive(Debug, Clone)]
pub struct Facts {
    /// `/proc/sys/kernel/osrelease`.
    pub kernel_release: Option<String>,
    /// `/sys/module/nvidia_peermem` exists.
    pub peermem_loaded: bool,
    /// libibverbs has `ibv_reg_dmabuf_mr` (`None`: built without the `rdma` feature).
    pub verbs_dmabuf: Option<bool>,
    /// The GPUs, or why there are none.
    pub gpus: Result<Vec<GpuFacts>, String>,
    /// ConnectX (mlx5) devices and their PCI addresses.
    pub nics: Vec<(String, Option<String>)>,
    /// `nvidia-smi topo -m` output, when it ran.
    pub topo: Option<String>,
    /// Probes of GPU and NIC pairs (the `rdma` feature, GPUs and mlx5 devices present).
    pub probes: Vec<Probe>,
    /// Where `/sys` is (PCI paths).
    pub sys_root: PathBuf,
}

const DMA_BUF: &str = "gpu-direct dma-buf";
const PEERMEM: &str = "gpu-direct peer memory";
const PCIE: &str = "gpu-direct pcie path";
const MAPPING: &str = "gpu-direct nic mapping";

/// `major.minor` of a kernel release string (`5.15.0-91-generic`).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.trim().split(['.', '-']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// A PCI address as sysfs names it: `00000000:19:00.0` -> `0000:19:00.0`, lowercase.
pub fn sysfs_bdf(bus_id: &str) -> String {
    let id = bus_id.trim().to_ascii_lowercase();
    match id.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => id,
    }
}

/// The components of a PCI device's path from its host bridge down (`pci0000:00`, root
/// port, switch ports..., the device), from `{sys}/bus/pci/devices/<bdf>`.
pub fn pci_path(sys: &Path, bdf: &str) -> Option<Vec<String>> {
    let real = std::fs::canonicalize(sys.join("bus/pci/devices").join(bdf)).ok()?;
    let parts: Vec<String> = real
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let start = parts.iter().position(|p| p.starts_with("pci"))?;
    Some(parts[start..].to_vec())
}

/// How two devices' PCI paths meet, in `nvidia-smi topo` words: `PIX` (one bridge between
/// them), `PXB` (several, no host bridge), `PHB` (through their host bridge), `NODE` (two
/// host bridges of one NUMA node), `SYS` (of two NUMA nodes: `same_node` false).
pub fn relation(a: &[String], b: &[String], same_node: bool) -> &'static str {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return if same_node { "NODE" } else { "SYS" };
    }
    if common == 1 {
        return "PHB";
    }
    // Below the common bridge: one more level on each side means one bridge between them.
    if a.len() - common <= 1 && b.len() - common <= 1 {
        "PIX"
    } else {
        "PXB"
    }
}

/// `nvidia-smi topo -m`: (GPU index, NIC name) -> relation (`PIX`, `PXB`, `PHB`, `NODE`,
/// `SYS`). NIC columns are `NICn` with a legend (`NIC0: mlx5_0`), or the device names.
pub fn parse_topo(text: &str) -> Vec<(usize, String, String)> {
    let clean: String = strip_ansi(text);
    let mut lines = clean.lines().filter(|l| !l.trim().is_empty());
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let columns: Vec<&str> = header
        .split_whitespace()
        .take_while(|c| c.starts_with("GPU") || c.starts_with("NIC") || c.starts_with("mlx5"))
        .collect();
    let legend: Vec<(String, String)> = clean
        .lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            (k.starts_with("NIC") && !k.contains(' '))
                .then(|| (k.to_string(), v.trim().to_string()))
        })
        .collect();
    let nic_name = |c: &str| {
        legend
            .iter()
            .find(|(k, _)| k == c)
            .map_or(c.to_string(), |(_, v)| v.clone())
    };
    let mut out = Vec::new();
    for line in lines {
        let mut cells = line.split_whitespace();
        let Some(row) = cells.next() else { continue };
        let Some(gpu) = row
            .strip_prefix("GPU")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        for (col, cell) in columns.iter().zip(cells) {
            if col.starts_with("NIC") || col.starts_with("mlx5") {
                out.push((gpu, nic_name(col), cell.to_string()));
            }
        }
    }
    out
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every gpu-direct line for `f`: none when there is no GPU to speak of (`--no-gpu`).
pub fn checks(f: &Facts) -> Vec<Check> {
    let gpus = match &f.gpus {
        Ok(g) if !g.is_empty() => g,
        Ok(_) => return vec![no_gpu("no CUDA device")],
        Err(why) if why.starts_with("not looked") => return Vec::new(),
        Err(why) => return vec![no_gpu(why)],
    };
    let dma = dma_buf(f, gpus);
    let dma_ok = dma.status == crate::tuning::Status::Pass;
    vec![dma, peer_memory(f, dma_ok), pcie(f, gpus), mapping(f, gpus)]
}

fn no_gpu(why: &str) -> Check {
    Check::warn(
        "gpu-direct",
        format!(
            "no GPU ({}): the gpu-direct kernel cannot run here",
            why.trim_start_matches("no usable GPU: ")
        ),
        "the soft NIC and cpu-forwarded paths need no GPU; for gpu-direct install the NVIDIA \
         driver on a host with a GPU",
    )
}

fn dma_buf(f: &Facts, gpus: &[GpuFacts]) -> Check {
    let fix = "Linux 5.12 or later, the NVIDIA open kernel modules (nvidia-open, R515+: \
               CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED), rdma-core 34 or later \
               (ibv_reg_dmabuf_mr); or load nvidia_peermem";
    let tried: Vec<&Probe> = f.probes.iter().collect();
    if let Some(p) = tried.iter().find(|p| p.dma_buf.is_ok()) {
        return Check::pass(DMA_BUF, p.dma_buf.clone().unwrap_or_default());
    }
    let mut missing = Vec::new();
    match f.kernel_release.as_deref().map(|r| (r, kernel_version(r))) {
        Some((_, Some(v))) if v >= (5, 12) => {}
        Some((r, _)) => missing.push(format!("kernel {r} (5.12 or later has dma-buf for RDMA)")),
        None => missing.push("kernel release unknown".to_string()),
    }
    let supported: Vec<String> = gpus
        .iter()
        .filter(|g| matches!(&g.support, Ok(s) if s.dma_buf))
        .map(|g| g.index.to_string())
        .collect();
    if supported.is_empty() {
        missing.push("no GPU reports DMA_BUF_SUPPORTED (proprietary kernel modules?)".into());
    }
    if f.verbs_dmabuf == Some(false) {
        missing.push("libibverbs has no ibv_reg_dmabuf_mr".into());
    }
    for p in &tried {
        if let Err(e) = &p.dma_buf {
            missing.push(format!(
                "registering GPU {} memory with {} failed: {e}",
                p.gpu, p.nic
            ));
        }
    }
    if missing.is_empty() {
        let verbs = match f.verbs_dmabuf {
            Some(true) => ", libibverbs has ibv_reg_dmabuf_mr",
            _ => " (libibverbs not checked: built without the rdma feature)",
        };
        return Check::pass(
            DMA_BUF,
            format!(
                "kernel {}, dma-buf export on GPU {}{verbs}",
                f.kernel_release.as_deref().unwrap_or("?"),
                supported.join(", ")
            ),
        );
    }
    Check::warn(DMA_BUF, missing.join("; "), fix)
}

fn peer_memory(f: &Facts, dma_ok: bool) -> Check {
    let probe = f.probes.iter().find_map(|p| p.peer_memory.as_ref().ok());
    match (f.peermem_loaded, dma_ok) {
        (true, _) => Check::pass(
            PEERMEM,
            probe
                .cloned()
                .unwrap_or_else(|| "nvidia_peermem is loaded".to_string()),
        ),
        (false, true) => Check::pass(
            PEERMEM,
            "nvidia_peermem is not loaded; not needed: dma-buf works",
        ),
        (false, false) => Check::warn(
            PEERMEM,
            "neither dma-buf nor nvidia_peermem: the receive buffers fall back to pinned host \
             memory (--rx-memory auto says so at start)",
            "sudo modprobe nvidia_peermem (it ships with the NVIDIA driver), or set up dma-buf \
             (the line above)",
        ),
    }
}

/// The closest NIC of each GPU: from `nvidia-smi topo -m`, else from the PCI paths.
fn pcie(f: &Facts, gpus: &[GpuFacts]) -> Check {
    if f.nics.is_empty() {
        return Check::warn(
            PCIE,
            "no ConnectX (mlx5) device found: nothing to place the GPU next to",
            "gpu-direct over rdma needs a ConnectX; `qfwd doctor` lists the RDMA devices below",
        );
    }
    let topo = f.topo.as_deref().map(parse_topo).unwrap_or_default();
    let rank = |r: &str| match r {
        "PIX" => 0,
        "PXB" => 1,
        "PHB" => 2,
        "NODE" => 3,
        _ => 4,
    };
    let mut lines = Vec::new();
    let mut all_good = true;
    for g in gpus {
        let gpu_path = pci_path(&f.sys_root, &sysfs_bdf(&g.pci_bus_id));
        let mut seen: Vec<(String, String, &str)> = Vec::new();
        for (nic, pci) in &f.nics {
            let from_topo = topo
                .iter()
                .find(|(i, n, _)| *i == g.index && n == nic)
                .map(|(_, _, r)| (r.clone(), "nvidia-smi"));
            let from_sysfs = || {
                let nic_bdf = sysfs_bdf(pci.as_deref()?);
                let nic_path = pci_path(&f.sys_root, &nic_bdf)?;
                let node = |bdf: &str| {
                    std::fs::read_to_string(
                        f.sys_root
                            .join("bus/pci/devices")
                            .join(bdf)
                            .join("numa_node"),
                    )
                    .ok()
                    .map(|s| s.trim().to_string())
                };
                let same = node(&nic_bdf) == node(&sysfs_bdf(&g.pci_bus_id));
                Some((
                    relation(gpu_path.as_deref()?, &nic_path, same).to_string(),
                    "sysfs",
                ))
            };
            if let Some((r, src)) = from_topo.or_else(from_sysfs) {
                seen.push((nic.clone(), r, src));
            }
        }
        seen.sort_by_key(|(_, r, _)| rank(r));
        match seen.first() {
            Some((nic, r, src)) => {
                all_good &= rank(r) <= 1;
                lines.push(format!("GPU {} - {nic}: {r} ({src})", g.index));
            }
            None => {
                all_good = false;
                lines.push(format!("GPU {}: PCI path unknown", g.index));
            }
        }
    }
    let detail = lines.join("; ");
    if all_good {
        Check::pass(PCIE, format!("{detail}: one PCIe switch"))
    } else {
        Check::warn(
            PCIE,
            format!("{detail} (PIX or PXB is one PCIe switch)"),
            "serve from a GPU on the NIC's PCIe switch (`nvidia-smi topo -m` shows PIX or PXB); \
             through the host bridge (PHB, NODE, SYS) every NIC write to GPU memory and every \
             GPU doorbell crosses the CPU's root complex",
        )
    }
}

fn mapping(f: &Facts, gpus: &[GpuFacts]) -> Check {
    let fix = "a driver with host registration (CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED; \
               not in some VMs); where the UAR page cannot be mapped, --doorbell cpu-assisted \
               (a CPU thread rings the NIC)";
    let no_register: Vec<String> = gpus
        .iter()
        .filter(|g| !matches!(&g.support, Ok(s) if s.host_register))
        .map(|g| match &g.support {
            Ok(_) => format!("GPU {}: no host registration", g.index),
            Err(e) => format!("GPU {}: {e}", g.index),
        })
        .collect();
    if !no_register.is_empty() {
        return Check::warn(MAPPING, no_register.join("; "), fix);
    }
    if let Some(p) = f.probes.iter().find(|p| p.uar.is_ok()) {
        return Check::pass(MAPPING, p.uar.clone().unwrap_or_default());
    }
    if let Some(p) = f.probes.first() {
        return Check::warn(
            MAPPING,
            format!(
                "the NIC's queues can be registered, but {}'s UAR page could not be mapped for \
                 GPU {} (IOMEMORY): {}",
                p.nic,
                p.gpu,
                p.uar.clone().err().unwrap_or_default()
            ),
            fix,
        );
    }
    let same_ptr = gpus
        .iter()
        .all(|g| matches!(&g.support, Ok(s) if s.host_pointer_for_registered));
    Check::pass(
        MAPPING,
        format!(
            "host registration on GPU {}{}; the UAR page (IOMEMORY) is not probed here ({})",
            gpus.iter()
                .map(|g| g.index.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if same_ptr {
                " (same addresses on the device)"
            } else {
                ""
            },
            if f.verbs_dmabuf.is_none() {
                "built without the rdma feature"
            } else {
                "no mlx5 device, or --no-verbs"
            }
        ),
    )
}

/// Reads this host (`proc`, `sys`, `nvidia-smi topo -m`, the CUDA driver, and with the
/// `rdma` feature and unless `verbs` is false, a probe of each mlx5 device with the first
/// GPU) into [`Facts`]; `nvidia_smi` `None`: GPUs are not looked at.
pub fn gather(
    proc: &Path,
    sys: &Path,
    nvidia_smi: Option<&Path>,
    nics: Vec<(String, Option<String>)>,
    verbs: bool,
) -> Facts {
    let read = |p: PathBuf| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let mut f = Facts {
        kernel_release: read(proc.join("sys/kernel/osrelease")),
        peermem_loaded: sys.join("module/nvidia_peermem").exists(),
        verbs_dmabuf: verbs_dmabuf(),
        gpus: Err("not looked for (--no-gpu)".to_string()),
        nics,
        topo: None,
        probes: Vec::new(),
        sys_root: sys.to_path_buf(),
    };
    let Some(smi) = nvidia_smi else {
        return f;
    };
    f.gpus = gpu_facts();
    f.topo = std::process::Command::new(smi)
        .args(["topo", "-m"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if verbs {
        if let Ok(Some(g)) = f.gpus.as_ref().map(|g| g.first()) {
            f.probes = probes(&f.nics, g.index);
        }
    }
    f
}

fn gpu_facts() -> Result<Vec<GpuFacts>, String> {
    match crate::gpu::probe() {
        Ok(Some(list)) => Ok(list
            .iter()
            .map(|g| GpuFacts {
                index: g.index,
                pci_bus_id: g.pci_bus_id.clone(),
                support: crate::gpu::nic_memory_support(g.index).map_err(|e| e.to_string()),
            })
            .collect()),
        Ok(None) => {
            Err(crate::gpu::unavailable_reason().unwrap_or_else(|| "no CUDA device".into()))
        }
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(feature = "rdma")]
fn verbs_dmabuf() -> Option<bool> {
    Some(crate::rdma::verbs::has_dmabuf_registration())
}

#[cfg(not(feature = "rdma"))]
fn verbs_dmabuf() -> Option<bool> {
    None
}

#[cfg(feature = "rdma")]
fn probes(nics: &[(String, Option<String>)], gpu: usize) -> Vec<Probe> {
    nics.iter()
        .map(
            |(nic, _)| match crate::direct::connectx::probe_gpu_nic(nic, gpu) {
                Ok(p) => Probe {
                    nic: nic.clone(),
                    gpu,
                    uar: p.uar,
                    dma_buf: p.dma_buf,
                    peer_memory: p.peer_memory,
                },
                Err(e) => {
                    let e = e.to_string();
                    Probe {
                        nic: nic.clone(),
                        gpu,
                        uar: Err(e.clone()),
                        dma_buf: Err(e.clone()),
                        peer_memory: Err(e),
                    }
                }
            },
        )
        .collect()
}

#[cfg(not(feature = "rdma"))]
fn probes(_nics: &[(String, Option<String>)], _gpu: usize) -> Vec<Probe> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::Status;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A fake `/sys` with PCI devices at the given paths below `devices/`, each linked
    /// from `bus/pci/devices/<bdf>`; removed on drop.
    struct Sys(PathBuf);

    impl Sys {
        fn new(devices: &[(&str, &str)]) -> Sys {
            static N: AtomicU32 = AtomicU32::new(0);
            let root = std::env::temp_dir().join(format!(
                "qfwd-gpu-direct-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let bus = root.join("bus/pci/devices");
            std::fs::create_dir_all(&bus).unwrap();
            for (path, numa) in devices {
                let dir = root.join("devices").join(path);
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("numa_node"), numa).unwrap();
                let bdf = path.rsplit('/').next().unwrap();
                std::os::unix::fs::symlink(&dir, bus.join(bdf)).unwrap();
            }
            Sys(root)
        }
    }

    impl Drop for Sys {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const SWITCH: &str = "pci0000:00/0000:00:01.0/0000:01:00.0";

    fn support(dma_buf: bool, host_register: bool) -> NicMemorySupport {
        NicMemorySupport {
            dma_buf,
            host_register,
            host_pointer_for_registered: true,
            gpu_direct_rdma: true,
        }
    }

    fn facts(sys: &Sys, gpu_bus: &str, s: NicMemorySupport) -> Facts {
        Facts {
            kernel_release: Some("6.8.0-45-generic".into()),
            peermem_loaded: false,
            verbs_dmabuf: Some(true),
            gpus: Ok(vec![GpuFacts {
                index: 0,
                pci_bus_id: gpu_bus.into(),
                support: Ok(s),
            }]),
            nics: vec![("mlx5_0".into(), Some("0000:05:00.0".into()))],
            topo: None,
            probes: Vec::new(),
            sys_root: sys.0.clone(),
        }
    }

    fn line<'a>(c: &'a [Check], name: &str) -> &'a Check {
        c.iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name} in {c:?}"))
    }

    #[test]
    fn versions_and_addresses_read_as_the_kernel_writes_them() {
        assert_eq!(kernel_version("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(kernel_version("6.8.0\n"), Some((6, 8)));
        assert_eq!(kernel_version("garbage"), None);
        assert_eq!(sysfs_bdf("00000000:19:00.0"), "0000:19:00.0");
        assert_eq!(sysfs_bdf("0000:AB:00.1"), "0000:ab:00.1");
    }

    #[test]
    fn pci_paths_say_how_a_gpu_and_a_nic_meet() {
        let sys = Sys::new(&[
            (&format!("{SWITCH}/0000:02:08.0/0000:05:00.0"), "0"),
            (&format!("{SWITCH}/0000:02:08.0/0000:05:00.1"), "0"),
            (&format!("{SWITCH}/0000:02:10.0/0000:06:00.0"), "0"),
            ("pci0000:00/0000:00:03.0/0000:07:00.0", "0"),
            ("pci0000:80/0000:80:01.0/0000:81:00.0", "0"),
            ("pci0000:c0/0000:c0:01.0/0000:c1:00.0", "1"),
        ]);
        let p = |bdf: &str| pci_path(&sys.0, bdf).unwrap();
        let nic = p("0000:05:00.0");
        assert_eq!(nic.len(), 5);
        assert_eq!(nic[0], "pci0000:00");
        assert_eq!(relation(&nic, &p("0000:05:00.1"), true), "PIX");
        assert_eq!(relation(&nic, &p("0000:06:00.0"), true), "PXB");
        assert_eq!(relation(&nic, &p("0000:07:00.0"), true), "PHB");
        assert_eq!(relation(&nic, &p("0000:81:00.0"), true), "NODE");
        assert_eq!(relation(&nic, &p("0000:c1:00.0"), false), "SYS");
        assert_eq!(pci_path(&sys.0, "0000:99:00.0"), None);
    }

    #[test]
    fn topo_output_is_read_with_its_nic_legend() {
        let text = "\u{1b}[4m\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\u{1b}[0m\n\
                    GPU0\t X \tNV18\tPIX\tSYS\t0-55\t0\t\tN/A\n\
                    GPU1\tNV18\t X \tSYS\tPXB\t56-111\t1\t\tN/A\n\
                    NIC0\tPIX\tSYS\t X \tSYS\n\
                    NIC1\tSYS\tPXB\tSYS\t X \n\n\
                    Legend:\n\n  X    = Self\n  PIX  = Connection traversing at most a single PCIe bridge\n\n\
                    NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n";
        let t = parse_topo(text);
        assert!(t.contains(&(0, "mlx5_0".into(), "PIX".into())), "{t:?}");
        assert!(t.contains(&(0, "mlx5_1".into(), "SYS".into())), "{t:?}");
        assert!(t.contains(&(1, "mlx5_1".into(), "PXB".into())), "{t:?}");
        assert_eq!(t.len(), 4);
        // Older drivers name the NIC columns after the devices.
        let old = "\tGPU0\tmlx5_0\tCPU Affinity\nGPU0\t X \tPHB\t0-15\nmlx5_0\tPHB\t X \n";
        assert_eq!(parse_topo(old), vec![(0, "mlx5_0".into(), "PHB".into())]);
    }

    #[test]
    fn a_gpu_direct_ready_host_passes_every_line() {
        let sys = Sys::new(&[
            (&format!("{SWITCH}/0000:02:08.0/0000:05:00.0"), "0"),
            (&format!("{SWITCH}/0000:02:10.0/0000:06:00.0"), "0"),
        ]);
        let c = checks(&facts(&sys, "00000000:06:00.0", support(true, true)));
        assert_eq!(c.len(), 4, "{c:?}");
        assert!(c.iter().all(|c| c.status == Status::Pass), "{c:?}");
        assert!(line(&c, DMA_BUF).detail.contains("kernel 6.8.0-45-generic"));
        assert!(line(&c, PEERMEM).detail.contains("not needed"));
        assert!(line(&c, PCIE)
            .detail
            .contains("GPU 0 - mlx5_0: PXB (sysfs)"));
        assert!(line(&c, MAPPING).detail.contains("not probed"));
    }

    #[test]
    fn a_host_without_dma_buf_or_a_shared_switch_gets_the_fixes() {
        let sys = Sys::new(&[
            (&format!("{SWITCH}/0000:02:08.0/0000:05:00.0"), "0"),
            ("pci0000:80/0000:80:01.0/0000:81:00.0", "1"),
        ]);
        let mut f = facts(&sys, "0000:81:00.0", support(false, true));
        f.kernel_release = Some("5.4.0-150-generic".into());
        f.verbs_dmabuf = Some(false);
        let c = checks(&f);
        let dma = line(&c, DMA_BUF);
        assert_eq!(dma.status, Status::Warn);
        for want in ["kernel 5.4.0", "DMA_BUF_SUPPORTED", "ibv_reg_dmabuf_mr"] {
            assert!(dma.detail.contains(want), "{want}: {dma:?}");
        }
        assert!(dma.fix.contains("nvidia-open"));
        let peer = line(&c, PEERMEM);
        assert_eq!(peer.status, Status::Warn);
        assert!(peer.fix.contains("modprobe nvidia_peermem"));
        let pcie = line(&c, PCIE);
        assert_eq!(pcie.status, Status::Warn);
        assert!(pcie.detail.contains("SYS (sysfs)"), "{pcie:?}");
        // nvidia-smi's word wins over the paths.
        f.topo = Some("\tGPU0\tNIC0\nGPU0\t X \tPIX\nNIC Legend:\n  NIC0: mlx5_0\n".into());
        f.peermem_loaded = true;
        let c = checks(&f);
        assert_eq!(line(&c, PCIE).status, Status::Pass);
        assert!(line(&c, PCIE).detail.contains("PIX (nvidia-smi)"));
        assert_eq!(line(&c, PEERMEM).status, Status::Pass);
    }

    #[test]
    fn probes_decide_when_they_ran() {
        let sys = Sys::new(&[]);
        let mut f = facts(&sys, "0000:06:00.0", support(true, true));
        f.probes = vec![Probe {
            nic: "mlx5_0".into(),
            gpu: 0,
            uar: Err("cuMemHostRegister: CUDA_ERROR_NOT_SUPPORTED".into()),
            dma_buf: Err("CUDA_ERROR_NOT_SUPPORTED".into()),
            peer_memory: Ok(
                "mlx5_0 registered 64 KiB of GPU 0 memory through nvidia_peermem".into(),
            ),
        }];
        f.peermem_loaded = true;
        let c = checks(&f);
        let dma = line(&c, DMA_BUF);
        assert_eq!(dma.status, Status::Warn);
        assert!(dma
            .detail
            .contains("registering GPU 0 memory with mlx5_0 failed"));
        assert!(line(&c, PEERMEM).detail.contains("through nvidia_peermem"));
        let map = line(&c, MAPPING);
        assert_eq!(map.status, Status::Warn);
        assert!(map.detail.contains("IOMEMORY") && map.fix.contains("cpu-assisted"));
        f.probes[0].uar = Ok("mlx5_0's UAR page is mapped for GPU 0".into());
        assert_eq!(line(&checks(&f), MAPPING).status, Status::Pass);
        // No host registration at all: the queues cannot be mapped, whatever the probe.
        f.gpus = Ok(vec![GpuFacts {
            index: 0,
            pci_bus_id: "0000:06:00.0".into(),
            support: Ok(support(true, false)),
        }]);
        assert!(line(&checks(&f), MAPPING)
            .detail
            .contains("no host registration"));
    }

    #[test]
    fn no_gpu_is_one_line_and_no_gpu_asked_is_none() {
        let sys = Sys::new(&[]);
        let mut f = facts(&sys, "0000:06:00.0", support(true, true));
        f.gpus = Err("libcuda.so not found".into());
        let c = checks(&f);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].status, Status::Warn);
        assert!(c[0].detail.contains("libcuda.so not found"));
        f.gpus = Err("not looked for (--no-gpu)".into());
        assert!(checks(&f).is_empty());
        let f = gather(&sys.0.join("proc"), &sys.0, None, Vec::new(), false);
        assert!(checks(&f).is_empty());
        assert!(!f.peermem_loaded);
    }
}
