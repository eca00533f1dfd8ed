//! `qfwd run` as a child process, and the summary lines it prints when it stops.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use qfwd::stats::ShardCounts;

use crate::scenario::Point;
use crate::{Error, Result};

use super::row::list;
use super::settings::{handler_specs, run_config};
use super::{ForwarderCounts, DECODER_NAME};

/// `qfwd run` as a child process on loopback.
pub(super) struct ChildForwarder {
    child: Child,
    pub(super) addr: SocketAddr,
    lines: mpsc::Receiver<String>,
    command: String,
}

/// Where the `qfwd` binary is: the point's `command`, else beside this program, else PATH.
fn qfwd_binary(point: &Point) -> PathBuf {
    if let Some(c) = &point.command {
        return c.clone();
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            for candidate in [dir.join("qfwd"), dir.join("../qfwd")] {
                if candidate.is_file() {
                    return candidate;
                }
            }
        }
    }
    PathBuf::from("qfwd")
}

/// The address the child listens on: the point's, or a free port the kernel picks.
fn listen_addr(point: &Point) -> Result<SocketAddr> {
    Ok(if point.listen.port() == 0 {
        // Ask the kernel for a free port, then hand it to the child.
        let probe = UdpSocket::bind(point.listen).map_err(|source| Error::Io {
            path: PathBuf::from(point.listen.to_string()),
            source,
        })?;
        probe.local_addr().map_err(|source| Error::Io {
            path: PathBuf::from(point.listen.to_string()),
            source,
        })?
    } else {
        point.listen
    })
}

/// The `qfwd run` command line for a point, listening on `addr`.
fn run_command(point: &Point, addr: SocketAddr, bin: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(["run", "--transport", "udp", "--stats-interval", "0"])
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--topology")
        .arg(point.topology.to_string())
        .args(
            handler_specs(point)
                .iter()
                .flat_map(|h| ["--handler", h.as_str()]),
        )
        .arg("--idle")
        .arg(match point.idle {
            qfwd::forward::IdlePolicy::Spin => "spin",
            qfwd::forward::IdlePolicy::Yield => "yield",
        })
        .arg("--batch")
        .arg(point.batch.to_string())
        .arg("--max-in-flight")
        .arg(point.max_in_flight.to_string())
        .arg("--watchdog-us")
        .arg(point.watchdog_us.to_string())
        .arg("--queue-deadline-us")
        .arg(point.queue_deadline_us.to_string())
        .arg("--max-request-bytes")
        .arg((point.payload_bytes as usize).max(4096).to_string());
    if let (d, Some(dem)) = (&point.decoder, &point.dem) {
        if d != "-" {
            cmd.args(["--decoder", d]).arg("--dem").arg(dem);
            if point.functions.is_empty() {
                cmd.args(["--name", DECODER_NAME]);
            }
            for f in &point.functions {
                cmd.args(["--name", f]);
            }
        }
    }
    let gpus = point.gpu_list().unwrap_or_default();
    if !gpus.is_empty() {
        cmd.arg("--gpus").arg(list(&gpus));
        for r in &point.route {
            cmd.arg("--route").arg(r);
        }
    } else if point.topology.needs_gpu() {
        cmd.arg("--gpu").arg(point.gpu_device.to_string());
    }
    if !point.cores.is_empty() {
        let list: Vec<String> = point.cores.iter().map(|c| c.to_string()).collect();
        cmd.arg("--cores").arg(list.join(","));
    }
    if run_config(point).allow_any {
        cmd.arg("--allow-any");
    }
    // The child ends with this process, even if it is killed (SIGKILL leaves no chance
    // to stop it): an orphan forwarder would spin and hold the port.
    cmd.arg("--exit-with-parent")
        .arg(std::process::id().to_string());
    cmd
}

