//! What this host's CPUs give the appliance: which cores are online, and how much of a
//! core's time a spinning thread actually gets (`qfwd doctor --jitter`).
//!
//! Latency tails at high request rates are set less by the forwarding code than by the
//! moments a core is taken away from it: timer ticks, interrupts, and in a virtual machine
//! the hypervisor running something else on the physical core. A thread that reads the
//! clock in a tight loop sees each such moment as a gap between two reads. Measuring the
//! gaps on every core at once tells which cores to pin the forwarder and the emulator to,
//! and bounds what any open-loop tail on this host can be: when a core loses 1 % of its
//! time in gaps longer than 10 µs, no software on it has a p99 under 10 µs at high load.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use crate::{Error, Result};

/// Online CPU numbers from `/sys/devices/system/cpu/online` (e.g. `0-3,8`); `None` where
/// the file is missing or unreadable.
pub fn online_cores() -> Option<Vec<usize>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    parse_cpu_list(text.trim())
}

/// Parses a kernel CPU list (`0-3,8`).
pub fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cores = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cores.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => cores.push(part.parse().ok()?),
        }
    }
    Some(cores)
}

/// `Ok` when `core` is online (or the online list cannot be read: the pin itself will
/// then say); else the pin error naming this machine's cores.
pub fn check_online(core: usize) -> Result<()> {
    match online_cores() {
        Some(online) if !online.contains(&core) => Err(Error::Pin {
            core,
            detail: format!("this machine has cores {online:?}"),
        }),
        _ => Ok(()),
    }
}

/// How many CPUs the host has online. Unlike `available_parallelism`, this does not
/// shrink when the calling thread is pinned to one core (work sized by it, such as a
/// table build started from the pinned forwarding thread, would otherwise see 1).
pub fn online_core_count() -> usize {
    online_cores()
        .map(|c| c.len())
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
}

/// Pins the calling thread to the `index`-th online core (counting round), and returns that
/// core; `None` where the online list cannot be read or the pin is refused (the thread then
/// keeps the mask it inherited). For worker threads of a one-off job (the uf table build):
/// started from a thread pinned to one core, such as the forwarding thread, they inherit its
/// one-core mask and would all share that core. Every online core counts, as in
/// [`online_core_count`]: a core the cgroup's cpuset forbids refuses the pin (the worker
/// stays where it was), but a `taskset` narrower than the machine is not kept.
pub fn pin_spread(index: usize) -> Option<usize> {
    let cores = online_cores().filter(|c| !c.is_empty())?;
    let core = cores[index % cores.len()];
    core_affinity::set_for_current(core_affinity::CoreId { id: core }).then_some(core)
}

/// The workers of a decoder precompute (the uf table build): one per online core
/// ([`online_core_count`]), each pinned to its own core first ([`pin_spread`]).
pub fn table_workers() -> crate::decode::uf_table::Workers {
    crate::decode::uf_table::Workers {
        threads: online_core_count(),
        on_start: Some(|t| {
            pin_spread(t);
        }),
    }
}

/// Gap lengths the report counts separately.
pub const GAP_CLASSES: [Duration; 4] = [
    Duration::from_micros(1),
    Duration::from_micros(10),
    Duration::from_micros(100),
    Duration::from_millis(1),
];

/// What a spinning thread on one core saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreJitter {
    pub core: usize,
    /// Wall time the thread spun.
    pub elapsed: Duration,
    /// Clock reads (loop iterations).
    pub reads: u64,
    /// Per [`GAP_CLASSES`] entry: gaps longer than it, and their total length.
    pub gaps: [(u64, Duration); 4],
    /// The longest gap.
    pub max_gap: Duration,
}

impl CoreJitter {
    /// Share of the elapsed time lost in gaps longer than `GAP_CLASSES[class]`.
    pub fn lost_fraction(&self, class: usize) -> f64 {
        self.gaps[class].1.as_secs_f64() / self.elapsed.as_secs_f64().max(1e-12)
    }

    /// Mean time between clock reads, the resolution of this measurement.
    pub fn read_period(&self) -> Duration {
        Duration::from_nanos((self.elapsed.as_nanos() / u128::from(self.reads.max(1))) as u64)
    }
}

