//! `qfwd decode --backend gpu`: a `gpu-persistent` backend serving one decoder, offline.
//! Shots go pipelined (up to [`GPU_WINDOW`] in flight) for throughput and predictions, or
//! one at a time with each round trip timed (host writes the request, the persistent kernel
//! decodes it, the host sees the response).
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::decode::{Decoder, Shots};
use crate::gpu::{self, GpuOptions};
use crate::handler::Handler;
use crate::wire::status;
use crate::{Error, Result};

/// What `--backend gpu` measured: predictions (result rows), one round trip per shot,
/// throughput.
pub(super) struct GpuPasses {
    pub results: Vec<u8>,
    pub round_trip_ns: Vec<u64>,
    pub batch_ns_per_shot: f64,
}

/// Requests in flight in the back-to-back GPU pass.
const GPU_WINDOW: usize = 32;
/// Longest a GPU round trip may take before the pass gives up on the kernel.
const GPU_DEADLINE: Duration = Duration::from_secs(2);

/// A `gpu-persistent` backend serving one decoder, for offline decoding.
pub(crate) struct GpuDecoder {
    backend: crate::mailbox::MailboxBackend<gpu::PersistentKernel>,
    handler: Handler,
    dec: Arc<Decoder>,
}

fn gpu_failed(what: String) -> Error {
    Error::Decode {
        detail: format!("GPU decoder: {what}"),
    }
}

impl GpuDecoder {
    pub(crate) fn start(dec: &Arc<Decoder>) -> Result<GpuDecoder> {
        let backend =
            gpu::persistent_backend_with(&GpuOptions::default(), std::slice::from_ref(dec))?;
        Ok(GpuDecoder {
            backend,
            handler: Handler::Decoder(Arc::clone(dec)),
            dec: Arc::clone(dec),
        })
    }

    /// Decodes the shots of `dets` (rows of `detector_bytes`) with up to [`GPU_WINDOW`]
    /// in flight, into `out` (rows of `result_len`).
    pub(crate) fn decode_pipelined(&mut self, dets: &[u8], out: &mut [u8]) -> Result<()> {
        let (nb, rb) = (self.dec.detector_bytes(), self.dec.result_len());
        let shots = dets
            .len()
            .checked_div(nb)
            .unwrap_or_else(|| out.len() / rb.max(1));
        let payload = |i: usize| {
            self.dec
                .payload(dets.get(i * nb..(i + 1) * nb).unwrap_or(&[]))
        };
        let mut first: Result<()> = Ok(());
        let (mut next, mut done) = (0usize, 0usize);
        let mut last_progress = Instant::now();
        while done < shots {
            // A poller group that falls behind holds its slots, so the ring can refuse
            // (OVERLOAD) before GPU_WINDOW are in flight: then poll and submit again.
            while next < shots && self.backend.in_flight() < GPU_WINDOW {
                match self
                    .backend
                    .submit(next as u32, &self.handler, &payload(next))
                {
                    Ok(()) => next += 1,
                    Err(st) if st == status::OVERLOAD => break,
                    Err(st) => return Err(gpu_failed(format!("submit refused with status {st}"))),
                }
            }
            let got = self.backend.poll(|c| {
                if c.status != status::OK && first.is_ok() {
                    first = Err(gpu_failed(format!(
                        "shot {} answered status {} ({})",
                        c.token,
                        c.status,
                        status::name(c.status)
                    )));
                }
                let at = c.token as usize * rb;
                let n = c.result.len().min(rb);
                out[at..at + n].copy_from_slice(&c.result[..n]);
            });
            if got > 0 {
                done += got;
                last_progress = Instant::now();
            } else if last_progress.elapsed() > GPU_DEADLINE {
                return Err(gpu_failed(format!(
                    "no answer within {GPU_DEADLINE:?} ({done} of {shots} shots done)"
                )));
            }
        }
        first
    }

    /// Decodes one shot at a time, timing each round trip; returns the times.
    fn decode_timed(&mut self, dets: &Shots, out: &mut [u8]) -> Result<Vec<u64>> {
        let rb = self.dec.result_len();
        let mut round_trip_ns = Vec::with_capacity(dets.len());
        let mut first: Result<()> = Ok(());
        for i in 0..dets.len() {
            let payload = self.dec.payload(dets.row(i));
            let t = Instant::now();
            self.backend
                .submit(i as u32, &self.handler, &payload)
                .map_err(|st| gpu_failed(format!("submit refused with status {st}")))?;
            let mut spins = 0u32;
            while self.backend.poll(|c| {
                if c.status != status::OK && first.is_ok() {
                    first = Err(gpu_failed(format!("shot {i} answered status {}", c.status)));
                }
                let n = c.result.len().min(rb);
                out[i * rb..i * rb + n].copy_from_slice(&c.result[..n]);
            }) == 0
            {
                spins = spins.wrapping_add(1);
                if spins % 4096 == 0 && t.elapsed() > GPU_DEADLINE {
                    return Err(gpu_failed(format!(
                        "shot {i}: no answer within {GPU_DEADLINE:?}"
                    )));
                }
            }
            round_trip_ns.push(t.elapsed().as_nanos() as u64);
        }
        first.map(|()| round_trip_ns)
    }

    pub(crate) fn shutdown(mut self) -> Result<()> {
        self.backend.shutdown(Duration::from_secs(2)).map(drop)
    }
}

/// Decodes every shot through a `gpu-persistent` backend serving `dec`: pipelined, then one
/// at a time with each round trip timed; the two passes must agree.
pub(super) fn gpu_passes(dec: &Arc<Decoder>, dets: &Shots) -> Result<GpuPasses> {
    let mut g = GpuDecoder::start(dec)?;
    let rb = dec.result_len();
    let mut results = vec![0u8; dets.len() * rb];
    let t = Instant::now();
    g.decode_pipelined(dets.as_b8(), &mut results)?;
    let batch_ns_per_shot = t.elapsed().as_nanos() as f64 / dets.len() as f64;
    let mut again = vec![0u8; results.len()];
    let round_trip_ns = g.decode_timed(dets, &mut again)?;
    g.shutdown()?;
    if let Some(i) =
        (0..dets.len()).find(|&i| results[i * rb..(i + 1) * rb] != again[i * rb..(i + 1) * rb])
    {
        return Err(gpu_failed(format!(
            "shot {i} decoded to {:?} and then to {:?}",
            &results[i * rb..(i + 1) * rb],
            &again[i * rb..(i + 1) * rb]
        )));
    }
    Ok(GpuPasses {
        results,
        round_trip_ns,
        batch_ns_per_shot,
    })
}
