//! Stim detector error models (`.dem` text): parser and flattened in-memory form.
//!
//! Grammar accepted (one instruction per line; `#` starts a comment; blank lines ignored;
//! instruction names are case-insensitive; a `[tag]` after the name is tolerated and ignored):
//!
//! ```text
//! error(p) D0 D1 ^ D2 L0         an independent mechanism with probability p; `^` separates
//!                                the components of a decomposed error
//! detector(x, y, t) D5           declares a detector and its coordinates
//! logical_observable L0          declares an observable
//! shift_detectors(0, 0, 1) 4     adds 4 to every later detector index and (0, 0, 1) to
//!                                every later detector's coordinates
//! repeat 10 { ... }              repeats a block; the `}` stands on its own line
//! ```
//!
//! `repeat` and `shift_detectors` are flattened here (iteratively, with an explicit stack), so a
//! model exported with or without `flatten_loops=True` gives the same [`Dem`]. Every error
//! names the file and line.
//!
//! # Limits
//!
//! Whatever a file says, what it makes the parser (and the graph built from it) allocate is
//! bounded, and a file past a limit is refused before anything is expanded, with the
//! value and the limit in the message:
//!
//! - [`MAX_DETECTORS`] detectors (indices `D0 ..= D16777215`): the syndrome of a model is
//!   `ceil(n / 8)` bytes whatever detectors its errors use, so the largest index sizes
//!   every per-detector array; 2^24 detectors are 2 MiB syndromes, 30 times what one
//!   datagram carries and far past any Stim circuit's;
//! - [`MAX_OBSERVABLES`] observables (`L0 ..= L32767`): results are `ceil(n / 8)` bytes,
//!   at most 4 KiB, what the appliance's largest result holds;
//! - [`MAX_FLAT_INSTRUCTIONS`] instructions and [`MAX_FLAT_TARGETS`] targets once `repeat`
//!   blocks are flattened: a few-line file with nested `repeat`s cannot ask for more.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;

use crate::{Error, Result};

/// Most instructions (errors, declarations, shifts, block ends) a model may execute once its
/// `repeat` blocks are flattened.
pub const MAX_FLAT_INSTRUCTIONS: usize = 8_000_000;
/// Most targets (`D5`, `L0`, `^`) the instructions of a model may hold once its `repeat`
/// blocks are flattened (four per instruction on average; Stim's circuit-noise models hold
/// about three).
pub const MAX_FLAT_TARGETS: usize = 4 * MAX_FLAT_INSTRUCTIONS;
/// Most observables a model may use (`L0 ..= L32767`): a result of at most 4 KiB.
pub const MAX_OBSERVABLES: u32 = 1 << 15;
/// Most detectors a model may use (`D0 ..= D16777215`): syndromes of at most 2 MiB.
pub const MAX_DETECTORS: u32 = 1 << 24;
/// Largest detector index accepted: `MAX_DETECTORS - 1`.
pub const MAX_DETECTOR: u64 = MAX_DETECTORS as u64 - 1;

/// One `^`-separated component of an error: the detectors it flips and the observables it
/// flips (each once, sorted: one named twice flips back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    pub detectors: Vec<u32>,
    pub observables: Vec<u32>,
}

impl Component {
    /// The observables below 64 as a mask (bit `k` = `Lk`).
    pub fn low_mask(&self) -> u64 {
        self.observables
            .iter()
            .filter(|&&k| k < 64)
            .fold(0, |m, &k| m ^ 1u64 << k)
    }
}

/// One `error(p)` instruction after flattening.
#[derive(Debug, Clone, PartialEq)]
pub struct DemError {
    /// Probability, in [0, 1].
    pub p: f64,
    /// 1-based line of the instruction in the source text.
    pub line: usize,
    pub components: Vec<Component>,
}

/// A flattened detector error model.
#[derive(Debug, Clone, PartialEq)]
pub struct Dem {
    /// Where the text came from (a path, or a name such as `<string>`), for error messages.
    pub source: String,
    /// One more than the largest detector index declared or used.
    pub num_detectors: u32,
    /// One more than the largest observable index declared or used.
    pub num_observables: u32,
    pub errors: Vec<DemError>,
    /// Per detector up to the last one declared with coordinates: its coordinates as
    /// declared by `detector(...)` plus the `shift_detectors` coordinate offsets in force
    /// there; empty when the model declares none (or declares the detector without
    /// arguments). Detectors past its end have none: [`Dem::coords`] reads any detector. (It
    /// is not padded to `num_detectors`: `error(0.1) D16777215` would make it 400 MB.)
    pub detector_coords: BTreeMap<u32, Vec<f64>>,
}

