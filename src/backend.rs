//! Backends: where a request is computed (the `topology`, docs/architecture.md).
//!
//! The forwarding loop hands each well-formed request to a [`Backend`] and reaps the
//! completions; it neither knows nor cares whether a host thread, a kernel launch or a
//! persistent GPU kernel did the work. Static dispatch only: the loop is generic over
//! the backend.
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

use crate::handler::{Handler, MAX_RESULT_LEN};
use crate::wire::RequestHeader;

/// Where requests are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// The handler runs on the forwarding thread.
    Cpu,
    /// One kernel launch (and synchronize) per request: a baseline.
    GpuLaunch,
    /// One CUDA graph launch per request: a baseline.
    GpuGraph,
    /// A persistent kernel spin-polls request slots in mapped host memory.
    GpuPersistent,
}

impl Topology {
    pub const ALL: [Topology; 4] = [
        Topology::Cpu,
        Topology::GpuLaunch,
        Topology::GpuGraph,
        Topology::GpuPersistent,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Topology::Cpu => "cpu",
            Topology::GpuLaunch => "gpu-launch",
            Topology::GpuGraph => "gpu-graph",
            Topology::GpuPersistent => "gpu-persistent",
        }
    }

    pub fn needs_gpu(&self) -> bool {
        !matches!(self, Topology::Cpu)
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Topology {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Topology::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown topology {s:?}; expected one of: cpu, gpu-launch, gpu-graph, gpu-persistent"
                )
            })
    }
}

/// A request's completion as a backend reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion<'a> {
    /// The token the forwarder gave at submission.
    pub token: u32,
    /// Wire status: 0, a handler error (> 0), or a protocol error (< 0).
    pub status: i32,
    /// Result bytes (empty on error, and when `sent_by_device`).
    pub result: &'a [u8],
    /// The device side already sent the response to the QPU (GPU-initiated doorbells):
    /// the forwarder counts it answered and sends nothing.
    pub sent_by_device: bool,
}

/// Something that computes requests.
pub trait Backend {
    /// Which topology this is (for logs and CSV rows).
    fn topology(&self) -> Topology;

    /// Hands over a request. `token` comes back in its [`Completion`]. `Err(status)`
    /// means the backend refuses it (full ring: `OVERLOAD`; too large for a slot:
    /// `OVERSIZED`) and the forwarder answers with that status at once.
    fn submit(&mut self, token: u32, handler: &Handler, arg: &[u8]) -> Result<(), i32>;

    /// [`Backend::submit`] with the request's header, for a backend whose device side
    /// answers the QPU itself (it needs `request_id` and `ptp_timestamp` for the response
    /// header). The default ignores the header.
    #[inline]
    fn submit_request(
        &mut self,
        token: u32,
        header: &RequestHeader,
        handler: &Handler,
        arg: &[u8],
    ) -> Result<(), i32> {
        let _ = header;
        self.submit(token, handler, arg)
    }

    /// Whether `submit` computes the request itself (the `cpu` topology). The forwarder
    /// then starts a request's service time before `submit`; for a device backend it
    /// starts right after, so that the clock read (~50 ns in a VM) does not sit between
    /// the request's arrival and the moment the device can see it.
    #[inline]
    fn computes_in_submit(&self) -> bool {
        false
    }

    /// Reaps finished requests, calling `done` once for each; returns how many.
    fn poll<F: FnMut(Completion<'_>)>(&mut self, done: F) -> usize;

    /// Requests submitted whose completion has not been reaped yet.
    fn in_flight(&self) -> usize;

    /// Largest argument, in bytes, that `submit` accepts.
    fn max_arg_len(&self) -> usize;
}

/// The `cpu` topology: runs the handler during `submit`, completes at the next `poll`.
pub struct CpuBackend {
    pending: Vec<(u32, i32, usize)>,
    results: Vec<u8>,
    max_arg_len: usize,
}

impl CpuBackend {
    /// `batch`: most requests submitted between two polls.
    pub fn new(batch: usize, max_arg_len: usize) -> CpuBackend {
        let batch = batch.max(1);
        CpuBackend {
            pending: Vec::with_capacity(batch),
            results: vec![0; batch * MAX_RESULT_LEN],
            max_arg_len,
        }
    }
}

impl Backend for CpuBackend {
    #[inline]
    fn computes_in_submit(&self) -> bool {
        true
    }

    fn topology(&self) -> Topology {
        Topology::Cpu
    }

    #[inline]
    fn submit(&mut self, token: u32, handler: &Handler, arg: &[u8]) -> Result<(), i32> {
        let i = self.pending.len();
        if i == self.pending.capacity() {
            return Err(crate::wire::status::OVERLOAD);
        }
        if arg.len() > self.max_arg_len {
            return Err(crate::wire::status::OVERSIZED);
        }
        let out = &mut self.results[i * MAX_RESULT_LEN..(i + 1) * MAX_RESULT_LEN];
        let (status, len) = match handler.run(arg, out) {
            Ok(n) => (0, n),
            Err(code) => (code, 0),
        };
        self.pending.push((token, status, len));
        Ok(())
    }

    #[inline]
    fn poll<F: FnMut(Completion<'_>)>(&mut self, mut done: F) -> usize {
        let n = self.pending.len();
        for (i, &(token, status, len)) in self.pending.iter().enumerate() {
            let start = i * MAX_RESULT_LEN;
            done(Completion {
                token,
                status,
                result: &self.results[start..start + len],
                sent_by_device: false,
            });
        }
        self.pending.clear();
        n
    }

    fn in_flight(&self) -> usize {
        self.pending.len()
    }

    fn max_arg_len(&self) -> usize {
        self.max_arg_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_backend_completes_in_order_and_refuses_overflow() {
        let mut b = CpuBackend::new(2, 16);
        assert_eq!(b.submit(7, &Handler::Parity, &[1]), Ok(()));
        assert_eq!(b.submit(8, &Handler::Parity, &[3]), Ok(()));
        assert_eq!(
            b.submit(9, &Handler::Parity, &[3]),
            Err(crate::wire::status::OVERLOAD)
        );
        assert_eq!(b.in_flight(), 2);
        let mut seen = vec![];
        assert_eq!(
            b.poll(|c| seen.push((c.token, c.status, c.result.to_vec()))),
            2
        );
        assert_eq!(seen, vec![(7, 0, vec![1]), (8, 0, vec![0])]);
        assert_eq!(b.in_flight(), 0);
        assert_eq!(
            b.submit(1, &Handler::Parity, &[0; 17]),
            Err(crate::wire::status::OVERSIZED)
        );
    }

    #[test]
    fn topology_names_round_trip() {
        for t in Topology::ALL {
            assert_eq!(t.as_str().parse::<Topology>(), Ok(t));
        }
        assert!("gpu"
            .parse::<Topology>()
            .unwrap_err()
            .contains("gpu-persistent"));
    }
}
