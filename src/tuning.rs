//! Lab host checks for `qfwd doctor`: is this host tuned for a forwarder that answers in
//! microseconds? Isolated cores (`isolcpus`, `nohz_full`), the CPU frequency governor,
//! deep C-states, transparent huge pages, the locked-memory limit, where NIC interrupts
//! land, and GPU persistence mode and clocks.
//!
//! Each check gives one [`Check`]: pass, warn or fail, what was found, and the fix. Fail is
//! kept for what breaks a transport (a locked-memory limit RDMA registration cannot live
//! with); what only costs latency warns. Everything is read from files under a `/proc`
//! and a `/sys` root (so tests run on fake trees) and from `nvidia-smi`'s CSV output;
//! what is missing (no cpufreq in a VM, no NIC, no GPU) is said, never a panic.
#![forbid(unsafe_code)]

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::host::parse_cpu_list;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        })
    }
}

/// One line of the lab host report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked: `isolated cores`, `cpu governor`...
    pub name: &'static str,
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// How to fix it (empty on pass).
    pub fix: String,
}

impl Check {
    pub(crate) fn pass(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Pass,
            detail: detail.into(),
            fix: String::new(),
        }
    }

    pub(crate) fn warn(
        name: &'static str,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name,
            status: Status::Warn,
            detail: detail.into(),
            fix: fix.into(),
        }
    }

    pub(crate) fn fail(
        name: &'static str,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            status: Status::Fail,
            ..Check::warn(name, detail, fix)
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "  [{}] {}: {}", self.status, self.name, self.detail)?;
        if !self.fix.is_empty() {
            write!(f, "\n         fix: {}", self.fix)?;
        }
        Ok(())
    }
}

/// Where the checks look.
#[derive(Debug, Clone)]
pub struct Roots {
    /// `/proc`, or a fake tree.
    pub proc: PathBuf,
    /// `/sys`, or a fake tree.
    pub sys: PathBuf,
    /// The `nvidia-smi` command; `None`: GPUs are not looked at.
    pub nvidia_smi: Option<PathBuf>,
    /// The cores qfwd will run on; empty: the isolated cores.
    pub cores: Vec<usize>,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
            nvidia_smi: Some(PathBuf::from("nvidia-smi")),
            cores: Vec::new(),
        }
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn cpu_dir(r: &Roots) -> PathBuf {
    r.sys.join("devices/system/cpu")
}