/// Spins on `core` (pinned) for `duration`, reading the clock, and classifies the gaps.
/// `yield_each` yields the core after every read (for tests on machines short of cores;
/// the gaps then include the scheduler's).
fn spin_on(core: usize, duration: Duration, yield_each: bool) -> Result<CoreJitter> {
    if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
        return Err(Error::Pin {
            core,
            detail: "sched_setaffinity refused (is the core online and in this process's mask?)"
                .into(),
        });
    }
    let mut gaps = [(0u64, Duration::ZERO); 4];
    let mut max_gap = Duration::ZERO;
    let mut reads = 0u64;
    let start = Instant::now();
    let end = start + duration;
    let mut last = start;
    loop {
        let now = Instant::now();
        reads += 1;
        let gap = now - last;
        if gap > GAP_CLASSES[0] {
            for (class, limit) in GAP_CLASSES.iter().enumerate() {
                if gap > *limit {
                    gaps[class].0 += 1;
                    gaps[class].1 += gap;
                }
            }
            max_gap = max_gap.max(gap);
        }
        last = now;
        if now >= end {
            break;
        }
        if yield_each {
            std::thread::yield_now();
        }
    }
    Ok(CoreJitter {
        core,
        elapsed: last - start,
        reads,
        gaps,
        max_gap,
    })
}

/// Spins one pinned thread on each of `cores`, all at once (as the appliance's threads
/// run), for `duration`. Cores must be online; each is measured once.
pub fn measure(cores: &[usize], duration: Duration, yield_each: bool) -> Result<Vec<CoreJitter>> {
    if cores.is_empty() {
        return Err(Error::InvalidSetting {
            key: "jitter_cores",
            detail: "no cores to measure".into(),
        });
    }
    for &c in cores {
        check_online(c)?;
    }
    let mut seen = cores.to_vec();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != cores.len() {
        return Err(Error::InvalidSetting {
            key: "jitter_cores",
            detail: format!("{cores:?} lists a core twice"),
        });
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = cores
            .iter()
            .map(|&c| s.spawn(move || spin_on(c, duration, yield_each)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::InvalidSetting {
                        key: "jitter_cores",
                        detail: "a measuring thread panicked".into(),
                    })
                })
            })
            .collect()
    })
}

/// The cores ordered quietest first: least time lost in gaps over 10 µs, then over 1 µs.
pub fn quietest(results: &[CoreJitter]) -> Vec<usize> {
    let mut r: Vec<&CoreJitter> = results.iter().collect();
    r.sort_by(|a, b| {
        a.lost_fraction(1)
            .total_cmp(&b.lost_fraction(1))
            .then(a.lost_fraction(0).total_cmp(&b.lost_fraction(0)))
            .then(a.core.cmp(&b.core))
    });
    r.into_iter().map(|j| j.core).collect()
}

