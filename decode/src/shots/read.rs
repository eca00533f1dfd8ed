//! [`ShotReader`]: one shot at a time from a stream, in any of Stim's formats.
#![forbid(unsafe_code)]

use std::io::{BufRead, Read};

use super::{ShotFormat, ShotLayout};

/// Reads shots one at a time from a stream (a file, a pipe, stdin), so a pipeline never
/// holds more than one shot (`ptb64`: one group of 64). What `qfwd decode` reads.
///
/// For `b8` and `01` its answers (shots and errors) are those of [`super::Shots::from_b8`]
/// and [`super::Shots::from_01`] on the same bytes. It reads no line whole: a line with no
/// end cannot make it allocate more than the shot's bits. It accepts what Stim writes, and
/// past Stim's own readers: a last line without its `\n` (`01`, `hits`, `dets`), and spaces
/// or tabs between `dets` values. It refuses what Stim's readers take silently: an index
/// named twice in a `hits` or `dets` line, `M` values in `dets` (shots of detection events
/// hold no measurements).
#[derive(Debug)]
pub struct ShotReader<R> {
    r: R,
    format: ShotFormat,
    layout: ShotLayout,
    bits: usize,
    row_bytes: usize,
    /// Shots read so far.
    shots: usize,
    /// Text formats: lines consumed so far (`01`: one per shot).
    lines: usize,
    /// Binary formats: bytes consumed so far.
    offset: u64,
    /// `01`: the line; `ptb64`: the group of 64 shots being handed out.
    buf: Vec<u8>,
    /// `ptb64`: shots of `buf` not yet handed out.
    group_left: usize,
    done: bool,
}

/// An error's text, as [`ShotReader::next_into`] gives it.
type Refusal = String;

impl<R: BufRead> ShotReader<R> {
    /// Shots of `bits` detection events (`dets` names them `D0..`).
    pub fn new(r: R, bits: usize, format: ShotFormat) -> ShotReader<R> {
        ShotReader::with_layout(r, ShotLayout::detectors(bits), format)
    }

    /// Shots of `layout`'s detectors, then its observables.
    pub fn with_layout(r: R, layout: ShotLayout, format: ShotFormat) -> ShotReader<R> {
        let bits = layout.bits();
        ShotReader {
            r,
            format,
            layout,
            bits,
            row_bytes: bits.div_ceil(8),
            shots: 0,
            lines: 0,
            offset: 0,
            buf: Vec::new(),
            group_left: 0,
            done: false,
        }
    }

    /// Shots read so far.
    pub fn shots(&self) -> usize {
        self.shots
    }

    /// Reads the next shot into `row` (`ceil(bits / 8)` bytes, padding bits cleared):
    /// `Ok(false)` at the end of the stream. A shot that does not fit the format is an
    /// error naming it: the 1-based line in text formats, the 0-based shot (and byte
    /// offset) in binary ones. After an error or the end, it reads nothing more.
    pub fn next_into(&mut self, row: &mut [u8]) -> Result<bool, Refusal> {
        assert_eq!(row.len(), self.row_bytes, "row of the wrong size");
        if self.done {
            return Ok(false);
        }
        let more = match self.format {
            ShotFormat::B8 => self.next_b8(row),
            ShotFormat::Zero1 => self.next_01(row),
            ShotFormat::R8 => self.next_r8(row),
            ShotFormat::Ptb64 => self.next_ptb64(row),
            ShotFormat::Hits => self.next_hits(row),
            ShotFormat::Dets => self.next_dets(row),
        };
        match more {
            Ok(true) => self.shots += 1,
            _ => self.done = true,
        }
        more
    }

    /// The next byte, not consumed.
    fn peek(&mut self) -> Result<Option<u8>, Refusal> {
        loop {
            match self.r.fill_buf() {
                Ok(b) => return Ok(b.first().copied()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("read error after {} shots: {e}", self.shots)),
            }
        }
    }