/// A CPU list as the kernel writes it (`2-3,8`).
pub fn format_cpu_list(cores: &[usize]) -> String {
    let mut v = cores.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

fn list_file(path: &Path) -> Vec<usize> {
    read(path)
        .and_then(|s| parse_cpu_list(&s))
        .unwrap_or_default()
}

fn online(r: &Roots) -> Vec<usize> {
    list_file(&cpu_dir(r).join("online"))
}

fn isolated(r: &Roots) -> Vec<usize> {
    list_file(&cpu_dir(r).join("isolated"))
}

/// The cores the forwarder runs on: the ones given, else the isolated ones.
fn forwarder_cores(r: &Roots) -> Vec<usize> {
    if r.cores.is_empty() {
        isolated(r)
    } else {
        r.cores.clone()
    }
}

/// A kernel command line suggestion for isolating cores: the upper half of the online
/// cores, core 0 never.
fn isolation_hint(r: &Roots) -> String {
    let on = online(r);
    let wanted: Vec<usize> = if r.cores.is_empty() {
        on.iter()
            .copied()
            .skip(on.len() / 2)
            .filter(|&c| c != 0)
            .collect()
    } else {
        r.cores.clone()
    };
    let l = if wanted.is_empty() {
        "2-3".to_string()
    } else {
        format_cpu_list(&wanted)
    };
    format!(
        "add `isolcpus={l} nohz_full={l} rcu_nocbs={l}` to the kernel command line \
         (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub and reboot), and pin \
         qfwd there with --cores"
    )
}

/// `isolcpus` and `nohz_full`: the forwarder's cores get no other tasks and no tick.
pub fn isolated_cores(r: &Roots) -> Check {
    const NAME: &str = "isolated cores";
    let iso = isolated(r);
    let nohz = list_file(&cpu_dir(r).join("nohz_full"));
    let want = forwarder_cores(r);
    if iso.is_empty() {
        return Check::warn(
            NAME,
            "no isolated core (isolcpus): the scheduler may run anything on qfwd's cores",
            isolation_hint(r),
        );
    }
    let not_iso: Vec<usize> = want.iter().copied().filter(|c| !iso.contains(c)).collect();
    if !not_iso.is_empty() {
        return Check::warn(
            NAME,
            format!(
                "cores {} are not isolated (isolated: {})",
                format_cpu_list(&not_iso),
                format_cpu_list(&iso)
            ),
            format!(
                "pin qfwd to isolated cores (--cores {}), or {}",
                format_cpu_list(&iso),
                isolation_hint(r)
            ),
        );
    }
    let ticking: Vec<usize> = want.iter().copied().filter(|c| !nohz.contains(c)).collect();
    if !ticking.is_empty() {
        return Check::warn(
            NAME,
            format!(
                "cores {} are isolated but still take the timer tick (nohz_full: {})",
                format_cpu_list(&ticking),
                if nohz.is_empty() {
                    "none".to_string()
                } else {
                    format_cpu_list(&nohz)
                }
            ),
            format!(
                "add `nohz_full={l} rcu_nocbs={l}` to the kernel command line",
                l = format_cpu_list(&ticking)
            ),
        );
    }
    Check::pass(
        NAME,
        format!(
            "{} isolated, no timer tick (nohz_full {})",
            format_cpu_list(&want),
            format_cpu_list(&nohz)
        ),
    )
}

/// Every online core's cpufreq governor.
pub fn governor(r: &Roots) -> Check {
    const NAME: &str = "cpu governor";
    let mut by: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for c in online(r) {
        if let Some(g) = read(&cpu_dir(r).join(format!("cpu{c}/cpufreq/scaling_governor"))) {
            by.entry(g).or_default().push(c);
        }
    }
    if by.is_empty() {
        return Check::warn(
            NAME,
            "no cpufreq interface: the frequency is set by the firmware or the hypervisor",
            "set the BIOS power profile to maximum performance (and the hypervisor's, in a VM)",
        );
    }
    let slow: Vec<String> = by
        .iter()
        .filter(|(g, _)| g.as_str() != "performance")
        .map(|(g, c)| format!("{g} on {}", format_cpu_list(c)))
        .collect();
    if slow.is_empty() {
        return Check::pass(NAME, "performance on every core");
    }
    Check::warn(
        NAME,
        format!(
            "{}: a core that clocks down takes tens of microseconds to clock up",
            slow.join(", ")
        ),
        "sudo cpupower frequency-set -g performance (or write `performance` to \
         /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)",
    )
}

/// Idle states deeper than `MAX_EXIT_US` that are enabled on the forwarder's cores (all
/// cores when none are named).
const MAX_EXIT_US: u64 = 10;

pub fn c_states(r: &Roots) -> Check {
    const NAME: &str = "c-states";
    let cores = match forwarder_cores(r) {
        c if c.is_empty() => online(r),
        c => c,
    };
    let driver = read(&cpu_dir(r).join("cpuidle/current_driver"));
    let mut deep: Vec<String> = Vec::new();
    let mut seen = false;
    for c in &cores {
        let dir = cpu_dir(r).join(format!("cpu{c}/cpuidle"));
        let Ok(states) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<PathBuf> = states.flatten().map(|e| e.path()).collect();
        names.sort();
        for s in names {
            seen = true;
            let latency: u64 = read(&s.join("latency"))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let disabled = read(&s.join("disable")).is_some_and(|v| v == "1");
            if latency > MAX_EXIT_US && !disabled {
                let name = read(&s.join("name")).unwrap_or_else(|| "?".into());
                deep.push(format!("cpu{c} {name} ({latency} us)"));
            }
        }
    }
    if !seen {
        return Check::pass(
            NAME,
            format!(
                "no cpuidle states exposed (driver {}): the firmware or hypervisor decides",
                driver.as_deref().unwrap_or("none")
            ),
        );
    }
    if deep.is_empty() {
        return Check::pass(
            NAME,
            format!("no idle state deeper than {MAX_EXIT_US} us enabled"),
        );
    }
    let shown = deep.len();
    deep.truncate(4);
    Check::warn(
        NAME,
        format!(
            "{shown} idle states with exit latency above {MAX_EXIT_US} us enabled ({}{}): a \
             request that finds its core asleep waits for it",
            deep.join(", "),
            if shown > 4 { ", ..." } else { "" }
        ),
        format!(
            "sudo cpupower idle-set -D {MAX_EXIT_US} (now), or `intel_idle.max_cstate=1 \
             processor.max_cstate=1` on the kernel command line; a spinning forwarder keeps \
             its own core awake, the emulator's and the NIC's may not"
        ),
    )
}

/// Transparent huge pages: `always` lets khugepaged and compaction stall a thread.
pub fn transparent_huge_pages(r: &Roots) -> Check {
    const NAME: &str = "transparent huge pages";
    let base = r.sys.join("kernel/mm/transparent_hugepage");
    let chosen = |file: &str| {
        read(&base.join(file)).and_then(|s| {
            let start = s.find('[')?;
            let end = s[start..].find(']')?;
            Some(s[start + 1..start + end].to_string())
        })
    };
    let Some(enabled) = chosen("enabled") else {
        return Check::pass(NAME, "not built into this kernel");
    };
    let defrag = chosen("defrag").unwrap_or_else(|| "?".into());
    if enabled == "always" || defrag == "always" {
        return Check::warn(
            NAME,
            format!(
                "enabled [{enabled}], defrag [{defrag}]: page compaction can stall a thread \
                 for milliseconds"
            ),
            "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled \
             /sys/kernel/mm/transparent_hugepage/defrag (kernel command line: \
             transparent_hugepage=madvise)",
        );
    }
    Check::pass(NAME, format!("enabled [{enabled}], defrag [{defrag}]"))
}

/// Locked memory: RDMA registers its rings (`ibv_reg_mr` pins pages) against
/// `RLIMIT_MEMLOCK` unless the process has `CAP_IPC_LOCK`.
const MIN_MEMLOCK: u64 = 64 << 20;
const CAP_IPC_LOCK: u32 = 14;

pub fn memlock(r: &Roots) -> Check {
    const NAME: &str = "memlock limit";
    let cap = read(&r.proc.join("self/status")).and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    });
    let limit = read(&r.proc.join("self/limits")).and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("Max locked memory"))
            .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
    });
    let fix = "`ulimit -l unlimited` in the shell that starts qfwd, `* - memlock unlimited` in \
               /etc/security/limits.conf, or LimitMEMLOCK=infinity in its systemd unit";
    match limit.as_deref() {
        Some("unlimited") => Check::pass(NAME, "unlimited"),
        _ if cap.is_some_and(|c| c & (1 << CAP_IPC_LOCK) != 0) => Check::pass(
            NAME,
            format!(
                "{} bytes, but this process has CAP_IPC_LOCK (root): the limit does not apply",
                limit.as_deref().unwrap_or("?")
            ),
        ),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n >= MIN_MEMLOCK => Check::pass(NAME, format!("{n} bytes")),
            Ok(n) => Check::fail(
                NAME,
                format!(
                    "{n} bytes: the rdma transport's rings cannot be registered (it pins its \
                     memory; {} MiB or more)",
                    MIN_MEMLOCK >> 20
                ),
                fix,
            ),
            Err(_) => Check::warn(NAME, format!("cannot read the limit ({v:?})"), fix),
        },
        None => Check::warn(NAME, "cannot read /proc/self/limits", fix),
    }
}