/// A parsed instruction before flattening.
#[derive(Debug, Clone)]
enum Instr {
    Error {
        p: f64,
        /// Components with *relative* detector indices (the shift is applied when flattening)
        /// and their observables (sorted, each once).
        components: Vec<(Vec<u64>, Vec<u32>)>,
    },
    Detector {
        coords: Vec<f64>,
        targets: Vec<u64>,
    },
    Observable(u32),
    Shift {
        coords: Vec<f64>,
        by: u64,
    },
    /// `repeat count {`; `end` is the index of the matching `End`.
    Repeat {
        count: u64,
        end: usize,
    },
    End,
}

impl Dem {
    /// Detector `d`'s coordinates (empty when it has none, or is past the model's).
    pub fn coords(&self, d: usize) -> &[f64] {
        u32::try_from(d)
            .ok()
            .and_then(|d| self.detector_coords.get(&d))
            .map_or(&[], Vec::as_slice)
    }

    /// Reads and parses a `.dem` file.
    pub fn from_path(path: &Path) -> Result<Dem> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
            what: format!("cannot read detector error model {}", path.display()),
            source: e,
        })?;
        Dem::parse(&text, &path.display().to_string())
    }

    /// Parses `.dem` text; `source` names it in error messages.
    pub fn parse(text: &str, source: &str) -> Result<Dem> {
        let instrs = read_instructions(text, source)?;
        flatten(&instrs, source)
    }
}

/// The error at `line` of the model read from `source`.
fn dem_error(source: &str, line: usize, detail: String) -> Error {
    Error::Dem {
        file: source.to_string(),
        line,
        detail,
    }
}

/// The error for a model whose flattened count `f` is past a limit, at `line`.
fn too_many(source: &str, line: usize, f: &Flat) -> Error {
    let (what, value, limit) = if f.instructions > MAX_FLAT_INSTRUCTIONS as u128 {
        ("instructions", f.instructions, MAX_FLAT_INSTRUCTIONS)
    } else {
        ("targets", f.targets, MAX_FLAT_TARGETS)
    };
    let value = if value == u128::MAX {
        "over 10^38".to_string()
    } else {
        value.to_string()
    };
    dem_error(
        source,
        line,
        format!(
            "{value} {what} once `repeat` blocks are flattened; at most {limit} are \
             supported"
        ),
    )
}

/// Pass 1: the instructions with their lines, blocks matched (each `Repeat` knows its
/// `End`), refused as soon as their flattened count is past the limits.
fn read_instructions(text: &str, source: &str) -> Result<Vec<(usize, Instr)>> {
    let err = |line: usize, detail: String| dem_error(source, line, detail);
    let mut instrs: Vec<(usize, Instr)> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    // Instructions and targets each open block executes once flattened (index 0: the top
    // level), so an oversized model is refused before anything is expanded.
    let mut flat: Vec<Flat> = vec![Flat::default()];
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let code = raw.split('#').next().unwrap_or("").trim();
        if code.is_empty() {
            continue;
        }
        if code == "}" {
            let Some(start) = open.pop() else {
                return Err(err(line, "`}` without a matching `repeat ... {`".into()));
            };
            let here = instrs.len();
            let (repeat_line, ref mut instr) = instrs[start];
            if let Instr::Repeat { end, count } = instr {
                *end = here;
                let mut inner = flat.pop().expect("one counter per open block");
                inner.instructions += 1;
                let top = flat.last_mut().expect("the top-level counter stays");
                top.add_times(&inner, *count);
                if top.too_large() {
                    return Err(too_many(source, repeat_line, top));
                }
            }
            instrs.push((line, Instr::End));
            continue;
        }
        let instr = parse_line(code).map_err(|d| err(line, d))?;
        let top = flat.last_mut().expect("the top-level counter stays");
        top.instructions += 1;
        top.targets += instr.targets() as u128;
        if top.too_large() {
            return Err(too_many(source, line, top));
        }
        if let Instr::Repeat { .. } = instr {
            open.push(instrs.len());
            flat.push(Flat::default());
        }
        instrs.push((line, instr));
    }
    if let Some(&start) = open.last() {
        return Err(err(
            instrs[start].0,
            "`repeat` block is never closed with `}`".into(),
        ));
    }
    Ok(instrs)
}

