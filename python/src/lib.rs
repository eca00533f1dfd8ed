//! `qfwd._qfwd`: the native half of the `qfwd` Python package (python/qfwd/__init__.py
//! holds the numpy-facing half). One class, `NativeDecoder`, over `qfwd_decode::Decoder`:
//! built from detector error model text, it decodes bit-packed syndromes (`bytes`, LSB
//! first, Stim's `b8` rows) into bit-packed observable flips, one shot or a batch, with
//! the interpreter's lock released while it decodes. The Python side packs and unpacks
//! numpy arrays around it.
//!
//! `qfwd.Matching` also reads the weight of each answer (the whole graph's union-find with
//! its correction, [`matching::Weighted`]) and the components without a boundary
//! ([`matching::ClosedComponents`]).
//!
//! Errors: a model that does not parse or build raises `ValueError` with the decoder's
//! message (file, line, value, limit); a syndrome of the wrong length, or a batch whose
//! length is not a whole number of shots, raises `ValueError`. Batches run on at most as
//! many threads as the host has CPUs, whatever is asked.
#![forbid(unsafe_code)]

mod matching;

use std::sync::{Arc, Mutex};
use std::thread;

use matching::{edge_weights, ClosedComponents, Weighted};
use pyo3::exceptions::{PyNotImplementedError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use qfwd_decode::{budget, BadPayload, Decoder, DecoderKind, Scratch};

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// At most one worker per CPU of the host: `threads` asked, at least 1.
fn worker_count(threads: usize) -> usize {
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    threads.clamp(1, cpus)
}

/// The number of `shot_bytes`-byte shots in `len` bytes, or `ValueError`.
fn whole_shots(len: usize, shot_bytes: usize) -> PyResult<usize> {
    match len.checked_div(shot_bytes) {
        Some(s) if len % shot_bytes == 0 => Ok(s),
        Some(_) => Err(value_error(format!(
            "{len} bytes is not a whole number of {shot_bytes}-byte shots"
        ))),
        None => Ok(0),
    }
}

/// A decoder built from a Stim detector error model (see the module docs).
#[pyclass(module = "qfwd._qfwd", frozen)]
struct NativeDecoder {
    inner: Arc<Decoder>,
    /// Working memory of `decode` (one shot at a time; a batch makes its own).
    scratch: Mutex<Scratch>,
    /// `ln((1 - p) / p)` of each edge of the whole graph.
    weights: Vec<f64>,
    /// Working memory of `decode_weighted`, made at its first call.
    weighted: Mutex<Option<Weighted>>,
    closed: ClosedComponents,
}

impl NativeDecoder {
    /// Refuses a syndrome that is not `detector_bytes` long.
    fn check_len(&self, dets: &[u8]) -> PyResult<()> {
        let nb = self.inner.detector_bytes();
        if dets.len() != nb {
            return Err(value_error(format!(
                "a syndrome of {} detectors is {nb} bytes bit-packed; got {} bytes",
                self.inner.num_detectors(),
                dets.len()
            )));
        }
        Ok(())
    }

    /// Refuses weights from a decoder other than union-find: they come from its correction.
    fn check_weighted(&self) -> PyResult<()> {
        match self.inner.kind() {
            DecoderKind::Uf => Ok(()),
            kind => Err(PyNotImplementedError::new_err(format!(
                "solution weights (return_weight) come from the uf decoder's correction; \
                 the {kind} decoder does not give one"
            ))),
        }
    }
}

#[pymethods]
impl NativeDecoder {
    /// Parses `text` (a `.dem`; `source` names it in errors) and builds a `kind` decoder
    /// ("uf" or "lut"); `max_defects` sets the request budget of `run_payload` (None: the
    /// model's default, 0: none).
    #[new]
    #[pyo3(signature = (text, kind = "uf", source = "<detector error model>", max_defects = None))]
    fn new(
        py: Python<'_>,
        text: &str,
        kind: &str,
        source: &str,
        max_defects: Option<u32>,
    ) -> PyResult<NativeDecoder> {
        let kind: DecoderKind = kind.parse().map_err(value_error)?;
        let text = text.to_owned();
        let source = source.to_owned();
        let mut dec = py
            .allow_threads(|| Decoder::from_dem_text(&text, &source, kind))
            .map_err(value_error)?;
        dec.set_max_defects(max_defects).map_err(value_error)?;
        let scratch = Mutex::new(dec.new_scratch());
        Ok(NativeDecoder {
            weights: edge_weights(dec.graph()),
            weighted: Mutex::new(None),
            closed: ClosedComponents::of(dec.graph()),
            inner: Arc::new(dec),
            scratch,
        })
    }

    #[getter]
    fn num_detectors(&self) -> usize {
        self.inner.num_detectors()
    }

    #[getter]
    fn num_observables(&self) -> usize {
        self.inner.num_observables()
    }

    #[getter]
    fn num_edges(&self) -> usize {
        self.inner.graph().num_edges()
    }

    /// Bytes of a bit-packed syndrome: `ceil(num_detectors / 8)`.
    #[getter]
    fn detector_bytes(&self) -> usize {
        self.inner.detector_bytes()
    }

    /// Bytes of a bit-packed result: `ceil(num_observables / 8)`.
    #[getter]
    fn result_bytes(&self) -> usize {
        self.inner.result_len()
    }

    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind().as_str()
    }

    /// The request budget of `run_payload` (0: none).
    #[getter]
    fn max_defects(&self) -> u32 {
        self.inner.max_defects()
    }

    /// Mean defects of a shot at the model's own noise.
    #[getter]
    fn expected_defects(&self) -> f64 {
        budget::expected_defects(self.inner.graph())
    }

    /// Decodes one bit-packed syndrome (`detector_bytes` long); returns the bit-packed
    /// observable flips.
    fn decode<'py>(&self, py: Python<'py>, dets: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        self.check_len(dets)?;
        let mut out = vec![0u8; self.inner.result_len()];
        let mut scratch = self
            .scratch
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.inner.decode_to(&mut scratch, dets, &mut out);
        Ok(PyBytes::new(py, &out))
    }

    /// Decodes `dets`, shots back to back (`detector_bytes` each), on `threads` workers (at
    /// most one per CPU); returns their flips back to back (`result_bytes` each).
    #[pyo3(signature = (dets, threads = 1))]
    fn decode_batch<'py>(
        &self,
        py: Python<'py>,
        dets: &[u8],
        threads: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let shots = whole_shots(dets.len(), self.inner.detector_bytes())?;
        let mut out = vec![0u8; shots * self.inner.result_len()];
        let dec = &self.inner;
        let threads = worker_count(threads);
        py.allow_threads(|| dec.decode_batch(dets, &mut out, threads))
            .map_err(value_error)?;
        Ok(PyBytes::new(py, &out))
    }

    /// Decodes one syndrome on the whole graph with union-find and returns `(flips,
    /// weight)`: the bit-packed observable flips and the sum of `ln((1 - p) / p)` over the
    /// correction's edges. Only a `uf` decoder gives weights.
    fn decode_weighted<'py>(
        &self,
        py: Python<'py>,
        dets: &[u8],
    ) -> PyResult<(Bound<'py, PyBytes>, f64)> {
        self.check_len(dets)?;
        self.check_weighted()?;
        let graph = self.inner.graph();
        let mut out = vec![0u8; self.inner.result_len()];
        let mut slot = self
            .weighted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let w = slot.get_or_insert_with(|| Weighted::new(graph)).decode(
            graph,
            &self.weights,
            dets,
            &mut out,
        );
        Ok((PyBytes::new(py, &out), w))
    }

    /// [`decode_weighted`] of every shot of `dets` (back to back) on `threads` workers (at
    /// most one per CPU): `(flips, weights)`, the flips back to back and the weights as
    /// little-endian f64s.
    #[pyo3(signature = (dets, threads = 1))]
    fn decode_batch_weighted<'py>(
        &self,
        py: Python<'py>,
        dets: &[u8],
        threads: usize,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        self.check_weighted()?;
        let nb = self.inner.detector_bytes();
        let rb = self.inner.result_len();
        let shots = whole_shots(dets.len(), nb)?;
        let mut out = vec![0u8; shots * rb];
        let mut weights = vec![0f64; shots];
        let graph = self.inner.graph();
        let edge_w = &self.weights;
        let run = |first: usize, out: &mut [u8], weights: &mut [f64]| {
            let mut w = Weighted::new(graph);
            for (i, weight) in weights.iter_mut().enumerate() {
                let s = first + i;
                let row = dets.get(s * nb..(s + 1) * nb).unwrap_or(&[]);
                let res = out.get_mut(i * rb..(i + 1) * rb).unwrap_or(&mut []);
                *weight = w.decode(graph, edge_w, row, res);
            }
        };
        let threads = worker_count(threads).min(shots.max(1));
        py.allow_threads(|| {
            let per = shots.div_ceil(threads).max(1);
            thread::scope(|scope| {
                let mut rest = &mut out[..];
                for (k, weights) in weights.chunks_mut(per).enumerate() {
                    let (mine, later) = std::mem::take(&mut rest).split_at_mut(weights.len() * rb);
                    rest = later;
                    let run = &run;
                    scope.spawn(move || run(k * per, mine, weights));
                }
            });
        });
        let bytes: Vec<u8> = weights.iter().flat_map(|w| w.to_le_bytes()).collect();
        Ok((PyBytes::new(py, &out), PyBytes::new(py, &bytes)))
    }

    /// The number of the graph's components that no boundary edge reaches.
    #[getter]
    fn closed_components(&self) -> usize {
        self.closed.count()
    }

    /// The first shot of `dets` (back to back, `detector_bytes` each) with an odd number of
    /// detection events in a component without a boundary, and a detector of it; None if
    /// every shot has a perfect matching.
    fn first_unmatchable(&self, dets: &[u8]) -> PyResult<Option<(usize, usize)>> {
        let nb = self.inner.detector_bytes();
        whole_shots(dets.len(), nb)?;
        Ok(self.closed.first_odd(dets, nb))
    }

    /// The wire payload of a bit-packed syndrome (the request argument the appliance's
    /// decoder handler takes: the syndrome then its detector count, u32 little-endian).
    fn payload<'py>(&self, py: Python<'py>, dets: &[u8]) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.payload(dets))
    }

    /// What the appliance's handler answers to a wire payload: `(status, result)`, status
    /// 0 (ok), 1 (bad argument) or 2 (over budget).
    fn run_payload<'py>(&self, py: Python<'py>, payload: &[u8]) -> (i32, Bound<'py, PyBytes>) {
        let mut out = vec![0u8; self.inner.result_len()];
        match self.inner.run_payload(payload, &mut out) {
            Ok(n) => (0, PyBytes::new(py, &out[..n])),
            Err(BadPayload::OverBudget) => (2, PyBytes::new(py, &[])),
            Err(_) => (1, PyBytes::new(py, &[])),
        }
    }
}

#[pymodule]
fn _qfwd(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeDecoder>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
