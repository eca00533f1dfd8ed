//! What a run measured: every request's class, the latency histogram, stalls.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use qfwd::wire::{self};

/// What hostile datagrams the run sent, and what came of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostileCounts {
    /// Hostile datagrams handed to the transport.
    pub sent: u64,
    /// Of which the forwarder must answer (a readable header).
    pub answerable: u64,
    /// Answers with the status their kind expects (or -6: shed by an overloaded forwarder).
    pub answered: u64,
    /// Answers with another status, or to a kind that must get none.
    pub unexpected: u64,
}

/// Everything one run saw.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Round-trip times of the timed requests, ns (from intended send time in open loop).
    pub histogram: Histogram<u64>,
    pub sent: u64,
    /// Correct answers.
    pub ok: u64,
    /// Answers with a non-zero status, by status code.
    pub error_status: Vec<(i32, u64)>,
    /// Answers whose result or echoed timestamp is wrong.
    pub wrong: u64,
    /// Requests never answered within the timeout (nor later).
    pub lost: u64,
    /// Answers that arrived after the timeout (each also classified above by content).
    pub late: u64,
    /// Second answers to the same request.
    pub duplicate: u64,
    /// Datagrams that were not valid responses, or answered an id never sent.
    pub malformed: u64,
    /// Time from the first send to the last answer.
    pub elapsed: Duration,
    /// Requests the transport refused at first try (full ring or socket buffer); they
    /// were retried, and their wait is inside their latency.
    pub send_retries: u64,
    /// Ping-pong stopped sending after this many requests in a row were lost (the system
    /// under test is not answering; waiting out every timeout would take hours).
    pub abandoned_after: Option<u64>,
    /// Hostile datagrams mixed in (`hostile_percent`).
    pub hostile: HostileCounts,
    /// Gaps of [`STALL_NS`] or more beyond the quickest between two of the emulator's
    /// clock reads once timed requests were being sent (module docs).
    pub stalls: u64,
    /// Timed samples (answered) that were in flight across a stall, or (open loop) due
    /// to be sent during one.
    pub stalled_samples: u64,
}

impl Outcome {
    /// Answers with an error status, all codes.
    pub fn error_status_total(&self) -> u64 {
        self.error_status.iter().map(|e| e.1).sum()
    }

    /// Requests that did not get a correct answer, plus malformed and duplicate answers.
    pub fn errors(&self) -> u64 {
        self.error_status_total() + self.wrong + self.duplicate + self.malformed
    }

    /// Each request sent is ok, error status, wrong, or lost: exactly one.
    pub fn adds_up(&self) -> bool {
        self.sent == self.ok + self.error_status_total() + self.wrong + self.lost
    }

    /// Adds the outcome of a run that went on at the same time over another link: counts
    /// add, histograms merge, the elapsed time is the longer one.
    pub fn merge(&mut self, other: Outcome) {
        self.histogram
            .add(&other.histogram)
            .expect("histograms of one configuration have the same bounds");
        self.sent += other.sent;
        self.ok += other.ok;
        for (code, n) in other.error_status {
            match self.error_status.iter_mut().find(|e| e.0 == code) {
                Some(e) => e.1 += n,
                None => self.error_status.push((code, n)),
            }
        }
        self.wrong += other.wrong;
        self.lost += other.lost;
        self.late += other.late;
        self.duplicate += other.duplicate;
        self.malformed += other.malformed;
        self.elapsed = self.elapsed.max(other.elapsed);
        self.send_retries += other.send_retries;
        self.abandoned_after = match (self.abandoned_after, other.abandoned_after) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.stalls += other.stalls;
        self.stalled_samples += other.stalled_samples;
    }

    /// Answers per second over the run.
    pub fn achieved_rate_hz(&self) -> u64 {
        let answered = self.sent - self.lost;
        (answered as f64 / self.elapsed.as_secs_f64().max(1e-9)).round() as u64
    }
}

/// A percentile table for the terminal, latencies in µs.
pub fn percentile_table(h: &Histogram<u64>) -> String {
    let mut s = String::new();
    if h.is_empty() {
        return "no samples\n".to_string();
    }
    let us = |v: u64| v as f64 / 1000.0;
    s.push_str(&format!("{:>10} {:>12}\n", "percentile", "latency_us"));
    s.push_str(&format!("{:>10} {:>12.3}\n", "min", us(h.min())));
    for (label, q) in [
        ("50%", 0.5),
        ("90%", 0.9),
        ("99%", 0.99),
        ("99.9%", 0.999),
        ("99.99%", 0.9999),
    ] {
        s.push_str(&format!(
            "{:>10} {:>12.3}\n",
            label,
            us(h.value_at_quantile(q))
        ));
    }
    s.push_str(&format!("{:>10} {:>12.3}\n", "max", us(h.max())));
    s.push_str(&format!(
        "{:>10} {:>12.3}  (stdev {:.3}, {} samples)\n",
        "mean",
        h.mean() / 1000.0,
        h.stdev() / 1000.0,
        h.len()
    ));
    s
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sent {} = ok {} + error status {} + wrong {} + lost {}{}; late {}, duplicate {}, malformed {}, send retries {}; {} answers/s; \
             emulator stalls {} ({} timed samples in flight or due during one)",
            self.sent,
            self.ok,
            self.error_status_total(),
            self.wrong,
            self.lost,
            if self.adds_up() { "" } else { " (DOES NOT ADD UP: bug)" },
            self.late,
            self.duplicate,
            self.malformed,
            self.send_retries,
            self.achieved_rate_hz(),
            self.stalls,
            self.stalled_samples
        )?;
        for (code, n) in &self.error_status {
            write!(f, "\n  status {code} ({}): {n}", wire::status::name(*code))?;
        }
        let h = &self.hostile;
        if h.sent > 0 {
            write!(
                f,
                "\n  hostile datagrams sent {} ({} answerable): answered as their kind \
                 expects {}, unexpected answers {}, unanswered {}",
                h.sent,
                h.answerable,
                h.answered,
                h.unexpected,
                h.answerable.saturating_sub(h.answered)
            )?;
        }
        if let Some(n) = self.abandoned_after {
            write!(
                f,
                "\n  ABANDONED: {n} requests in a row got no answer within the timeout; \
                 the rest were not sent"
            )?;
        }
        Ok(())
    }
}
