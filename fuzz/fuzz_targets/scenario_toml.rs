//! Any text as a `qfwd-latency sweep` scenario file: parsing, sweep expansion and checks
//! never panic, and every point they accept maps to forwarder settings that pass the
//! forwarder's own checks (ranges included) and to a load the emulator can size.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use qfwd_latency::scenario::Scenario;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(s) = Scenario::parse(text, Path::new("fuzz.toml")) else {
        return;
    };
    assert!(!s.points.is_empty());
    for p in &s.points {
        let _ = p.label(&s.swept_keys);
        let total = p.warmup.saturating_add(p.timed_samples());
        assert!(total <= 2 * u32::MAX as u64, "{total} requests");
        // Files named by the scenario need not exist here; everything else must pass.
        if let Err(e) = qfwd_latency::sweep::run_config(p).check_settings() {
            panic!("accepted point {p:?} gives forwarder settings that fail: {e}");
        }
    }
});
