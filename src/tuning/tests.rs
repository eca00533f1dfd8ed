//! The lab host checks on fake `/proc` and `/sys` trees: a tuned host, an untuned one,
//! and a bare VM (no cpufreq, no cpuidle states, no NIC, no GPU).
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

/// A fresh folder for one fake tree, removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn new() -> Tree {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "qfwd-tuning-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Tree(p)
    }

    fn put(&self, rel: &str, text: &str) -> &Tree {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    fn roots(&self) -> Roots {
        Roots {
            proc: self.0.join("proc"),
            sys: self.0.join("sys"),
            nvidia_smi: None,
            cores: Vec::new(),
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const CPU: &str = "sys/devices/system/cpu";

/// Four cores; `governor` on each; idle states C1 (2 us) and C6 (133 us), C6 disabled
/// when `c6_off`.
fn host(t: &Tree, governor: &str, c6_off: bool) {
    t.put(&format!("{CPU}/online"), "0-3\n");
    for c in 0..4 {
        t.put(
            &format!("{CPU}/cpu{c}/cpufreq/scaling_governor"),
            &format!("{governor}\n"),
        );
        for (i, name, lat, off) in [(0, "C1", 2, false), (1, "C6", 133, c6_off)] {
            let s = format!("{CPU}/cpu{c}/cpuidle/state{i}");
            t.put(&format!("{s}/name"), name)
                .put(&format!("{s}/latency"), &lat.to_string())
                .put(&format!("{s}/disable"), if off { "1" } else { "0" });
        }
    }
    t.put("sys/class/net/eth0/device/msi_irqs/40", "msix")
        .put("sys/class/net/eth0/device/msi_irqs/41", "msix")
        .put("sys/class/net/lo/address", "00:00:00:00:00:00")
        .put("proc/irq/40/smp_affinity_list", "0-1\n");
}

fn by_name<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} in {checks:?}"))
}

#[test]
fn a_tuned_host_passes_every_check() {
    let t = Tree::new();
    host(&t, "performance", true);
    t.put(&format!("{CPU}/isolated"), "2-3\n")
        .put(&format!("{CPU}/nohz_full"), "2-3\n")
        .put("proc/irq/41/smp_affinity_list", "1\n")
        .put(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        )
        .put(
            "sys/kernel/mm/transparent_hugepage/defrag",
            "always defer defer+madvise [madvise] never\n",
        )
        .put(
            "proc/self/status",
            "Name:\tqfwd\nCapEff:\t0000000000000000\n",
        )
        .put(
            "proc/self/limits",
            "Limit                     Soft Limit           Hard Limit           Units\n\
             Max locked memory         unlimited            unlimited            bytes\n",
        );
    let c = checks(&t.roots());
    for check in &c {
        assert_eq!(check.status, Status::Pass, "{check}");
        assert!(check.fix.is_empty());
    }
    assert!(by_name(&c, "isolated cores")
        .detail
        .contains("2-3 isolated"));
    assert!(by_name(&c, "nic irq affinity").detail.contains("eth0"));
}

#[test]
fn an_untuned_host_warns_with_the_fix_and_fails_on_memlock() {
    let t = Tree::new();
    host(&t, "powersave", false);
    t.put("proc/irq/41/smp_affinity_list", "0-3\n")
        .put(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "[always] madvise never\n",
        )
        .put("proc/self/status", "CapEff:\t0000000000000000\n")
        .put(
            "proc/self/limits",
            "Max locked memory         65536                65536                bytes\n",
        );
    let mut r = t.roots();
    r.cores = vec![3];
    let c = checks(&r);
    let iso = by_name(&c, "isolated cores");
    assert_eq!(iso.status, Status::Warn);
    assert!(iso.fix.contains("isolcpus=3 nohz_full=3"), "{iso}");
    let gov = by_name(&c, "cpu governor");
    assert_eq!(gov.status, Status::Warn);
    assert!(gov.detail.contains("powersave on 0-3"), "{gov}");
    assert!(gov.fix.contains("cpupower frequency-set -g performance"));
    let cs = by_name(&c, "c-states");
    assert_eq!(cs.status, Status::Warn);
    assert!(cs.detail.contains("cpu3 C6 (133 us)"), "{cs}");
    assert!(!cs.detail.contains("C1"), "{cs}");
    assert_eq!(by_name(&c, "transparent huge pages").status, Status::Warn);
    let m = by_name(&c, "memlock limit");
    assert_eq!(m.status, Status::Fail);
    assert!(
        m.detail.contains("65536") && m.fix.contains("ulimit -l"),
        "{m}"
    );
    let irq = by_name(&c, "nic irq affinity");
    assert_eq!(irq.status, Status::Warn);
    assert!(irq.detail.contains("eth0 irq 41 -> 3"), "{irq}");
    assert!(irq.fix.contains("echo 0-2"), "{irq}");
    // The text form shows each status and its fix.
    let text = m.to_string();
    assert!(
        text.starts_with("  [fail] memlock limit: 65536 bytes"),
        "{text}"
    );
    assert!(text.contains("\n         fix: "), "{text}");
}

#[test]
fn isolated_cores_that_still_tick_warn() {
    let t = Tree::new();
    t.put(&format!("{CPU}/online"), "0-7")
        .put(&format!("{CPU}/isolated"), "4-7")
        .put(&format!("{CPU}/nohz_full"), "6-7");
    let c = isolated_cores(&t.roots());
    assert_eq!(c.status, Status::Warn);
    assert!(
        c.detail
            .contains("cores 4-5 are isolated but still take the timer tick"),
        "{c}"
    );
    assert!(c.fix.contains("nohz_full=4-5"), "{c}");
}

#[test]
fn root_needs_no_memlock_limit() {
    let t = Tree::new();
    t.put("proc/self/status", "CapEff:\t000001ffffffffff\n")
        .put(
            "proc/self/limits",
            "Max locked memory         65536                65536                bytes\n",
        );
    let m = memlock(&t.roots());
    assert_eq!(m.status, Status::Pass, "{m}");
    assert!(m.detail.contains("CAP_IPC_LOCK"));
}

#[test]
fn a_bare_vm_is_described_without_a_panic() {
    let t = Tree::new();
    t.put(&format!("{CPU}/online"), "0-1");
    let mut r = t.roots();
    r.nvidia_smi = Some(Path::new("/nonexistent/nvidia-smi").to_path_buf());
    let c = checks(&r);
    assert_eq!(c.len(), 7, "{c:?}");
    assert!(by_name(&c, "cpu governor").detail.contains("no cpufreq"));
    assert_eq!(by_name(&c, "c-states").status, Status::Pass);
    assert!(by_name(&c, "nic irq affinity")
        .detail
        .contains("no PCI network interface"));
    let g = by_name(&c, "gpu");
    assert_eq!(g.status, Status::Warn);
    assert!(g.detail.contains("not found"), "{g}");
}

#[test]
fn nvidia_smi_lines_give_persistence_and_clock_checks() {
    let c = gpu_checks(
        "0, NVIDIA H200, Enabled, 1980, 1980, 1980\n\
         1, NVIDIA H200, Disabled, 345, 1980, 1755\n",
    );
    assert_eq!(c.len(), 3, "{c:?}");
    assert_eq!(c[0].status, Status::Pass);
    assert!(c[0].detail.contains("GPU 0") && c[0].detail.contains("1980 of 1980"));
    assert!(
        c[1].detail.contains("GPU 1") && c[1].fix.contains("-pm 1"),
        "{}",
        c[1]
    );
    assert!(c[2].detail.contains("345 MHz of 1980") && c[2].fix.contains("-lgc 1980,1980"));
    assert_eq!(gpu_checks("")[0].detail, "nvidia-smi lists no GPU");
    assert_eq!(gpu_checks("garbage\n")[0].status, Status::Warn);
}

#[test]
fn a_fake_nvidia_smi_is_run_with_the_query() {
    let t = Tree::new();
    let script = t.0.join("nvidia-smi");
    t.put(
        "nvidia-smi",
        "#!/bin/sh\ncase \"$1\" in --query-gpu=index,name,persistence_mode*) \
         echo '0, NVIDIA H200, Enabled, 1980, 1980, 1980';; *) exit 3;; esac\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut r = t.roots();
    r.nvidia_smi = Some(script);
    // A thread of this test binary that forks while the script is being written holds
    // it open for writing until it execs (ETXTBSY): try again.
    let mut c = gpus(&r);
    for _ in 0..20 {
        if !c[0].detail.contains("busy") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        c = gpus(&r);
    }
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].status, Status::Pass, "{}", c[0]);
}

#[test]
fn cpu_lists_are_written_as_the_kernel_writes_them() {
    assert_eq!(format_cpu_list(&[3, 0, 1, 2, 8, 10, 11]), "0-3,8,10-11");
    assert_eq!(format_cpu_list(&[]), "");
}