/// The physical NICs under `net` (`/sys/class/net`), by name, each with its MSI
/// interrupts.
fn physical_nics(net: &Path) -> Vec<(String, Vec<u32>)> {
    let mut nics: Vec<(String, Vec<u32>)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(net) {
        for e in entries.flatten() {
            let dev = e.path().join("device");
            if !dev.exists() {
                continue; // virtual: lo, bridges, veth
            }
            // A virtio NIC's interrupts belong to the PCI function above it.
            let listed = |d: PathBuf| -> Option<Vec<u32>> {
                let entries = std::fs::read_dir(d).ok()?;
                Some(
                    entries
                        .flatten()
                        .filter_map(|i| i.file_name().to_str()?.parse().ok())
                        .collect(),
                )
            };
            let mut irqs = listed(dev.join("msi_irqs"))
                .or_else(|| listed(dev.join("../msi_irqs")))
                .unwrap_or_default();
            irqs.sort_unstable();
            nics.push((e.file_name().to_string_lossy().into_owned(), irqs));
        }
    }
    nics.sort();
    nics
}

/// Physical NICs (`/sys/class/net/*/device`) and where their interrupts may land.
pub fn nic_irqs(r: &Roots) -> Check {
    const NAME: &str = "nic irq affinity";
    let nics = physical_nics(&r.sys.join("class/net"));
    if nics.is_empty() {
        return Check::pass(
            NAME,
            "no PCI network interface on this host: nothing to steer (the udp and rdma \
             transports toward a QPU need one)",
        );
    }
    let protect = forwarder_cores(r);
    let mut hits: Vec<String> = Vec::new();
    let mut total = 0;
    for (name, irqs) in &nics {
        for irq in irqs {
            total += 1;
            let affinity = list_file(&r.proc.join(format!("irq/{irq}/smp_affinity_list")));
            let on: Vec<usize> = affinity
                .iter()
                .copied()
                .filter(|c| protect.contains(c))
                .collect();
            if !on.is_empty() {
                hits.push(format!("{name} irq {irq} -> {}", format_cpu_list(&on)));
            }
        }
    }
    let names: Vec<&str> = nics.iter().map(|(n, _)| n.as_str()).collect();
    if total == 0 {
        return Check::pass(
            NAME,
            format!(
                "{} list no MSI interrupts: nothing to steer",
                names.join(", ")
            ),
        );
    }
    if protect.is_empty() {
        return Check::warn(
            NAME,
            format!(
                "{total} interrupts of {}; no forwarder cores to keep them off (none isolated, \
                 none given with --cores)",
                names.join(", ")
            ),
            "name qfwd's cores with `qfwd doctor --cores N,...`, or isolate them",
        );
    }
    if hits.is_empty() {
        return Check::pass(
            NAME,
            format!(
                "none of the {total} interrupts of {} may land on {}",
                names.join(", "),
                format_cpu_list(&protect)
            ),
        );
    }
    let housekeeping: Vec<usize> = online(r)
        .into_iter()
        .filter(|c| !protect.contains(c))
        .collect();
    let n = hits.len();
    hits.truncate(4);
    Check::warn(
        NAME,
        format!(
            "{n} NIC interrupts may land on qfwd's cores ({}{})",
            hits.join(", "),
            if n > 4 { ", ..." } else { "" }
        ),
        format!(
            "echo {} | sudo tee /proc/irq/N/smp_affinity_list for each, and keep irqbalance \
             off those cores (IRQBALANCE_BANNED_CPULIST={})",
            format_cpu_list(&housekeeping),
            format_cpu_list(&protect)
        ),
    )
}

