//! The wires toward the QPU side, chosen where a service is assembled: the soft NIC, the
//! `gpu-direct` service and the stream service take any [`Transport`] as their wire, and
//! these functions give them an in-process ring (the emulator's end comes back) or UDP
//! sockets (their bound addresses come back).
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use crate::decode::window::StreamModel;
use crate::direct::DirectService;
use crate::queues::{NicLayout, SoftNicConfig};
use crate::shm::SharedRegion;
use crate::softnic::SoftNicTransport;
use crate::stream::{RunningStreams, ServiceOptions};
use crate::transport::inproc::{self, InprocClient};
use crate::transport::udp::{AllowedPeer, UdpTransport};
use crate::transport::Transport;
use crate::{Error, Result};

/// A soft NIC in a fresh heap region whose wire is an in-process ring: returns the
/// emulator's client and the forwarder's transport.
pub fn softnic_inproc(config: &SoftNicConfig) -> Result<(InprocClient, SoftNicTransport)> {
    let layout = NicLayout::new(config)?;
    softnic_inproc_in(config, SharedRegion::heap(layout.len)?, false)
}

/// [`softnic_inproc`] in `region` (at least [`NicLayout::len`] bytes: GPU-mapped memory for
/// a kernel that posts), with the send queue handed to a device side when `device_posted`
/// (see [`SoftNicTransport::start_device_posted`]).
pub fn softnic_inproc_in(
    config: &SoftNicConfig,
    region: SharedRegion,
    device_posted: bool,
) -> Result<(InprocClient, SoftNicTransport)> {
    let layout = NicLayout::new(config)?;
    let slot = layout.rx_slot_bytes.max(config.max_response_bytes as usize);
    let (client, wire) = inproc::channel(2 * layout.rx_slots as usize, slot)?;
    Ok((client, softnic_on(config, region, wire, device_posted)?))
}

/// A soft NIC in a fresh heap region whose wire is a UDP socket bound to `listen`: returns
/// the bound address (for the emulator's `UdpClient`) and the transport. The QP connects to
/// the first allowed peer that sends a CUQR request; datagrams from other peers are dropped
/// and counted ([`crate::transport::TransportDrops`]).
pub fn softnic_udp(
    config: &SoftNicConfig,
    listen: SocketAddr,
    allowlist: Vec<AllowedPeer>,
) -> Result<(SocketAddr, SoftNicTransport)> {
    let layout = NicLayout::new(config)?;
    softnic_udp_in(
        config,
        listen,
        allowlist,
        SharedRegion::heap(layout.len)?,
        false,
    )
}

/// [`softnic_udp`] in `region`, with the send queue handed to a device side when
/// `device_posted`.
pub fn softnic_udp_in(
    config: &SoftNicConfig,
    listen: SocketAddr,
    allowlist: Vec<AllowedPeer>,
    region: SharedRegion,
    device_posted: bool,
) -> Result<(SocketAddr, SoftNicTransport)> {
    let wire = UdpTransport::bind(listen, allowlist)?;
    let local = wire.local_addr();
    Ok((local, softnic_on(config, region, wire, device_posted)?))
}

/// A soft NIC in `region` on `wire`.
fn softnic_on<W>(
    config: &SoftNicConfig,
    region: SharedRegion,
    wire: W,
    device_posted: bool,
) -> Result<SoftNicTransport>
where
    W: Transport + Send + 'static,
    W::Peer: PartialEq + Send,
{
    if device_posted {
        SoftNicTransport::start_device_posted(config, region, wire)
    } else {
        SoftNicTransport::start(config, region, wire)
    }
}

/// Gives each link of `service` a soft NIC whose wire is a UDP socket: link i listens on
/// `listen`'s port + i (port 0: any free port). Returns the bound addresses.
pub fn direct_udp(
    service: &mut DirectService,
    listen: SocketAddr,
    allowlist: &[AllowedPeer],
) -> Result<Vec<SocketAddr>> {
    let links = service.links();
    let mut addrs = Vec::new();
    for i in 0..links {
        let mut at = listen;
        if listen.port() != 0 {
            let port = u16::try_from(i)
                .ok()
                .and_then(|i| listen.port().checked_add(i))
                .ok_or_else(|| Error::InvalidSetting {
                    key: "listen",
                    detail: format!("port {} + {links} links runs past 65535", listen.port()),
                })?;
            at.set_port(port);
        }
        let wire = UdpTransport::bind(at, allowlist.to_vec())?;
        addrs.push(wire.local_addr());
        service.attach_wire(i, wire)?;
    }
    Ok(addrs)
}

/// The stream service on a UDP socket bound to `listen` (`qfwd run --streams`), taking
/// requests only from `allowlist` (empty: from everyone).
pub fn streams_udp(
    opts: &ServiceOptions,
    model: Arc<StreamModel>,
    listen: SocketAddr,
    allowlist: Vec<AllowedPeer>,
) -> Result<RunningStreams> {
    let transport = UdpTransport::bind(listen, allowlist)?;
    let local = transport.local_addr();
    let on = format!("udp {local}");
    crate::stream::spawn_on(transport, opts, model, Some(local), &on)
}
