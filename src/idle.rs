//! How a polling thread waits when a poll finds nothing: spin (lowest latency, a core at
//! 100 %) or yield (machines with fewer cores than spinning threads).
#![forbid(unsafe_code)]

use std::time::Duration;

/// What to do when a poll finds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdlePolicy {
    /// Spin (`spin_loop` hint): lowest latency, one core at 100%.
    #[default]
    Spin,
    /// Yield the core between polls: for machines with fewer cores than spinning threads.
    Yield,
}

impl std::str::FromStr for IdlePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "spin" => Ok(IdlePolicy::Spin),
            "yield" => Ok(IdlePolicy::Yield),
            _ => Err(format!("unknown idle policy {s:?}; expected spin or yield")),
        }
    }
}

/// A polling loop's idle wait under an [`IdlePolicy`]: `spin` hints the CPU; `yield`
/// yields at once, and after a long idle spell naps briefly so an idle thread does not
/// burn a core.
#[derive(Debug, Clone, Copy)]
pub struct IdleWait {
    policy: IdlePolicy,
    idle_polls: u32,
}

/// Empty polls after which a yielding loop starts to nap.
const POLLS_BEFORE_NAP: u32 = 20_000;
/// The nap.
const NAP: Duration = Duration::from_micros(50);

impl IdleWait {
    pub fn new(policy: IdlePolicy) -> IdleWait {
        IdleWait {
            policy,
            idle_polls: 0,
        }
    }

    /// Call after a poll that did work.
    #[inline]
    pub fn worked(&mut self) {
        self.idle_polls = 0;
    }

    /// Call after a poll that found nothing.
    #[inline]
    pub fn idle(&mut self) {
        match self.policy {
            IdlePolicy::Spin => std::hint::spin_loop(),
            IdlePolicy::Yield => {
                self.idle_polls = self.idle_polls.saturating_add(1);
                if self.idle_polls > POLLS_BEFORE_NAP {
                    std::thread::sleep(NAP);
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}