/// Pass 2: runs the instructions, `repeat` blocks with an explicit stack of (first
/// instruction, end, repetitions left), into a flat [`Dem`].
fn flatten(instrs: &[(usize, Instr)], source: &str) -> Result<Dem> {
    let mut out = Flattener {
        source,
        dem: Dem {
            source: source.to_string(),
            num_detectors: 0,
            num_observables: 0,
            errors: Vec::new(),
            detector_coords: BTreeMap::new(),
        },
        offset: 0,
        coord_offset: Vec::new(),
    };
    let mut stack: Vec<(usize, usize, u64)> = Vec::new();
    let mut pc = 0usize;
    while pc < instrs.len() {
        let (line, ref instr) = instrs[pc];
        match instr {
            Instr::Error { p, components } => out.error(line, *p, components)?,
            Instr::Detector { coords, targets } => out.detectors(line, coords, targets)?,
            Instr::Observable(k) => out.dem.num_observables = out.dem.num_observables.max(k + 1),
            Instr::Shift { coords, by } => out.shift(line, coords, *by)?,
            Instr::Repeat { count, end } => {
                if *count == 0 {
                    pc = *end + 1;
                    continue;
                }
                stack.push((pc + 1, *end, *count));
            }
            Instr::End => {
                let top = stack.last_mut().expect("blocks were matched in pass 1");
                top.2 -= 1;
                if top.2 > 0 {
                    pc = top.0;
                    continue;
                }
                stack.pop();
            }
        }
        pc += 1;
    }
    Ok(out.dem)
}

/// The flat model being built, and the `shift_detectors` offsets in force.
struct Flattener<'a> {
    source: &'a str,
    dem: Dem,
    offset: u64,
    coord_offset: Vec<f64>,
}

impl Flattener<'_> {
    /// The absolute index of detector `rel` (as written) at `line`, counted in
    /// `num_detectors`.
    fn detector(&mut self, rel: u64, line: usize) -> Result<u32> {
        let offset = self.offset;
        let d = match rel.checked_add(offset) {
            Some(d) if d <= MAX_DETECTOR => d as u32,
            _ if offset == 0 => {
                return Err(dem_error(
                    self.source,
                    line,
                    format!(
                        "detector D{rel} is past the largest supported, D{MAX_DETECTOR} (at \
                         most {MAX_DETECTORS} detectors)"
                    ),
                ))
            }
            _ => {
                return Err(dem_error(
                    self.source,
                    line,
                    format!(
                        "detector D{rel} shifted by {offset} is past the largest supported, \
                         D{MAX_DETECTOR} (at most {MAX_DETECTORS} detectors)"
                    ),
                ))
            }
        };
        self.dem.num_detectors = self.dem.num_detectors.max(d + 1);
        Ok(d)
    }

    /// `error(p)` at `line`.
    fn error(&mut self, line: usize, p: f64, components: &[(Vec<u64>, Vec<u32>)]) -> Result<()> {
        let mut comps = Vec::with_capacity(components.len());
        for (dets, obs) in components {
            let mut ds = Vec::with_capacity(dets.len());
            for &d in dets {
                ds.push(self.detector(d, line)?);
            }
            // A detector named twice in one component flips back: keep it mod 2.
            keep_odd(&mut ds);
            if let Some(&last) = obs.last() {
                self.dem.num_observables = self.dem.num_observables.max(last + 1);
            }
            comps.push(Component {
                detectors: ds,
                observables: obs.clone(),
            });
        }
        self.dem.errors.push(DemError {
            p,
            line,
            components: comps,
        });
        Ok(())
    }

    /// `detector(coords) targets` at `line`: the targets' coordinates, shifted.
    fn detectors(&mut self, line: usize, coords: &[f64], targets: &[u64]) -> Result<()> {
        for &d in targets {
            let d = self.detector(d, line)?;
            if !coords.is_empty() {
                let shifted = coords
                    .iter()
                    .enumerate()
                    .map(|(i, c)| c + self.coord_offset.get(i).copied().unwrap_or(0.0))
                    .collect();
                self.dem.detector_coords.insert(d, shifted);
            }
        }
        Ok(())
    }

    /// `shift_detectors(coords) k` at `line`.
    fn shift(&mut self, line: usize, coords: &[f64], k: u64) -> Result<()> {
        let coord_offset = &mut self.coord_offset;
        if coord_offset.len() < coords.len() {
            coord_offset.resize(coords.len(), 0.0);
        }
        for (o, c) in coord_offset.iter_mut().zip(coords) {
            *o += c;
        }
        let offset = self.offset;
        self.offset = offset
            .checked_add(k)
            .filter(|&o| o <= MAX_DETECTOR)
            .ok_or_else(|| {
                dem_error(
                    self.source,
                    line,
                    format!(
                        "shift_detectors by {k} moves detector indices (shifted by \
                         {offset} so far) past the largest supported, \
                         D{MAX_DETECTOR}"
                    ),
                )
            })?;
        Ok(())
    }
}