    /// The next byte, consumed.
    fn byte(&mut self) -> Result<Option<u8>, Refusal> {
        let b = self.peek()?;
        if b.is_some() {
            self.r.consume(1);
            self.offset += 1;
        }
        Ok(b)
    }

    /// Fills `buf` as far as the stream goes; the bytes read.
    fn fill(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match r.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }

    /// Shots of 0 bits in a binary format: no bytes, so none can be counted.
    fn no_bits(&mut self) -> Result<bool, Refusal> {
        match self.peek()? {
            None => Ok(false),
            Some(_) => Err(format!(
                "{} shots of 0 bits hold no bytes; cannot count the shots",
                self.format
            )),
        }
    }

    fn next_b8(&mut self, row: &mut [u8]) -> Result<bool, Refusal> {
        if self.row_bytes == 0 {
            return self.no_bits();
        }
        let got = Self::fill(&mut self.r, row)
            .map_err(|e| format!("read error after {} shots: {e}", self.shots))?;
        self.offset += got as u64;
        if got == 0 {
            return Ok(false);
        }
        if got < row.len() {
            return Err(format!(
                "{} bytes is not a whole number of {}-byte shots ({} bits per shot): is this \
                 file from another model?",
                self.shots * self.row_bytes + got,
                self.row_bytes,
                self.bits
            ));
        }
        if self.bits % 8 != 0 && row[self.row_bytes - 1] & !((1u8 << (self.bits % 8)) - 1) != 0 {
            return Err(format!(
                "shot {} sets a bit past the {} bits per shot: is this file from a model with \
                 more detectors?",
                self.shots, self.bits
            ));
        }
        Ok(true)
    }