/// A table of the results, one line per core, and the quietest cores.
pub fn render(results: &[CoreJitter]) -> String {
    let pct = |f: f64| format!("{:.3}%", f * 100.0);
    let mut s = String::new();
    s.push_str(
        "Host jitter (one thread spinning on the clock per core, all cores at once; a gap is \
         time the thread did not run):\n",
    );
    s.push_str(&format!(
        "  {:>4}  {:>8}  {:>9}  {:>9} {:>9}  {:>9} {:>9}  {:>8} {:>8}  {:>10}\n",
        "core", "spun_s", "read_ns", ">1us", "lost", ">10us", "lost", ">100us", ">1ms", "max_us"
    ));
    for j in results {
        s.push_str(&format!(
            "  {:>4}  {:>8.2}  {:>9}  {:>9} {:>9}  {:>9} {:>9}  {:>8} {:>8}  {:>10.1}\n",
            j.core,
            j.elapsed.as_secs_f64(),
            j.read_period().as_nanos(),
            j.gaps[0].0,
            pct(j.lost_fraction(0)),
            j.gaps[1].0,
            pct(j.lost_fraction(1)),
            j.gaps[2].0,
            j.gaps[3].0,
            j.max_gap.as_secs_f64() * 1e6
        ));
    }
    let q = quietest(results);
    s.push_str(&format!(
        "  quietest first: {} (pin the forwarder and the emulator to the first two: \
         `--cores`, scenario `cores` / `emulator_core`)\n",
        q.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0-3,8"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list("2-x"), None);
    }

    #[test]
    fn online_count_is_not_the_pinned_mask() {
        let all = online_core_count();
        assert!(all >= 1);
        let counted_while_pinned = std::thread::spawn(|| {
            assert!(core_affinity::set_for_current(core_affinity::CoreId {
                id: 0
            }));
            online_core_count()
        })
        .join()
        .unwrap();
        assert_eq!(counted_while_pinned, all);
    }

    #[test]
    fn spread_workers_leave_the_pinned_mask() {
        let Some(online) = online_cores().filter(|c| c.len() >= 2) else {
            eprintln!("SKIP spread_workers_leave_the_pinned_mask: fewer than 2 online cores");
            return;
        };
        let (first, second) = (online[0], online[1]);
        let masks = std::thread::spawn(move || {
            assert!(core_affinity::set_for_current(core_affinity::CoreId {
                id: first
            }));
            // A worker started here inherits the one-core mask, until it spreads.
            std::thread::spawn(move || {
                let inherited = core_affinity::get_core_ids().unwrap();
                let core = pin_spread(1);
                (inherited, core, core_affinity::get_core_ids().unwrap())
            })
            .join()
            .unwrap()
        })
        .join()
        .unwrap();
        let ids = |v: &[core_affinity::CoreId]| v.iter().map(|c| c.id).collect::<Vec<_>>();
        assert_eq!(ids(&masks.0), vec![first]);
        assert_eq!(masks.1, Some(second));
        assert_eq!(ids(&masks.2), vec![second]);
        assert_eq!(
            pin_spread(online.len()),
            Some(first),
            "the index counts round"
        );
    }

    #[test]
    fn a_measurement_adds_up() {
        let r = measure(&[0], Duration::from_millis(30), true).unwrap();
        assert_eq!(r.len(), 1);
        let j = &r[0];
        assert_eq!(j.core, 0);
        assert!(j.elapsed >= Duration::from_millis(30), "{j:?}");
        assert!(j.reads > 1);
        // Longer classes are subsets of shorter ones, and no class loses more than ran.
        for c in 1..GAP_CLASSES.len() {
            assert!(j.gaps[c].0 <= j.gaps[c - 1].0, "{j:?}");
            assert!(j.gaps[c].1 <= j.gaps[c - 1].1, "{j:?}");
        }
        assert!(j.gaps[0].1 <= j.elapsed);
        assert!(j.max_gap <= j.elapsed);
        assert!(j.gaps[0].0 == 0 || j.max_gap > GAP_CLASSES[0]);
        let text = render(&r);
        assert!(text.contains("quietest first: 0"), "{text}");
    }

    #[test]
    fn bad_core_lists_are_clear_errors() {
        let e = measure(&[100_000], Duration::from_millis(1), true).unwrap_err();
        assert!(e.to_string().contains("100000"), "{e}");
        let e = measure(&[], Duration::from_millis(1), true).unwrap_err();
        assert!(e.to_string().contains("no cores"), "{e}");
        let e = measure(&[0, 0], Duration::from_millis(1), true).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
    }

    #[test]
    fn quietest_orders_by_long_gaps_first() {
        let mk = |core, lost1: u64, lost10: u64| CoreJitter {
            core,
            elapsed: Duration::from_secs(1),
            reads: 1000,
            gaps: [
                (1, Duration::from_micros(lost1)),
                (1, Duration::from_micros(lost10)),
                (0, Duration::ZERO),
                (0, Duration::ZERO),
            ],
            max_gap: Duration::from_micros(lost1),
        };
        let r = vec![mk(0, 500, 400), mk(1, 900, 0), mk(2, 100, 0)];
        assert_eq!(quietest(&r), vec![2, 1, 0]);
        assert!((r[0].lost_fraction(1) - 0.0004).abs() < 1e-9);
    }
}