impl ChildForwarder {
    pub(super) fn start(point: &Point) -> Result<ChildForwarder> {
        let addr = listen_addr(point)?;
        let bin = qfwd_binary(point);
        let mut cmd = run_command(point, addr, &bin);
        let command = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Child {
                command: command.clone(),
                detail: format!("cannot start {}: {e} (build it with `cargo build --release`, or set command = \"...\" in [forwarder])", bin.display()),
            })?;
        let stderr = child.stderr.take().expect("stderr was piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let me = ChildForwarder {
            child,
            addr,
            lines,
            command,
        };
        me.wait_until_serving()
    }

    /// Waits (15 s at most) for the child's `qfwd: serving` line; kills it otherwise.
    fn wait_until_serving(mut self) -> Result<ChildForwarder> {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut seen = Vec::new();
        loop {
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    let ready = line.starts_with("qfwd: serving");
                    seen.push(line);
                    if ready {
                        return Ok(self);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    return Err(Error::Child {
                        command: self.command.clone(),
                        detail: format!("exited before serving: {}", seen.join(" | ")),
                    });
                }
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(Error::Child {
                    command: self.command.clone(),
                    detail: format!("not serving after 15 s: {}", seen.join(" | ")),
                });
            }
        }
    }

    /// SIGTERM, wait for the summary (5 s), then parse its counters (and per-GPU ones).
    pub(super) fn stop(mut self) -> Result<(Option<ForwarderCounts>, Vec<ShardCounts>)> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut status = None;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                status = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            return Err(Error::Child {
                command: std::mem::take(&mut self.command),
                detail: "did not exit within 5 s of SIGTERM; killed".into(),
            });
        }
        let mut summary: Option<ForwarderCounts> = None;
        let mut service = None;
        let mut stalls = None;
        let mut shards = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
            if let Some(c) = parse_summary(&line) {
                summary = Some(c);
            }
            if let Some(s) = parse_service_line(&line) {
                service = Some(s);
            }
            if let Some(s) = parse_stalls_line(&line) {
                stalls = Some(s);
            }
            if let Some(s) = parse_shard_line(&line) {
                shards.push(s);
            }
        }
        if let Some(c) = summary.as_mut() {
            c.service_ns = service;
            c.stalls = stalls;
        }
        Ok((summary, shards))
    }
}

impl Drop for ChildForwarder {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Parses `received N = answered ok A + answered with error E + dropped D`.
pub fn parse_summary(line: &str) -> Option<ForwarderCounts> {
    let nums: Vec<u64> = line
        .strip_prefix("received ")?
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    match nums[..] {
        [received, answered_ok, answered_error, dropped, ..] => Some(ForwarderCounts {
            received,
            answered_ok,
            answered_error,
            dropped,
            service_ns: None,
            stalls: None,
        }),
        _ => None,
    }
}

/// Parses the p50 and p99 (ns) of a summary's `service time: min Aus p50 Bus p99 Cus ...`.
pub fn parse_service_line(line: &str) -> Option<(u64, u64)> {
    let rest = line.trim().strip_prefix("service time:")?;
    let after = |key: &str| -> Option<u64> {
        let v = rest.split(key).nth(1)?.split_whitespace().next()?;
        let us: f64 = v.strip_suffix("us")?.parse().ok()?;
        (us.is_finite() && us >= 0.0).then(|| (us * 1000.0).round() as u64)
    };
    Some((after(" p50 ")?, after(" p99 ")?))
}

/// Parses a summary's `forwarder stalls: S, requests in service across one: R`.
pub fn parse_stalls_line(line: &str) -> Option<(u64, u64)> {
    let rest = line.trim().strip_prefix("forwarder stalls: ")?;
    let (stalls, requests) = rest.split_once(", requests in service across one: ")?;
    Some((stalls.parse().ok()?, requests.parse().ok()?))
}

/// Parses a summary's per-GPU line, `  gpu 1: submitted S, completed C, rejected R`.
pub fn parse_shard_line(line: &str) -> Option<ShardCounts> {
    let rest = line.trim().strip_prefix("gpu ")?;
    let nums: Vec<u64> = rest
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    if !rest.contains("submitted") {
        return None;
    }
    match nums[..] {
        [gpu, submitted, completed, rejected] => Some(ShardCounts {
            gpu: gpu as usize,
            submitted,
            completed,
            rejected,
        }),
        _ => None,
    }
}
