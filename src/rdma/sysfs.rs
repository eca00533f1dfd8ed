//! RDMA devices as the kernel lists them under `/sys/class/infiniband`: names, drivers,
//! ports, link state and GIDs. Needs no RDMA library, so `qfwd doctor` reports them in
//! every build; the `rdma` feature opens them with ibverbs.
#![forbid(unsafe_code)]

use std::fs;
use std::path::{Path, PathBuf};

/// Where the kernel lists RDMA devices.
pub const SYSFS_ROOT: &str = "/sys/class/infiniband";

/// One GID table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gid {
    pub index: u32,
    /// As the kernel prints it (`fe80:0000:...`).
    pub gid: String,
    /// `RoCE v2`, `RoCE v1` or `IB/RoCE v1`, when the kernel says.
    pub kind: Option<String>,
    /// The network interface it belongs to, when the kernel says.
    pub netdev: Option<String>,
}

impl Gid {
    /// A RoCEv2 GID carrying an IPv4 address (`::ffff:a.b.c.d`): what NVQLink uses.
    pub fn is_roce_v2_ipv4(&self) -> bool {
        self.kind.as_deref() == Some("RoCE v2")
            && self.gid.starts_with("0000:0000:0000:0000:0000:ffff:")
    }
}

/// One port of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub number: u8,
    /// `4: ACTIVE`, `1: DOWN`, ...
    pub state: String,
    /// `5: LinkUp`, `3: Disabled`, ...
    pub phys_state: String,
    /// `Ethernet` (RoCE) or `InfiniBand`.
    pub link_layer: String,
    /// `100 Gb/sec (2X HDR)`, ...
    pub rate: String,
    /// Non-zero GIDs.
    pub gids: Vec<Gid>,
}

impl Port {
    pub fn is_active(&self) -> bool {
        self.state.contains("ACTIVE")
    }

    pub fn is_roce(&self) -> bool {
        self.link_layer == "Ethernet"
    }
}

/// One RDMA device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    /// Kernel driver (`mlx5_core` for ConnectX-4 and later), when the kernel says.
    pub driver: Option<String>,
    /// `fw_ver`.
    pub firmware: Option<String>,
    /// PCI address, when the device is a PCI function.
    pub pci: Option<String>,
    pub ports: Vec<Port>,
}

impl Device {
    /// An mlx5 device: the only kind whose doorbells qfwd rings directly.
    pub fn is_mlx5(&self) -> bool {
        self.name.starts_with("mlx5") || self.driver.as_deref() == Some("mlx5_core")
    }
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn link_name(p: &Path) -> Option<String> {
    fs::read_link(p)
        .ok()?
        .file_name()?
        .to_str()
        .map(str::to_string)
}

/// Every device under `root` (normally [`SYSFS_ROOT`]); empty when there is none (or no
/// such directory).
pub fn devices_in(root: &Path) -> Vec<Device> {
    let Ok(entries) = fs::read_dir(root) else {
        return vec![];
    };
    let mut names: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    names.sort();
    names.iter().map(|dir| device(dir)).collect()
}

/// What [`devices_in`] found, in one line for error messages: `"mlx5_0 (2 ports)"` or
/// `"nothing (the directory does not exist)"`.
pub fn summary(root: &Path, devices: &[Device]) -> String {
    if devices.is_empty() {
        return if root.exists() {
            "nothing: the directory is empty".to_string()
        } else {
            "nothing: the directory does not exist (no RDMA driver loaded)".to_string()
        };
    }
    devices
        .iter()
        .map(|d| {
            let active = d.ports.iter().filter(|p| p.is_active()).count();
            format!("{} ({} ports, {active} active)", d.name, d.ports.len())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn device(dir: &Path) -> Device {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("?")
        .to_string();
    let mut ports = vec![];
    if let Ok(entries) = fs::read_dir(dir.join("ports")) {
        let mut numbers: Vec<u8> = entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        numbers.sort_unstable();
        for n in numbers {
            ports.push(port(&dir.join("ports").join(n.to_string()), n));
        }
    }
    Device {
        name,
        driver: link_name(&dir.join("device/driver")),
        firmware: read(&dir.join("fw_ver")),
        pci: link_name(&dir.join("device")),
        ports,
    }
}

fn port(dir: &Path, number: u8) -> Port {
    let mut gids = vec![];
    if let Ok(entries) = fs::read_dir(dir.join("gids")) {
        let mut idx: Vec<u32> = entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        idx.sort_unstable();
        for i in idx {
            let Some(gid) = read(&dir.join("gids").join(i.to_string())) else {
                continue;
            };
            if gid.chars().all(|c| c == '0' || c == ':') {
                continue;
            }
            gids.push(Gid {
                index: i,
                gid,
                kind: read(&dir.join("gid_attrs/types").join(i.to_string())),
                netdev: read(&dir.join("gid_attrs/ndevs").join(i.to_string())),
            });
        }
    }
    Port {
        number,
        state: read(&dir.join("state")).unwrap_or_default(),
        phys_state: read(&dir.join("phys_state")).unwrap_or_default(),
        link_layer: read(&dir.join("link_layer")).unwrap_or_default(),
        rate: read(&dir.join("rate")).unwrap_or_default(),
        gids,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_fake_sysfs_tree() {
        let root = std::env::temp_dir().join(format!("qfwd-sysfs-{}", std::process::id()));
        let port = root.join("mlx5_0/ports/1");
        fs::create_dir_all(port.join("gids")).unwrap();
        fs::create_dir_all(port.join("gid_attrs/types")).unwrap();
        fs::create_dir_all(port.join("gid_attrs/ndevs")).unwrap();
        fs::write(root.join("mlx5_0/fw_ver"), "28.39.1002\n").unwrap();
        fs::write(port.join("state"), "4: ACTIVE\n").unwrap();
        fs::write(port.join("phys_state"), "5: LinkUp\n").unwrap();
        fs::write(port.join("link_layer"), "Ethernet\n").unwrap();
        fs::write(port.join("rate"), "200 Gb/sec (4X HDR)\n").unwrap();
        fs::write(
            port.join("gids/0"),
            "fe80:0000:0000:0000:0a5c:29ff:fe0c:1e2a\n",
        )
        .unwrap();
        fs::write(
            port.join("gids/1"),
            "0000:0000:0000:0000:0000:0000:0000:0000\n",
        )
        .unwrap();
        fs::write(
            port.join("gids/3"),
            "0000:0000:0000:0000:0000:ffff:0a00:0002\n",
        )
        .unwrap();
        fs::write(port.join("gid_attrs/types/3"), "RoCE v2\n").unwrap();
        fs::write(port.join("gid_attrs/ndevs/3"), "ens1f0np0\n").unwrap();
        let devs = devices_in(&root);
        assert_eq!(devs.len(), 1);
        let d = &devs[0];
        assert!(d.is_mlx5());
        assert_eq!(d.firmware.as_deref(), Some("28.39.1002"));
        let p = &d.ports[0];
        assert!(p.is_active() && p.is_roce());
        assert_eq!(p.gids.len(), 2, "zero GIDs are skipped");
        assert!(p.gids[1].is_roce_v2_ipv4());
        assert_eq!(p.gids[1].netdev.as_deref(), Some("ens1f0np0"));
        assert!(summary(&root, &devs).contains("mlx5_0 (1 ports, 1 active)"));
        fs::remove_dir_all(&root).unwrap();
        assert!(devices_in(&root).is_empty());
        assert!(summary(&root, &[]).contains("does not exist"));
    }
}