/// Splits `name[tag](args) targets` and parses one instruction (not `}`).
fn parse_line(code: &str) -> std::result::Result<Instr, String> {
    let Line {
        name,
        args,
        has_parens,
        targets,
    } = split_line(code)?;
    match name.as_str() {
        "error" => parse_error(&args, &targets),
        "detector" => parse_detector(args, &targets),
        "logical_observable" => parse_logical_observable(has_parens, &args, &targets),
        "shift_detectors" => match targets.as_slice() {
            [t] => t
                .parse::<u64>()
                .map(|by| Instr::Shift { coords: args, by })
                .map_err(|_| format!("`shift_detectors` amount {t:?} is not an integer >= 0")),
            _ => Err("`shift_detectors` takes one integer target (`shift_detectors 4`)".into()),
        },
        "repeat" => match targets.as_slice() {
            [n, "{"] => n
                .parse::<u64>()
                .map(|count| Instr::Repeat { count, end: 0 })
                .map_err(|_| format!("`repeat` count {n:?} is not an integer >= 0")),
            _ => Err("`repeat` needs a count and `{` on the same line (`repeat 10 {`)".into()),
        },
        "detector_separator" => Err("`detector_separator` is not supported: export with \
             `circuit.detector_error_model(decompose_errors=True, flatten_loops=True)`"
            .into()),
        "" => Err(format!(
            "cannot read {code:?}: expected an instruction name"
        )),
        other => Err(format!(
            "unknown instruction `{other}` (expected error, detector, logical_observable, \
             shift_detectors or repeat); export with \
             `circuit.detector_error_model(decompose_errors=True, flatten_loops=True)`"
        )),
    }
}

/// One instruction line, split: its name (lower case), arguments, whether it had
/// parentheses, and its targets.
struct Line<'a> {
    name: String,
    args: Vec<f64>,
    has_parens: bool,
    targets: Vec<&'a str>,
}

/// Splits `name[tag](args) targets`; the tag is dropped.
fn split_line(code: &str) -> std::result::Result<Line<'_>, String> {
    let name_end = code
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(code.len());
    let name = code[..name_end].to_ascii_lowercase();
    let mut rest = &code[name_end..];
    if let Some(r) = rest.strip_prefix('[') {
        let Some(close) = r.find(']') else {
            return Err(format!("`{name}[`: tag is not closed with `]`"));
        };
        rest = &r[close + 1..];
    }
    let mut args: Vec<f64> = Vec::new();
    let mut has_parens = false;
    if let Some(r) = rest.strip_prefix('(') {
        has_parens = true;
        let Some(close) = r.find(')') else {
            return Err(format!("`{name}(`: arguments are not closed with `)`"));
        };
        for a in r[..close].split(',') {
            let a = a.trim();
            if a.is_empty() && args.is_empty() && r[..close].trim().is_empty() {
                break;
            }
            args.push(
                a.parse::<f64>()
                    .map_err(|_| format!("`{name}`: argument {a:?} is not a number"))?,
            );
        }
        rest = &r[close + 1..];
    }
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return Err(format!(
            "cannot read {code:?}: expected `name(args) targets`"
        ));
    }
    Ok(Line {
        name,
        args,
        has_parens,
        targets: rest.split_whitespace().collect(),
    })
}

