//! `qfwd doctor` on a fake lab host: the report as text and as JSON, and the exit status
//! when a check fails.
use std::path::Path;
use std::process::Command;

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn doctor(root: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .arg("doctor")
        .arg("--proc-root")
        .arg(root.join("proc"))
        .arg("--sys-root")
        .arg(root.join("sys"))
        .arg("--sysfs-root")
        .arg(root.join("sys/class/infiniband"))
        .args(["--no-gpu", "--no-verbs"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn doctor_reports_a_fake_host_as_text_and_json_and_fails_on_memlock() {
    let root = std::env::temp_dir().join(format!("qfwd-doctor-{}", std::process::id()));
    let cpu = "sys/devices/system/cpu";
    put(&root, &format!("{cpu}/online"), "0-3\n");
    put(&root, &format!("{cpu}/isolated"), "2-3\n");
    put(&root, &format!("{cpu}/nohz_full"), "2-3\n");
    for c in 0..4 {
        put(
            &root,
            &format!("{cpu}/cpu{c}/cpufreq/scaling_governor"),
            "performance\n",
        );
    }
    put(&root, "proc/self/status", "CapEff:\t0000000000000000\n");
    put(
        &root,
        "proc/self/limits",
        "Max locked memory         65536                65536                bytes\n",
    );

    let out = doctor(&root, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("[pass] isolated cores: 2-3 isolated"),
        "{text}"
    );
    assert!(
        text.contains("[pass] cpu governor: performance on every core"),
        "{text}"
    );
    assert!(text.contains("[fail] memlock limit: 65536 bytes"), "{text}");
    assert!(text.contains("fix: `ulimit -l unlimited`"), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 lab host check(s) failed"));

    put(
        &root,
        "proc/self/limits",
        "Max locked memory         unlimited            unlimited            bytes\n",
    );
    let out = doctor(&root, &["--format", "json", "--cores", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // --no-gpu: no gpu-direct lines (they need a GPU to say anything).
    assert!(v["gpu_direct"].as_array().unwrap().is_empty(), "{v}");
    let lab = v["lab_host"].as_array().unwrap();
    let memlock = lab.iter().find(|c| c["name"] == "memlock limit").unwrap();
    assert_eq!(memlock["status"], "pass");
    assert!(lab.iter().all(|c| c["status"] != "fail"), "{v}");
    assert!(v["doorbells"].as_array().unwrap().len() >= 9);
    assert!(v["rdma_devices"].as_array().unwrap().is_empty());
    let out = doctor(&root, &["--cores", "2,70000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cores[1]") && err.contains("70000"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}
