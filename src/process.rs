//! How the binaries behave as Unix processes.
//!
//! Rust ignores `SIGPIPE`, so a write to a closed pipe (`qfwd-latency report ... | head`)
//! is an error, and `println!` turns it into a panic. A command-line tool is expected to
//! end quietly there, as `cat` does: the reader asked for no more.
//!
//! A forwarder started by a harness (`qfwd run --exit-with-parent PID`) must end with it:
//! a harness killed with SIGKILL cannot stop its child, and an orphan forwarder spins at
//! 100 % and holds its port. [`ParentWatch`] asks the kernel for a parent-death signal
//! and checks the parent process now and then, for the cases the signal misses.
#![forbid(unsafe_code)]

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::{Error, Result};

/// Ends the process quietly, with the default action of `SIGPIPE`, when it writes to a
/// pipe whose reader has gone. Call first thing in `main`. Datagram sockets never raise
/// `SIGPIPE`, so the forwarder's transports are not affected.
pub fn end_quietly_on_closed_pipe() -> Result<()> {
    signal_hook::flag::register_conditional_default(
        signal_hook::consts::SIGPIPE,
        Arc::new(AtomicBool::new(true)),
    )
    .map(drop)
    .map_err(Error::Signal)
}

/// The process this one must end with.
#[derive(Debug, Clone, Copy)]
pub struct ParentWatch {
    parent: u32,
}

impl ParentWatch {
    /// Watches `parent`, which must be this process's parent now: the kernel sends
    /// `SIGTERM` (which drains like a signal from a user) when the thread that started
    /// this process ends, and [`ParentWatch::parent_gone`] tells when the parent process
    /// did. An error when `parent` is not (or no longer) the parent.
    pub fn start(parent: u32) -> Result<ParentWatch> {
        let watch = ParentWatch { parent };
        watch.check()?;
        crate::sys::set_parent_death_signal(libc::SIGTERM).map_err(|source| Error::Io {
            what: "asking for a parent-death signal (prctl PR_SET_PDEATHSIG)".into(),
            source,
        })?;
        // Again after the prctl: a parent that ended just before it sent no signal.
        watch.check()?;
        Ok(watch)
    }

    fn check(&self) -> Result<()> {
        if !self.parent_gone() {
            return Ok(());
        }
        Err(Error::InvalidSetting {
            key: "exit_with_parent",
            detail: format!(
                "process {} is not this process's parent (that is {}): it has ended, or the \
                 PID is wrong",
                self.parent,
                std::os::unix::process::parent_id()
            ),
        })
    }

    /// Whether the watched parent has ended (this process was re-parented).
    pub fn parent_gone(&self) -> bool {
        std::os::unix::process::parent_id() != self.parent
    }

    pub fn parent(&self) -> u32 {
        self.parent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_watch_needs_the_real_parent() {
        // (Not `start` with the real parent: the signal would then follow the test
        // binary; tests/ and the harness's tests run it in a child qfwd.)
        let parent = std::os::unix::process::parent_id();
        assert!(!ParentWatch { parent }.parent_gone());
        assert!(ParentWatch { parent: parent + 1 }.parent_gone());
        let e = ParentWatch::start(parent.wrapping_add(12_345)).unwrap_err();
        assert!(e.to_string().contains("not this process's parent"), "{e}");
    }
}