/// `error(p) targets`: components split at `^`, observables kept mod 2.
fn parse_error(args: &[f64], targets: &[&str]) -> std::result::Result<Instr, String> {
    if args.len() != 1 {
        return Err(format!(
            "`error` takes one probability argument, found {} (`error(0.001) D0 D1 L0`)",
            args.len()
        ));
    }
    let p = args[0];
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("error probability {p} is not in [0, 1]"));
    }
    let mut components: Vec<(Vec<u64>, Vec<u32>)> = vec![(Vec::new(), Vec::new())];
    let mut last_was_sep = true;
    for t in targets {
        if *t == "^" {
            if last_was_sep {
                return Err("`^` must separate two non-empty components (`D0 D1 ^ D2`)".into());
            }
            components.push((Vec::new(), Vec::new()));
            last_was_sep = true;
            continue;
        }
        last_was_sep = false;
        let comp = components.last_mut().expect("starts with one component");
        if let Some(k) = index(t, 'D')? {
            comp.0.push(detector(k)?);
        } else if let Some(k) = index(t, 'L')? {
            comp.1.push(observable(k)?);
        } else {
            return Err(format!(
                "`error` target {t:?} is not a detector (D5), an observable (L0) or `^`"
            ));
        }
    }
    if last_was_sep && components.len() > 1 {
        return Err("`^` must separate two non-empty components (`D0 D1 ^ D2`)".into());
    }
    for (_, obs) in &mut components {
        keep_odd(obs);
    }
    Ok(Instr::Error { p, components })
}

/// `detector(coords) targets`.
fn parse_detector(coords: Vec<f64>, targets: &[&str]) -> std::result::Result<Instr, String> {
    let mut ds = Vec::with_capacity(targets.len());
    for t in targets {
        match index(t, 'D')? {
            Some(k) => ds.push(detector(k)?),
            None => return Err(format!("`detector` target {t:?} is not D<index>")),
        }
    }
    Ok(Instr::Detector {
        coords,
        targets: ds,
    })
}

/// `logical_observable L<k>`.
fn parse_logical_observable(
    has_parens: bool,
    args: &[f64],
    targets: &[&str],
) -> std::result::Result<Instr, String> {
    if has_parens && !args.is_empty() {
        return Err("`logical_observable` takes no arguments".into());
    }
    match targets {
        [t] => match index(t, 'L')? {
            Some(k) => Ok(Instr::Observable(observable(k)?)),
            None => Err(format!("`logical_observable` target {t:?} is not L<index>")),
        },
        _ => Err("`logical_observable` takes exactly one target (`logical_observable L0`)".into()),
    }
}

/// `D12` -> Some(12) for prefix 'D'; a token with another prefix -> None.
fn index(t: &str, prefix: char) -> std::result::Result<Option<u64>, String> {
    let Some(digits) = t.strip_prefix(prefix) else {
        return Ok(None);
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("target {t:?} is not {prefix}<index>"));
    }
    digits
        .parse::<u64>()
        .map(Some)
        .map_err(|_| format!("target {t:?}: index too large"))
}

fn observable(k: u64) -> std::result::Result<u32, String> {
    if k >= MAX_OBSERVABLES as u64 {
        return Err(format!(
            "observable L{k} is past the largest supported, L{} (at most {MAX_OBSERVABLES} \
             observables)",
            MAX_OBSERVABLES - 1
        ));
    }
    Ok(k as u32)
}

/// A detector index as written (before any shift): refused past [`MAX_DETECTOR`].
fn detector(k: u64) -> std::result::Result<u64, String> {
    if k > MAX_DETECTOR {
        return Err(format!(
            "detector D{k} is past the largest supported, D{MAX_DETECTOR} (at most \
             {MAX_DETECTORS} detectors)"
        ));
    }
    Ok(k)
}

/// Sorts `xs` and keeps the values that occur an odd number of times, once each.
fn keep_odd(xs: &mut Vec<u32>) {
    xs.sort_unstable();
    let mut kept: Vec<u32> = Vec::with_capacity(xs.len());
    for &x in xs.iter() {
        if kept.last() == Some(&x) {
            kept.pop();
        } else {
            kept.push(x);
        }
    }
    *xs = kept;
}

/// Instructions and targets once flattened (saturating: a count past the limits is all
/// that matters).
#[derive(Debug, Clone, Copy, Default)]
struct Flat {
    instructions: u128,
    targets: u128,
}

impl Flat {
    /// Adds `count` runs of `inner`.
    fn add_times(&mut self, inner: &Flat, count: u64) {
        let c = u128::from(count);
        self.instructions = self
            .instructions
            .saturating_add(inner.instructions.saturating_mul(c));
        self.targets = self.targets.saturating_add(inner.targets.saturating_mul(c));
    }

