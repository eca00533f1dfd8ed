//! `qfwd._qfwd`: the native half of the `qfwd` Python package (python/qfwd/__init__.py
//! holds the numpy-facing half). One class, `NativeDecoder`, over `qfwd_decode::Decoder`:
//! built from detector error model text, it decodes bit-packed syndromes (`bytes`, LSB
//! first, Stim's `b8` rows) into bit-packed observable flips, one shot or a batch, with
//! the interpreter's lock released while it decodes. The Python side packs and unpacks
//! numpy arrays around it.
//!
//! `qfwd.Matching` also reads the weight of each answer (the whole graph decoded with its
//! correction's weight, [`matching::Whole`]) and the components without a boundary
//! ([`matching::ClosedComponents`]); it lets `matching` take a model of more than 64
//! observables, decoded in passes of 64 (the appliance refuses such a model).
//!
//! Errors: a model that does not parse or build raises `ValueError` with the decoder's
//! message (file, line, value, limit); a syndrome of the wrong length, or a batch whose
//! length is not a whole number of shots, raises `ValueError`. Batches run on at most as
//! many threads as the host has CPUs, whatever is asked.
#![forbid(unsafe_code)]

mod matching;

use std::sync::{Arc, Mutex};
use std::thread;

use matching::{ClosedComponents, Whole, WholeScratch};
use pyo3::exceptions::{PyNotImplementedError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use qfwd_decode::{budget, BadPayload, Decoder, DecoderKind, Dem, MatchingGraph, Scratch};

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
    /// The decoder of `kind`; for a matching model decoded in passes, a `uf` one that only
    /// holds the graph (`whole` decodes).
    inner: Arc<Decoder>,
    kind: DecoderKind,
    /// Working memory of `decode` (one shot at a time; a batch makes its own).
    scratch: Mutex<Scratch>,
    /// The whole graph's decoder with weights (`None`: `lut`).
    whole: Option<Whole>,
    /// Working memory of one-shot `whole` decodes, made at the first.
    whole_scratch: Mutex<Option<WholeScratch>>,
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

    /// The whole-graph decoder, or `NotImplementedError` for one that keeps no correction.
    fn weighing(&self) -> PyResult<&Whole> {
        self.whole.as_ref().ok_or_else(|| {
            PyNotImplementedError::new_err(format!(
                "solution weights (return_weight) come from a correction, which the matching \
                 and uf decoders give; the {} decoder does not",
                self.kind
            ))
        })
    }

    /// Whether `whole` decodes every shot (matching in passes of 64 observables).
    fn in_passes(&self) -> bool {
        self.whole.as_ref().is_some_and(Whole::in_passes)
    }

    /// One shot on the whole graph: its flips (`result_len` bytes) and weight.
    fn decode_whole(&self, whole: &Whole, dets: &[u8]) -> (Vec<u8>, f64) {
        let graph = self.inner.graph();
        let mut out = vec![0u8; self.inner.result_len()];
        let mut slot = self
            .whole_scratch
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let scratch = slot.get_or_insert_with(|| whole.scratch(graph));
        let w = whole.decode(graph, scratch, dets, &mut out);
        (out, w)
    }

    /// Every shot of `dets` (back to back) on the whole graph, on `threads` workers (at
    /// most one per CPU): the flips back to back and the weights.
    fn decode_batch_whole(
        &self,
        py: Python<'_>,
        whole: &Whole,
        dets: &[u8],
        threads: usize,
    ) -> PyResult<(Vec<u8>, Vec<f64>)> {
        let nb = self.inner.detector_bytes();
        let rb = self.inner.result_len();
        let shots = whole_shots(dets.len(), nb)?;
        let mut out = vec![0u8; shots * rb];
        let mut weights = vec![0f64; shots];
        let graph = self.inner.graph();
        let run = |first: usize, out: &mut [u8], weights: &mut [f64]| {
            let mut scratch = whole.scratch(graph);
            for (i, weight) in weights.iter_mut().enumerate() {
                let s = first + i;
                let row = dets.get(s * nb..(s + 1) * nb).unwrap_or(&[]);
                let res = out.get_mut(i * rb..(i + 1) * rb).unwrap_or(&mut []);
                *weight = whole.decode(graph, &mut scratch, row, res);
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
        Ok((out, weights))
    }
}

/// The graph of `.dem` text, with a decoder of `kind`; a `matching` model of more than 64
/// observables gets a `uf` decoder that holds the graph where `wide_matching` allows it.
fn build(text: &str, source: &str, kind: DecoderKind, wide_matching: bool) -> PyResult<Decoder> {
    let dem = Dem::parse(text, source).map_err(value_error)?;
    let graph = MatchingGraph::from_dem(&dem).map_err(value_error)?;
    let holder = match kind {
        DecoderKind::Matching if wide_matching && graph.is_wide() => DecoderKind::Uf,
        kind => kind,
    };
    Decoder::from_graph(graph, holder).map_err(value_error)
}

#[pymethods]
impl NativeDecoder {
    /// Parses `text` (a `.dem`; `source` names it in errors) and builds a `kind` decoder
    /// ("matching", "uf" or "lut"); `max_defects` sets the request budget of `run_payload`
    /// (None: the model's default, 0: none). `wide_matching` lets `matching` take more than
    /// 64 observables, decoded in passes of 64 (`run_payload` then refuses).
    #[new]
    #[pyo3(signature = (text, kind = "uf", source = "<detector error model>", max_defects = None, wide_matching = false))]
    fn new(
        py: Python<'_>,
        text: &str,
        kind: &str,
        source: &str,
        max_defects: Option<u32>,
        wide_matching: bool,
    ) -> PyResult<NativeDecoder> {
        let kind: DecoderKind = kind.parse().map_err(value_error)?;
        let text = text.to_owned();
        let source = source.to_owned();
        let (mut dec, whole) = py.allow_threads(|| {
            let dec = build(&text, &source, kind, wide_matching)?;
            let whole = Whole::of(dec.graph(), kind).map_err(value_error)?;
            PyResult::Ok((dec, whole))
        })?;
        dec.set_max_defects(max_defects).map_err(value_error)?;
        let scratch = Mutex::new(dec.new_scratch());
        Ok(NativeDecoder {
            whole,
            whole_scratch: Mutex::new(None),
            closed: ClosedComponents::of(dec.graph()),
            inner: Arc::new(dec),
            kind,
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
        self.kind.as_str()
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
        if let Some(whole) = self.whole.as_ref().filter(|w| w.in_passes()) {
            return Ok(PyBytes::new(py, &self.decode_whole(whole, dets).0));
        }
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
        if let Some(whole) = self.whole.as_ref().filter(|w| w.in_passes()) {
            let (out, _) = self.decode_batch_whole(py, whole, dets, threads)?;
            return Ok(PyBytes::new(py, &out));
        }
        let shots = whole_shots(dets.len(), self.inner.detector_bytes())?;
        let mut out = vec![0u8; shots * self.inner.result_len()];
        let dec = &self.inner;
        let threads = worker_count(threads);
        py.allow_threads(|| dec.decode_batch(dets, &mut out, threads))
            .map_err(value_error)?;
        Ok(PyBytes::new(py, &out))
    }

    /// Decodes one syndrome on the whole graph and returns `(flips, weight)`: the
    /// bit-packed observable flips and the weight of the correction in nats (the sum of
    /// `ln((1 - p) / p)` over its edges; `matching`: the least, to 1/256 nat an edge).
    /// `lut` gives no weights.
    fn decode_weighted<'py>(
        &self,
        py: Python<'py>,
        dets: &[u8],
    ) -> PyResult<(Bound<'py, PyBytes>, f64)> {
        self.check_len(dets)?;
        let (out, w) = self.decode_whole(self.weighing()?, dets);
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
        let (out, weights) = self.decode_batch_whole(py, self.weighing()?, dets, threads)?;
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
    fn run_payload<'py>(
        &self,
        py: Python<'py>,
        payload: &[u8],
    ) -> PyResult<(i32, Bound<'py, PyBytes>)> {
        if self.in_passes() {
            return Err(PyNotImplementedError::new_err(
                "the appliance's matching decoder holds at most 64 observables; this model has \
                 more (use the uf decoder)",
            ));
        }
        let mut out = vec![0u8; self.inner.result_len()];
        Ok(match self.inner.run_payload(payload, &mut out) {
            Ok(n) => (0, PyBytes::new(py, &out[..n])),
            Err(BadPayload::OverBudget) => (2, PyBytes::new(py, &[])),
            Err(_) => (1, PyBytes::new(py, &[])),
        })
    }
}

#[pymodule]
fn _qfwd(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeDecoder>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