/// The `nvidia-smi` query the GPU check reads.
pub const NVIDIA_SMI_QUERY: &str =
    "--query-gpu=index,name,persistence_mode,clocks.sm,clocks.max.sm,clocks.applications.graphics";

/// GPU persistence mode and clocks, from `nvidia-smi --query-gpu ... --format=csv,noheader,nounits`.
pub fn gpus(r: &Roots) -> Vec<Check> {
    const NAME: &str = "gpu";
    let Some(cmd) = &r.nvidia_smi else {
        return Vec::new();
    };
    let out = std::process::Command::new(cmd)
        .args([NVIDIA_SMI_QUERY, "--format=csv,noheader,nounits"])
        .output();
    match out {
        Ok(o) if o.status.success() => gpu_checks(&String::from_utf8_lossy(&o.stdout)),
        Ok(o) => vec![Check::warn(
            NAME,
            format!(
                "{} failed: {}",
                cmd.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            "check the NVIDIA driver (nvidia-smi should list the GPUs)",
        )],
        Err(e) => vec![Check::warn(
            NAME,
            format!("{} not found ({e}): no NVIDIA driver here", cmd.display()),
            "install the NVIDIA driver, or run with --no-gpu on a host without GPUs",
        )],
    }
}

/// The GPU lines from `nvidia-smi`'s CSV (one GPU a line, the fields of
/// [`NVIDIA_SMI_QUERY`]).
pub fn gpu_checks(csv: &str) -> Vec<Check> {
    const NAME: &str = "gpu";
    let mut v = Vec::new();
    for line in csv.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() < 6 {
            v.push(Check::warn(
                NAME,
                format!("cannot read nvidia-smi's line {line:?}"),
                "",
            ));
            continue;
        }
        let (index, name, persistence) = (f[0], f[1], f[2]);
        let num = |s: &str| s.parse::<u64>().ok();
        let (sm, max, app) = (num(f[3]), num(f[4]), num(f[5]));
        if persistence != "Enabled" {
            v.push(Check::warn(
                NAME,
                format!(
                    "GPU {index} ({name}): persistence mode {persistence}: the driver unloads \
                     between clients, and the first start pays for it"
                ),
                format!("sudo nvidia-smi -i {index} -pm 1 (or run nvidia-persistenced)"),
            ));
        }
        match (sm, max) {
            (Some(sm), Some(max)) if sm * 10 < max * 9 => v.push(Check::warn(
                NAME,
                format!(
                    "GPU {index} ({name}): SM clock {sm} MHz of {max} MHz (applications clock \
                     {}): a GPU that clocks down answers its first requests slower",
                    app.map_or("?".into(), |a| format!("{a} MHz"))
                ),
                format!("sudo nvidia-smi -i {index} -lgc {max},{max} (lock the SM clock)"),
            )),
            (Some(sm), Some(max)) if persistence == "Enabled" => v.push(Check::pass(
                NAME,
                format!("GPU {index} ({name}): persistence mode on, SM clock {sm} of {max} MHz"),
            )),
            (Some(_), Some(_)) => {}
            _ => v.push(Check::warn(
                NAME,
                format!(
                    "GPU {index} ({name}): clocks not reported ({}, {})",
                    f[3], f[4]
                ),
                "",
            )),
        }
    }
    if v.is_empty() {
        v.push(Check::pass(NAME, "nvidia-smi lists no GPU"));
    }
    v
}

/// Every lab host check, in report order.
pub fn checks(r: &Roots) -> Vec<Check> {
    let mut v = vec![
        isolated_cores(r),
        governor(r),
        c_states(r),
        transparent_huge_pages(r),
        memlock(r),
        nic_irqs(r),
    ];
    v.extend(gpus(r));
    v
}

#[cfg(test)]
mod tests;