    fn too_large(&self) -> bool {
        self.instructions > MAX_FLAT_INSTRUCTIONS as u128 || self.targets > MAX_FLAT_TARGETS as u128
    }
}

impl Instr {
    /// The targets the instruction holds (its cost beside the instruction itself).
    fn targets(&self) -> usize {
        match self {
            Instr::Error { components, .. } => {
                components.iter().map(|(d, o)| d.len() + o.len() + 1).sum()
            }
            Instr::Detector { targets, coords } => targets.len() + coords.len(),
            _ => 0,
        }
    }
}

/// `.dem` text of a chain of `n` detectors (`n >= 2`): each end on the boundary, one
/// observable on the edge into detector `n / 2`, every error at p = 0.05. The smallest
/// model of any size, with bits past its last detector whenever `n % 8 != 0`: for tests
/// and fuzzing.
pub fn chain_text(n: usize) -> String {
    let mut t = String::from("error(0.05) D0\n");
    for d in 1..n {
        let obs = if d == n / 2 { " L0" } else { "" };
        t.push_str(&format!("error(0.05) D{} D{d}{obs}\n", d - 1));
    }
    t.push_str(&format!("error(0.05) D{}\n", n - 1));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_have_n_detectors_n_plus_one_edges_and_one_observable() {
        for n in [2, 5, 37] {
            let g = crate::MatchingGraph::from_dem(&Dem::parse(&chain_text(n), "chain").unwrap())
                .unwrap();
            assert_eq!(
                (g.num_detectors(), g.num_edges(), g.num_observables()),
                (n, n + 1, 1),
                "chain of {n}"
            );
        }
    }

    fn parse(t: &str) -> Result<Dem> {
        Dem::parse(t, "t.dem")
    }

    #[test]
    fn parses_errors_components_and_declarations() {
        let d = parse(
            "# a comment\n\
             error(0.1) D0 D1 ^ D2 L0\n\
             \n\
             error[my tag](0.2) D1 L1   # trailing comment\n\
             detector(1, 2, 0) D7\n\
             logical_observable L2\n\
             ERROR(0.3) D3 D3 D4\n",
        )
        .unwrap();
        assert_eq!(d.num_detectors, 8);
        assert_eq!(d.num_observables, 3);
        assert_eq!(d.errors.len(), 3);
        assert_eq!(d.errors[0].line, 2);
        assert_eq!(
            d.errors[0].components,
            vec![
                Component {
                    detectors: vec![0, 1],
                    observables: vec![]
                },
                Component {
                    detectors: vec![2],
                    observables: vec![0]
                }
            ]
        );
        assert_eq!(d.errors[1].components[0].observables, vec![1]);
        assert_eq!(d.errors[1].components[0].low_mask(), 2);
        assert_eq!(d.errors[2].components[0].detectors, vec![4]);
    }

    #[test]
    fn flattens_repeat_and_shift() {
        let d = parse(
            "error(0.1) D0\n\
             repeat 3 {\n\
               error(0.2) D0 D1\n\
               repeat 2 {\n\
                 shift_detectors(0, 1) 1\n\
               }\n\
             }\n\
             error(0.3) D0\n",
        )
        .unwrap();
        let dets: Vec<Vec<u32>> = d
            .errors
            .iter()
            .map(|e| e.components[0].detectors.clone())
            .collect();
        assert_eq!(
            dets,
            vec![vec![0], vec![0, 1], vec![2, 3], vec![4, 5], vec![6]]
        );
        assert_eq!(d.num_detectors, 7);
        assert_eq!(
            parse("repeat 0 {\nerror(0.1) D9\n}\n")
                .unwrap()
                .errors
                .len(),
            0
        );
    }

    #[test]
    fn keeps_detector_coordinates_with_their_shifts() {
        let d = parse(
            "detector(1, 2, 0) D0\n\
             repeat 2 {\n\
               error(0.1) D0 D1\n\
               shift_detectors(0, 0, 1) 1\n\
               detector(1, 2, 0) D0\n\
             }\n\
             shift_detectors(0.5) 0\n\
             detector(3, 4.5, 0, 7) D1\n\
             error(0.1) D3\n",
        )
        .unwrap();
        // Indices shift by 2 after the block, coordinates by (0.5, 0, 2).
        assert_eq!(d.num_detectors, 6);
        assert_eq!(
            (0..6).map(|k| d.coords(k)).collect::<Vec<_>>(),
            [
                &[1.0, 2.0, 0.0][..],
                &[1.0, 2.0, 1.0],
                &[1.0, 2.0, 2.0],
                &[3.5, 4.5, 2.0, 7.0],
                &[],
                &[],
            ]
        );
        assert_eq!(d.detector_coords.len(), 4);
        assert_eq!(d.coords(3), [3.5, 4.5, 2.0, 7.0]);
        assert!(d.coords(5).is_empty() && d.coords(1 << 30).is_empty());
    }

    #[test]
    fn errors_name_file_and_line() {
        for (text, line, needle) in [
            ("error(0.1) D0\nerror(2) D1\n", 2, "[0, 1]"),
            ("error(0.1) D0\n\nerror(0.1) X3\n", 3, "X3"),
            ("error(0.1) D0 ^ ^ D1\n", 1, "`^`"),
            ("error(0.1) D0 ^\n", 1, "`^`"),
            ("\nrepeat 2 {\nerror(0.1) D0\n", 2, "never closed"),
            ("}\n", 1, "without"),
            ("frobnicate D0\n", 1, "flatten_loops=True"),
            ("error(0.1, 0.2) D0\n", 1, "one probability"),
            ("error(0.1) L32768\n", 1, "at most 32768 observables"),
            (
                "error(0.1) D4000000000 L0\n",
                1,
                "D4000000000 is past the largest supported, D16777215",
            ),
            ("detector D16777216\n", 1, "at most 16777216 detectors"),
            (
                "shift_detectors 16777215\nerror(0.1) D1\n",
                2,
                "D1 shifted by 16777215",
            ),
            (
                "error(0.1) D99999999999999999999999\n",
                1,
                "index too large",
            ),
            ("error(0.1) D\n", 1, "D<index>"),
            ("error(abc) D0\n", 1, "not a number"),
            ("shift_detectors x\n", 1, "integer"),
            ("repeat 3\n", 1, "`{`"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(&format!("t.dem:{line}:")), "{text:?}: {e}");
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn flattening_is_bounded() {
        let e = parse("repeat 100000 {\nrepeat 100000 {\nerror(0.1) D0\n}\n}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("instructions once `repeat` blocks are flattened; at most 8000000")
                && e.starts_with("t.dem:1:"),
            "{e}"
        );
        let e = parse("repeat 100000000000 {\n}\n").unwrap_err().to_string();
        assert!(
            e.contains("instructions once `repeat` blocks are flattened"),
            "{e}"
        );
        // Few instructions, many targets each.
        let wide: String = (0..1000).map(|d| format!(" D{d}")).collect();
        let e = parse(&format!("repeat 100000 {{\ndetector{wide}\n}}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("t.dem:1:") && e.contains("100000000 targets") && e.contains("32000000"),
            "{e}"
        );
        let e = parse("repeat 18446744073709551615 {\nrepeat 18446744073709551615 {\nrepeat 18446744073709551615 {\nrepeat 18446744073709551615 {\nrepeat 18446744073709551615 {\nerror(0.1) D0\n}\n}\n}\n}\n}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("instructions"), "{e}");
    }

    /// A model's size comes from its largest indices, within the documented limits; the
    /// 27-byte file that once asked for 16 GB is refused with its line, value and limit.
    #[test]
    fn indices_are_bounded_and_wide_observables_parse() {
        let e = parse("error(0.1) D4000000000 L0").unwrap_err().to_string();
        assert_eq!(
            e,
            "t.dem:1: detector D4000000000 is past the largest supported, D16777215 (at most \
             16777216 detectors)"
        );
        let d = parse("error(0.1) D16777215 L32767 L70 L70 L3\n").unwrap();
        assert_eq!(
            (d.num_detectors, d.num_observables),
            (MAX_DETECTORS, MAX_OBSERVABLES)
        );
        assert_eq!(d.errors[0].components[0].observables, vec![3, 32767]);
        assert_eq!(d.errors[0].components[0].low_mask(), 8);
        // No array of its 2^24 detectors: coordinates are kept for those declared with them.
        assert!(d.detector_coords.is_empty() && d.coords(16777215).is_empty());
        let d = parse("detector(1, 2, 3) D16777215\n").unwrap();
        assert_eq!(d.detector_coords.len(), 1);
        assert_eq!(d.coords(16777215), [1.0, 2.0, 3.0]);
    }
}
