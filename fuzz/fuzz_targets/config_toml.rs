//! Any text as a `qfwd run --config` file: parsing and checking never panic, and settings
//! that pass the checks can be used: every value derived from them (durations, the GPU
//! and soft NIC layouts, the loop's tunables, the function names) is computed without a
//! panic or an allocation beyond the documented ranges.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use qfwd::config::RunConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(c) = RunConfig::from_toml(text, Path::new("fuzz.toml")) else {
        return;
    };
    if c.validate().is_err() {
        return;
    }
    let _ = c.duration();
    let _ = c.stats_interval();
    let f = c.forward_config();
    assert!(f.batch >= 1 && f.max_in_flight >= 1);
    let _ = c.gpu_options().layout();
    let _ = c.softnic_config();
    let _ = c.function_names().expect("validated names");
    let _ = c.allowlist().expect("validated allowlist");
    let _ = c.exposure_warning();
    let _ = c.gpu_list();
});