    fn next_01(&mut self, row: &mut [u8]) -> Result<bool, Refusal> {
        let lineno = self.shots + 1;
        self.buf.clear();
        // At most the bits, `\r` and `\n`: a longer line is an error without reading on.
        let limit = self.bits as u64 + 2;
        (&mut self.r)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| format!("line {lineno}: read error: {e}"))?;
        if self.buf.is_empty() {
            return Ok(false);
        }
        self.lines += 1;
        let ended = self.buf.last() == Some(&b'\n');
        let mut text = &self.buf[..];
        text = text.strip_suffix(b"\n").unwrap_or(text);
        text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.len() != self.bits {
            let shown = if !ended && self.buf.len() as u64 == limit {
                format!("at least {limit}")
            } else {
                text.len().to_string()
            };
            return Err(format!(
                "line {lineno}: {shown} characters, expected {} (one 0/1 per bit)",
                self.bits
            ));
        }
        row.fill(0);
        for (k, &c) in text.iter().enumerate() {
            match c {
                b'0' => {}
                b'1' => row[k / 8] |= 1 << (k % 8),
                _ => {
                    return Err(format!(
                        "line {lineno}: character {} is {:?}, expected 0 or 1",
                        k + 1,
                        c as char
                    ))
                }
            }
        }
        Ok(true)
    }

    /// `r8`: runs of 0s, each byte one run (255: a run of 255 that goes on); the shot ends
    /// where a run reaches the bit one past its end.
    fn next_r8(&mut self, row: &mut [u8]) -> Result<bool, Refusal> {
        let Some(mut run) = self.byte()? else {
            return Ok(false);
        };
        let (shot, start) = (self.shots, self.offset - 1);
        row.fill(0);
        let mut pos = 0usize;
        loop {
            pos += usize::from(run);
            if pos > self.bits {
                return Err(format!(
                    "shot {shot} (byte {start}): its runs reach bit {pos}, past the {} bits per \
                     shot and the end marker: is this file from another model?",
                    self.bits
                ));
            }
            if run != 255 {
                if pos == self.bits {
                    return Ok(true);
                }
                row[pos / 8] |= 1 << (pos % 8);
                pos += 1;
            }
            run = self.byte()?.ok_or_else(|| {
                format!(
                    "shot {shot} (byte {start}): the data ends inside the shot (its runs reach bit \
                     {pos} of {}): is the file cut short, or from another model?",
                    self.bits
                )
            })?;
        }
    }

    /// `ptb64`: a group of 64 shots is read whole (8 bytes per bit), then handed out.
    fn next_ptb64(&mut self, row: &mut [u8]) -> Result<bool, Refusal> {
        if self.bits == 0 {
            return self.no_bits();
        }
        if self.group_left == 0 {
            let group = 8 * self.bits;
            self.buf.resize(group, 0);
            let got = Self::fill(&mut self.r, &mut self.buf)
                .map_err(|e| format!("read error after {} shots: {e}", self.shots))?;
            self.offset += got as u64;
            if got == 0 {
                return Ok(false);
            }
            if got < group {
                return Err(format!(
                    "the data ends {got} bytes into the group of shots {}..{} (ptb64 holds shots \
                     in groups of 64, {group} bytes each: 8 per bit, {} bits per shot): is the \
                     file cut short, or from another model?",
                    self.shots,
                    self.shots + 63,
                    self.bits
                ));
            }
            self.group_left = 64;
        }
        let s = 64 - self.group_left;
        let (byte, bit) = (s / 8, s % 8);
        row.fill(0);
        for k in 0..self.bits {
            row[k / 8] |= (self.buf[8 * k + byte] >> bit & 1) << (k % 8);
        }
        self.group_left -= 1;
        Ok(true)
    }

    /// Digits at the reader, as a number: `None` when there are none.
    fn number(&mut self, lineno: usize) -> Result<Option<u64>, Refusal> {
        let mut value: Option<u64> = None;
        while let Some(c @ b'0'..=b'9') = self.peek()? {
            self.byte()?;
            let v = value
                .unwrap_or(0)
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(c - b'0')))
                .ok_or_else(|| format!("line {lineno}: an index past 2^64"))?;
            value = Some(v);
        }
        Ok(value)
    }

    /// Whether the line ends here (`\n`, `\r\n`, or the end of the data), consuming it.
    fn line_end(&mut self) -> Result<bool, Refusal> {
        match self.peek()? {
            None => Ok(true),
            Some(b'\n') => {
                self.byte()?;
                self.lines += 1;
                Ok(true)
            }
            Some(b'\r') => {
                self.byte()?;
                match self.peek()? {
                    None => Ok(true),
                    Some(b'\n') => {
                        self.byte()?;
                        self.lines += 1;
                        Ok(true)
                    }
                    Some(_) => Err(format!("line {}: a `\\r` inside the line", self.lines + 1)),
                }
            }
            Some(_) => Ok(false),
        }
    }

    /// Sets bit `at` of `row` (`name` names it in the line's errors); a bit set twice is an
    /// error.
    fn set(row: &mut [u8], at: usize, lineno: usize, name: &str) -> Result<(), Refusal> {
        let (byte, mask) = (at / 8, 1u8 << (at % 8));
        if row[byte] & mask != 0 {
            return Err(format!("line {lineno}: {name} appears twice"));
        }
        row[byte] |= mask;
        Ok(())
    }

    /// `hits`: comma-separated indices; an empty line is a shot without a 1.
    fn next_hits(&mut self, row: &mut [u8]) -> Result<bool, Refusal> {
        if self.peek()?.is_none() {
            return Ok(false);
        }
        let lineno = self.lines + 1;
        row.fill(0);
        if self.line_end()? {
            return Ok(true);
        }
        loop {
            let Some(v) = self.number(lineno)? else {
                return Err(format!(
                    "line {lineno}: {} where an index was expected (hits lines are \
                     comma-separated indices of the 1 bits)",
                    shown(self.peek()?)
                ));
            };
            if v >= self.bits as u64 {
                return Err(format!(
                    "line {lineno}: index {v} is past the {} bits per shot (0..={}): is this \
                     file from another model?",
                    self.bits,
                    self.bits as i64 - 1
                ));
            }
            Self::set(row, v as usize, lineno, &format!("index {v}"))?;
            if self.line_end()? {
                return Ok(true);
            }
            match self.byte()? {
                Some(b',') => {}
                c => {
                    return Err(format!(
                        "line {lineno}: {} after index {v}, expected `,` or the end of the line",
                        shown(c)
                    ))
                }
            }
        }
    }

    /// `dets`: `shot`, then ` D5` per detector and ` L0` per observable.
    fn next_dets(&mut self, row: &mut [u8]) -> Result<bool, Refusal> {
        // Blank space between shots is skipped, as Stim skips it.
        loop {
            match self.peek()? {
                None => return Ok(false),
                Some(b' ' | b'\t' | b'\r') => {
                    self.byte()?;
                }
                Some(b'\n') => {
                    self.byte()?;
                    self.lines += 1;
                }
                Some(_) => break,
            }
        }
        let lineno = self.lines + 1;
        for &want in b"shot" {
            let c = self.byte()?;
            if c != Some(want) {
                return Err(format!(
                    "line {lineno}: {} where `shot` was expected (each dets line starts with \
                     `shot`)",
                    shown(c)
                ));
            }
        }
        row.fill(0);
        loop {
            let mut spaced = false;
            while let Some(b' ' | b'\t') = self.peek()? {
                self.byte()?;
                spaced = true;
            }
            if self.line_end()? {
                return Ok(true);
            }
            let prefix = self.byte()?;
            if !spaced {
                return Err(format!(
                    "line {lineno}: {} with no space before it (dets values are \
                     space-separated: `shot D1 D5 L0`)",
                    shown(prefix)
                ));
            }
            self.dets_value(row, prefix, lineno)?;
        }
    }

    /// One `dets` value after its prefix (`D` or `L`), set in `row`.
    fn dets_value(
        &mut self,
        row: &mut [u8],
        prefix: Option<u8>,
        lineno: usize,
    ) -> Result<(), Refusal> {
        let (base, count, what) = match prefix {
            Some(b'D') => (0, self.layout.detectors, "detectors"),
            Some(b'L') => (
                self.layout.detectors,
                self.layout.observables,
                "observables",
            ),
            Some(b'M') => {
                return Err(format!(
                    "line {lineno}: an `M` (measurement) value; these shots hold detection \
                     events (sample them with a detector sampler: `stim detect`, \
                     `compile_detector_sampler`)"
                ))
            }
            c => {
                return Err(format!(
                    "line {lineno}: {} where a value was expected (`D5` or `L0`)",
                    shown(c)
                ))
            }
        };
        let p = prefix.map_or('?', char::from);
        let Some(v) = self.number(lineno)? else {
            return Err(format!(
                "line {lineno}: `{p}` followed by {}, expected its index",
                shown(self.peek()?)
            ));
        };
        if v >= count as u64 {
            return Err(if count == 0 {
                format!(
                    "line {lineno}: {p}{v}, but these shots hold no {what}{}",
                    if p == 'L' {
                        " (the detection events alone; none appended)"
                    } else {
                        ""
                    }
                )
            } else {
                format!(
                    "line {lineno}: {p}{v} is past the {count} {what} of a shot ({p}0..={p}{}): \
                     is this file from another model?",
                    count - 1
                )
            });
        }
        Self::set(row, base + v as usize, lineno, &format!("{p}{v}"))
    }
}

/// A byte as errors show it: `'x'`, or `the end of the data`.
fn shown(c: Option<u8>) -> String {
    match c {
        None => "the end of the data".into(),
        Some(b'\n') => "the end of the line".into(),
        Some(c) if c.is_ascii_graphic() || c == b' ' => format!("{:?}", c as char),
        Some(c) => format!("byte {c:#04x}"),
    }
}
