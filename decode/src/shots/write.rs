//! [`ShotWriter`]: shots one at a time, in any of Stim's formats, as Stim writes them.
#![forbid(unsafe_code)]

use std::io::Write;

use super::{ShotFormat, ShotLayout};

/// Writes shots one at a time (what `qfwd decode` writes predictions with), byte for byte
/// as Stim's writers do. `ptb64` holds shots back until a group of 64 is complete; a
/// partial group left at [`ShotWriter::finish`] is an error (Stim's format has no way to
/// say where the shots end).
#[derive(Debug)]
pub struct ShotWriter<W> {
    w: W,
    format: ShotFormat,
    layout: ShotLayout,
    bits: usize,
    row_bytes: usize,
    /// Text formats: the line being made.
    line: Vec<u8>,
    /// `ptb64`: the rows of the group so far, back to back.
    group: Vec<u8>,
    grouped: usize,
    /// Shots written (`ptb64`: taken).
    shots: usize,
}

impl<W: Write> ShotWriter<W> {
    /// Shots of `bits` detection events (`dets` names them `D0..`).
    pub fn new(w: W, bits: usize, format: ShotFormat) -> ShotWriter<W> {
        ShotWriter::with_layout(w, ShotLayout::detectors(bits), format)
    }

    /// Shots of `layout`'s detectors, then its observables (predictions:
    /// [`ShotLayout::observables`], `dets` writes `shot L0 L3`).
    pub fn with_layout(w: W, layout: ShotLayout, format: ShotFormat) -> ShotWriter<W> {
        let bits = layout.bits();
        ShotWriter {
            w,
            format,
            layout,
            bits,
            row_bytes: bits.div_ceil(8),
            line: Vec::new(),
            group: Vec::new(),
            grouped: 0,
            shots: 0,
        }
    }

    /// The writer written to.
    pub fn get_ref(&self) -> &W {
        &self.w
    }

    /// Shots taken so far.
    pub fn shots(&self) -> usize {
        self.shots
    }

    /// Writes one shot, `row` bit-packed (`ceil(bits / 8)` bytes; padding bits are
    /// ignored).
    pub fn write(&mut self, row: &[u8]) -> std::io::Result<()> {
        assert!(row.len() >= self.row_bytes, "row of the wrong size");
        let row = &row[..self.row_bytes];
        self.shots += 1;
        self.line.clear();
        match self.format {
            ShotFormat::B8 => {
                if self.bits % 8 == 0 {
                    return self.w.write_all(row);
                }
                let last = row[self.row_bytes - 1] & ((1u8 << (self.bits % 8)) - 1);
                self.w.write_all(&row[..self.row_bytes - 1])?;
                return self.w.write_all(&[last]);
            }
            ShotFormat::Zero1 => {
                let bits = (0..self.bits).map(|k| b'0' + (row[k / 8] >> (k % 8) & 1));
                self.line.extend(bits);
                self.line.push(b'\n');
            }
            ShotFormat::R8 => {
                let mut next = 0usize;
                for k in ones(row, self.bits).chain([self.bits]) {
                    let mut run = k - next;
                    while run >= 255 {
                        self.line.push(255);
                        run -= 255;
                    }
                    self.line.push(run as u8);
                    next = k + 1;
                }
            }
            ShotFormat::Hits => {
                for (i, k) in ones(row, self.bits).enumerate() {
                    if i > 0 {
                        self.line.push(b',');
                    }
                    let _ = write!(self.line, "{k}");
                }
                self.line.push(b'\n');
            }
            ShotFormat::Dets => {
                self.line.extend_from_slice(b"shot");
                for k in ones(row, self.bits) {
                    let _ = match k.checked_sub(self.layout.detectors) {
                        None => write!(self.line, " D{k}"),
                        Some(l) => write!(self.line, " L{l}"),
                    };
                }
                self.line.push(b'\n');
            }
            ShotFormat::Ptb64 => return self.group_row(row),
        }
        self.w.write_all(&self.line)
    }

    /// `ptb64`: keeps `row`; the 64th of a group writes the group.
    fn group_row(&mut self, row: &[u8]) -> std::io::Result<()> {
        if self.bits == 0 {
            return Ok(());
        }
        self.group.extend_from_slice(row);
        self.grouped += 1;
        if self.grouped < 64 {
            return Ok(());
        }
        self.line.resize(8 * self.bits, 0);
        self.line.fill(0);
        for s in 0..64 {
            let r = &self.group[s * self.row_bytes..(s + 1) * self.row_bytes];
            for k in ones(r, self.bits) {
                self.line[8 * k + s / 8] |= 1 << (s % 8);
            }
        }
        self.group.clear();
        self.grouped = 0;
        self.w.write_all(&self.line)
    }

    /// Flushes and returns the writer; `ptb64` refuses a partial group of 64 (an
    /// [`std::io::ErrorKind::InvalidData`] error that says how many shots are left over).
    pub fn finish(mut self) -> std::io::Result<W> {
        if self.grouped != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "ptb64 holds shots in groups of 64, and {} shots leave {} over: give a \
                     multiple of 64 shots, or another format",
                    self.shots, self.grouped
                ),
            ));
        }
        self.w.flush()?;
        Ok(self.w)
    }
}

/// The indices of the 1 bits of a packed row of `bits` bits, in order.
fn ones(row: &[u8], bits: usize) -> impl Iterator<Item = usize> + '_ {
    row.iter().enumerate().flat_map(move |(i, &b)| {
        let mut b = b;
        std::iter::from_fn(move || {
            if b == 0 {
                return None;
            }
            let k = i * 8 + b.trailing_zeros() as usize;
            b &= b - 1;
            Some(k)
        })
        .filter(move |&k| k < bits)
    })
}
