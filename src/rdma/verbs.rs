//! ibverbs, in the three layers of STYLE.md: `rdma_sys` is the raw layer; the functions
//! here turn each call's return into a [`Result`] naming the device and the operation;
//! the types own their verbs objects and release them on drop (each keeps what it was
//! created from alive through an `Arc`). Every wrapper has `as_raw()` for the mlx5 direct
//! path.
//!
//! Data-path calls whose safety the types cannot prove (posting a buffer the NIC reads or
//! writes later) are `unsafe fn` with a `# Safety` section.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys::*;

use super::control::Endpoint;
use super::sysfs;
use crate::shm::SharedRegion;
use crate::{Error, Result};

/// The error of a verbs call that returned `ret` (an errno, or -1 with errno set).
fn verbs_error(device: &str, op: &'static str, ret: c_int) -> Error {
    let source = if ret > 0 {
        std::io::Error::from_raw_os_error(ret)
    } else {
        std::io::Error::last_os_error()
    };
    Error::Rdma {
        device: device.to_string(),
        op,
        source,
    }
}

fn check(device: &str, op: &'static str, ret: c_int) -> Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(verbs_error(device, op, ret))
    }
}

/// Names of the devices libibverbs sees.
pub fn device_names() -> Vec<String> {
    let mut n: c_int = 0;
    // SAFETY: a valid out-pointer; the list is freed below.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        return vec![];
    }
    let mut names = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n.max(0) as usize {
        // SAFETY: `list` holds `n` valid device pointers until freed.
        let dev = unsafe { *list.add(i) };
        // SAFETY: ibv_get_device_name returns a NUL-terminated string owned by the device.
        let name = unsafe { CStr::from_ptr(ibv_get_device_name(dev)) };
        names.push(name.to_string_lossy().into_owned());
    }
    // SAFETY: the list came from ibv_get_device_list and is freed once.
    unsafe { ibv_free_device_list(list) };
    names
}

/// An open device (`ibv_context`), closed on drop.
pub struct Context {
    ctx: NonNull<ibv_context>,
    name: String,
}

// SAFETY: an ibv_context may be used from any thread (libibverbs is thread-safe for
// everything but data-path calls on one queue, which our owners serialize).
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

/// What a port reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortInfo {
    pub state: u32,
    pub active_mtu: u32,
    pub link_layer: u8,
    pub lid: u16,
    pub gid_tbl_len: i32,
}

impl PortInfo {
    pub fn is_active(&self) -> bool {
        self.state == ibv_port_state::IBV_PORT_ACTIVE
    }

    /// Ethernet link layer (RoCE).
    pub fn is_ethernet(&self) -> bool {
        self.link_layer == 2
    }
}

impl Context {
    /// Opens `name`, or the first device when `None`. With no device at all, or none of
    /// that name, the error says what was looked at and found.
    pub fn open(name: Option<&str>) -> Result<Arc<Context>> {
        let root = Path::new(sysfs::SYSFS_ROOT);
        let mut n: c_int = 0;
        // SAFETY: a valid out-pointer; the list is freed below.
        let list = unsafe { ibv_get_device_list(&mut n) };
        if list.is_null() || n <= 0 {
            if !list.is_null() {
                // SAFETY: freed once.
                unsafe { ibv_free_device_list(list) };
            }
            let found = sysfs::summary(root, &sysfs::devices_in(root));
            return Err(Error::NoRdmaDevice {
                looked_in: format!("{} and libibverbs", sysfs::SYSFS_ROOT),
                found,
            });
        }
        let mut chosen = None;
        let mut names = vec![];
        for i in 0..n as usize {
            // SAFETY: `list` holds `n` valid device pointers until freed.
            let dev = unsafe { *list.add(i) };
            // SAFETY: a NUL-terminated name owned by the device.
            let dev_name = unsafe { CStr::from_ptr(ibv_get_device_name(dev)) }
                .to_string_lossy()
                .into_owned();
            if chosen.is_none() && name.is_none_or(|want| want == dev_name) {
                chosen = Some((dev, dev_name.clone()));
            }
            names.push(dev_name);
        }
        let result = match chosen {
            None => Err(Error::NoRdmaDevice {
                looked_in: format!(
                    "{} and libibverbs, for {:?}",
                    sysfs::SYSFS_ROOT,
                    name.unwrap_or("")
                ),
                found: names.join(", "),
            }),
            Some((dev, dev_name)) => {
                // SAFETY: `dev` is valid while the list is.
                let ctx = unsafe { ibv_open_device(dev) };
                match NonNull::new(ctx) {
                    Some(ctx) => Ok(Arc::new(Context {
                        ctx,
                        name: dev_name,
                    })),
                    None => Err(verbs_error(&dev_name, "ibv_open_device", -1)),
                }
            }
        };
        // SAFETY: freed once; the opened context does not depend on the list.
        unsafe { ibv_free_device_list(list) };
        result
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn as_raw(&self) -> *mut ibv_context {
        self.ctx.as_ptr()
    }

    pub fn query_port(&self, port: u8) -> Result<PortInfo> {
        // SAFETY: ibv_port_attr is plain data; all-zero is a valid value.
        let mut attr: ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: a live context and a valid out-pointer.
        let ret = unsafe { ___ibv_query_port(self.as_raw(), port, &mut attr) };
        check(&self.name, "ibv_query_port", ret)?;
        Ok(PortInfo {
            state: attr.state,
            active_mtu: attr.active_mtu,
            link_layer: attr.link_layer,
            lid: attr.lid,
            gid_tbl_len: attr.gid_tbl_len,
        })
    }

    pub fn query_gid(&self, port: u8, index: u8) -> Result<[u8; 16]> {
        // SAFETY: ibv_gid is a plain union of bytes.
        let mut gid: ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: a live context and a valid out-pointer.
        let ret = unsafe { ibv_query_gid(self.as_raw(), port, index as c_int, &mut gid) };
        check(&self.name, "ibv_query_gid", ret)?;
        // SAFETY: every bit pattern is a valid `raw`.
        Ok(unsafe { gid.raw })
    }

    /// The GID index to use on `port`: a RoCEv2 IPv4 one (as the kernel lists it), else a
    /// RoCEv2 one, else 0.
    pub fn default_gid_index(&self, port: u8) -> u8 {
        let devs = sysfs::devices_in(Path::new(sysfs::SYSFS_ROOT));
        let Some(p) = devs
            .iter()
            .find(|d| d.name == self.name)
            .and_then(|d| d.ports.iter().find(|p| p.number == port))
        else {
            return 0;
        };
        p.gids
            .iter()
            .find(|g| g.is_roce_v2_ipv4())
            .or_else(|| p.gids.iter().find(|g| g.kind.as_deref() == Some("RoCE v2")))
            .map_or(0, |g| g.index as u8)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: opened by ibv_open_device, closed once, after every object made from it
        // (they hold an Arc<Context>).
        unsafe { ibv_close_device(self.ctx.as_ptr()) };
    }
}

/// A protection domain.
pub struct Pd {
    pd: NonNull<ibv_pd>,
    ctx: Arc<Context>,
}

// SAFETY: verbs objects may be used from any thread.
unsafe impl Send for Pd {}
// SAFETY: as above.
unsafe impl Sync for Pd {}

impl Pd {
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Pd>> {
        // SAFETY: a live context.
        let pd = unsafe { ibv_alloc_pd(ctx.as_raw()) };
        let pd = NonNull::new(pd).ok_or_else(|| verbs_error(ctx.name(), "ibv_alloc_pd", -1))?;
        Ok(Arc::new(Pd {
            pd,
            ctx: ctx.clone(),
        }))
    }

    pub fn as_raw(&self) -> *mut ibv_pd {
        self.pd.as_ptr()
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd, freed once after its MRs and QPs (which hold
        // an Arc<Pd>).
        unsafe { ibv_dealloc_pd(self.pd.as_ptr()) };
    }
}

/// A memory registration; it keeps the memory it covers alive (a [`SharedRegion`], or
/// whatever owns device memory registered through dma-buf).
pub struct Mr {
    mr: NonNull<ibv_mr>,
    _memory: Box<dyn std::any::Any + Send + Sync>,
    _pd: Arc<Pd>,
}

/// `ibv_reg_dmabuf_mr` (rdma-core 34 and later), looked up at run time so that qfwd builds
/// and runs against an older libibverbs, where dma-buf registration is simply missing.
type RegDmabufMr = unsafe extern "C" fn(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr;

fn reg_dmabuf_mr() -> Option<RegDmabufMr> {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the libraries this
    // process loaded (libibverbs is linked).
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"ibv_reg_dmabuf_mr".as_ptr()) };
    // SAFETY: when present, the symbol is libibverbs' `ibv_reg_dmabuf_mr`, whose C
    // prototype `RegDmabufMr` spells out (verbs.h).
    (!sym.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, RegDmabufMr>(sym) })
}

/// Whether this libibverbs has `ibv_reg_dmabuf_mr`.
pub fn has_dmabuf_registration() -> bool {
    reg_dmabuf_mr().is_some()
}

fn remote_write_access() -> c_int {
    (ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0)
        as c_int
}

// SAFETY: verbs objects may be used from any thread.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Mr {
    /// Registers all of `region` for local writes and remote writes (the request ring:
    /// the QPU's WRITE-with-imm lands in it).
    pub fn register(pd: &Arc<Pd>, region: &SharedRegion) -> Result<Mr> {
        let access = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
        // SAFETY: the region's memory stays valid while `self` holds a clone of it, and
        // the NIC's writes into it are what the region's atomic accessors are for.
        let mr = unsafe {
            ibv_reg_mr(
                pd.as_raw(),
                region.host_addr(0) as *mut std::ffi::c_void,
                region.len(),
                access as c_int,
            )
        };
        let mr =
            NonNull::new(mr).ok_or_else(|| verbs_error(pd.context().name(), "ibv_reg_mr", -1))?;
        Ok(Mr {
            mr,
            _memory: Box::new(region.clone()),
            _pd: pd.clone(),
        })
    }

    /// Registers `len` bytes at `addr` for local and remote writes: pinned host memory, or
    /// (with the `nvidia_peermem` module loaded) a GPU device address, which the peer-memory
    /// client resolves. `memory` is kept until the registration is dropped.
    ///
    /// # Safety
    /// `addr..addr + len` must stay allocated while `memory` lives, and every other agent
    /// that touches it must tolerate the NIC writing it at any time.
    pub unsafe fn register_raw(
        pd: &Arc<Pd>,
        addr: u64,
        len: usize,
        memory: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<Mr> {
        // SAFETY: the caller keeps the memory allocated while `memory` (owned by the Mr,
        // dropped after the deregistration) lives.
        let mr = unsafe {
            ibv_reg_mr(
                pd.as_raw(),
                addr as *mut std::ffi::c_void,
                len,
                remote_write_access(),
            )
        };
        let mr =
            NonNull::new(mr).ok_or_else(|| verbs_error(pd.context().name(), "ibv_reg_mr", -1))?;
        Ok(Mr {
            mr,
            _memory: memory,
            _pd: pd.clone(),
        })
    }

    /// Registers `len` bytes of a dma-buf (`fd`, from offset 0) for local and remote
    /// writes, addressed by the NIC (and by remote writers) as `iova..iova + len`. The fd
    /// may be closed once this returns; `memory` (the exporter's allocation) is kept until
    /// the registration is dropped. [`Error::DmaBufUnsupported`] when this libibverbs has
    /// no `ibv_reg_dmabuf_mr`.
    pub fn register_dmabuf(
        pd: &Arc<Pd>,
        fd: std::os::fd::BorrowedFd<'_>,
        len: usize,
        iova: u64,
        memory: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<Mr> {
        use std::os::fd::AsRawFd;
        let Some(reg) = reg_dmabuf_mr() else {
            return Err(Error::DmaBufUnsupported {
                device: pd.context().name().to_string(),
                detail: "this libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34 or later has it)"
                    .to_string(),
            });
        };
        // SAFETY: a live PD; `fd` is an open dma-buf for the call; the pages it exports
        // stay allocated while `memory` (owned by the Mr, dropped after deregistration)
        // lives.
        let mr = unsafe {
            reg(
                pd.as_raw(),
                0,
                len,
                iova,
                fd.as_raw_fd(),
                remote_write_access(),
            )
        };
        let mr = NonNull::new(mr)
            .ok_or_else(|| verbs_error(pd.context().name(), "ibv_reg_dmabuf_mr", -1))?;
        Ok(Mr {
            mr,
            _memory: memory,
            _pd: pd.clone(),
        })
    }

    pub fn lkey(&self) -> u32 {
        // SAFETY: a live registration.
        unsafe { self.mr.as_ref().lkey }
    }

    pub fn rkey(&self) -> u32 {
        // SAFETY: a live registration.
        unsafe { self.mr.as_ref().rkey }
    }

    pub fn as_raw(&self) -> *mut ibv_mr {
        self.mr.as_ptr()
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered by ibv_reg_mr, deregistered once.
        unsafe { ibv_dereg_mr(self.mr.as_ptr()) };
    }
}

/// A completion queue, polled (no event channel).
pub struct Cq {
    cq: NonNull<ibv_cq>,
    ctx: Arc<Context>,
}

// SAFETY: verbs objects may be used from any thread; one owner polls.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

/// One polled work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub byte_len: u32,
    /// Immediate data, host order.
    pub imm: u32,
    pub vendor_err: u32,
}

impl Completion {
    pub fn is_ok(&self) -> bool {
        self.status == ibv_wc_status::IBV_WC_SUCCESS
    }

    /// `ibv_wc_status_str`.
    pub fn status_str(&self) -> String {
        // SAFETY: returns a static string for any value.
        unsafe { CStr::from_ptr(ibv_wc_status_str(self.status)) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Cq {
    pub fn new(ctx: &Arc<Context>, depth: u32) -> Result<Arc<Cq>> {
        // SAFETY: a live context; no channel, no context pointer.
        let cq = unsafe {
            ibv_create_cq(
                ctx.as_raw(),
                depth as c_int,
                ptr::null_mut(),
                ptr::null_mut(),
                0,
            )
        };
        let cq = NonNull::new(cq).ok_or_else(|| verbs_error(ctx.name(), "ibv_create_cq", -1))?;
        Ok(Arc::new(Cq {
            cq,
            ctx: ctx.clone(),
        }))
    }

    pub fn as_raw(&self) -> *mut ibv_cq {
        self.cq.as_ptr()
    }

    /// Polls one completion without blocking.
    #[inline]
    pub fn poll_one(&self) -> Result<Option<Completion>> {
        // SAFETY: ibv_wc is plain data.
        let mut wc: ibv_wc = unsafe { std::mem::zeroed() };
        // SAFETY: a live CQ and room for one completion.
        let n = unsafe { ibv_poll_cq(self.as_raw(), 1, &mut wc) };
        if n < 0 {
            return Err(verbs_error(self.ctx.name(), "ibv_poll_cq", n));
        }
        if n == 0 {
            return Ok(None);
        }
        Ok(Some(Completion {
            wr_id: wc.wr_id,
            status: wc.status,
            opcode: wc.opcode,
            byte_len: wc.byte_len,
            // SAFETY: both union members are a u32.
            imm: u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data }),
            vendor_err: wc.vendor_err,
        }))
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_cq, destroyed once after its QPs (which hold an Arc).
        unsafe { ibv_destroy_cq(self.cq.as_ptr()) };
    }
}

/// Reliable or unreliable connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QpKind {
    /// UC: no acknowledgements, no retransmission (the NVQLink choice: a lost request is
    /// answered by the QPU's own timeout).
    #[default]
    Uc,
    Rc,
}

/// A connected queue pair.
pub struct Qp {
    qp: NonNull<ibv_qp>,
    kind: QpKind,
    pd: Arc<Pd>,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
}

// SAFETY: verbs objects may be used from any thread; one owner posts.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

fn zeroed_attr() -> ibv_qp_attr {
    // SAFETY: ibv_qp_attr is plain data; all-zero is valid.
    unsafe { std::mem::zeroed() }
}

impl Qp {
    pub fn new(
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        kind: QpKind,
        max_send: u32,
        max_recv: u32,
        max_inline: u32,
    ) -> Result<Qp> {
        // SAFETY: plain data.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = send_cq.as_raw();
        init.recv_cq = recv_cq.as_raw();
        init.cap.max_send_wr = max_send;
        init.cap.max_recv_wr = max_recv;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.cap.max_inline_data = max_inline;
        init.qp_type = match kind {
            QpKind::Uc => ibv_qp_type::IBV_QPT_UC,
            QpKind::Rc => ibv_qp_type::IBV_QPT_RC,
        };
        init.sq_sig_all = 0;
        // SAFETY: a live PD and CQs; `init` is valid for the call.
        let qp = unsafe { ibv_create_qp(pd.as_raw(), &mut init) };
        let qp = NonNull::new(qp)
            .ok_or_else(|| verbs_error(pd.context().name(), "ibv_create_qp", -1))?;
        Ok(Qp {
            qp,
            kind,
            pd: pd.clone(),
            _send_cq: send_cq.clone(),
            _recv_cq: recv_cq.clone(),
        })
    }

    pub fn as_raw(&self) -> *mut ibv_qp {
        self.qp.as_ptr()
    }

    pub fn kind(&self) -> QpKind {
        self.kind
    }

    pub fn qpn(&self) -> u32 {
        // SAFETY: a live QP.
        unsafe { self.qp.as_ref().qp_num }
    }

    fn device(&self) -> &str {
        self.pd.context().name()
    }

    fn modify(
        &self,
        attr: &mut ibv_qp_attr,
        mask: ibv_qp_attr_mask,
        op: &'static str,
    ) -> Result<()> {
        // SAFETY: a live QP and a valid attribute block for the mask.
        let ret = unsafe { ibv_modify_qp(self.as_raw(), attr, mask.0 as c_int) };
        check(self.device(), op, ret)
    }

    /// RESET -> INIT -> RTR -> RTS, connected to `remote` through `port` / `gid_index`.
    pub fn connect(
        &self,
        port: u8,
        gid_index: u8,
        local_psn: u32,
        remote: &Endpoint,
    ) -> Result<()> {
        self.init(port)?;
        self.ready(port, gid_index, local_psn, remote)
    }

    /// RESET -> INIT on `port`, remote writes allowed (receives may be posted from here).
    pub fn init(&self, port: u8) -> Result<()> {
        use ibv_qp_attr_mask as m;
        let mut a = zeroed_attr();
        a.qp_state = ibv_qp_state::IBV_QPS_INIT;
        a.port_num = port;
        a.pkey_index = 0;
        a.qp_access_flags = ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
            | ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
        self.modify(
            &mut a,
            m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS,
            "ibv_modify_qp(INIT)",
        )
    }

    /// INIT -> RTR -> RTS, connected to `remote` through `port` / `gid_index`.
    pub fn ready(&self, port: u8, gid_index: u8, local_psn: u32, remote: &Endpoint) -> Result<()> {
        use ibv_qp_attr_mask as m;
        let mut a = zeroed_attr();
        a.qp_state = ibv_qp_state::IBV_QPS_RTR;
        a.path_mtu = remote.mtu.clamp(1, 5) as u32;
        a.dest_qp_num = remote.qpn;
        a.rq_psn = remote.psn & 0x00ff_ffff;
        a.ah_attr.is_global = 1;
        a.ah_attr.dlid = remote.lid;
        a.ah_attr.port_num = port;
        a.ah_attr.grh.dgid.raw = remote.gid;
        a.ah_attr.grh.sgid_index = gid_index;
        a.ah_attr.grh.hop_limit = 64;
        let mut mask = m::IBV_QP_STATE
            | m::IBV_QP_AV
            | m::IBV_QP_PATH_MTU
            | m::IBV_QP_DEST_QPN
            | m::IBV_QP_RQ_PSN;
        if self.kind == QpKind::Rc {
            a.max_dest_rd_atomic = 1;
            a.min_rnr_timer = 1;
            mask = mask | m::IBV_QP_MAX_DEST_RD_ATOMIC | m::IBV_QP_MIN_RNR_TIMER;
        }
        self.modify(&mut a, mask, "ibv_modify_qp(RTR)")?;

        let mut a = zeroed_attr();
        a.qp_state = ibv_qp_state::IBV_QPS_RTS;
        a.sq_psn = local_psn & 0x00ff_ffff;
        let mut mask = m::IBV_QP_STATE | m::IBV_QP_SQ_PSN;
        if self.kind == QpKind::Rc {
            a.timeout = 14;
            a.retry_cnt = 7;
            a.rnr_retry = 7;
            a.max_rd_atomic = 1;
            mask = mask
                | m::IBV_QP_TIMEOUT
                | m::IBV_QP_RETRY_CNT
                | m::IBV_QP_RNR_RETRY
                | m::IBV_QP_MAX_QP_RD_ATOMIC;
        }
        self.modify(&mut a, mask, "ibv_modify_qp(RTS)")
    }

    /// Posts a receive WQE for `len` bytes at `addr` (`len` 0: a receive that only a
    /// WRITE-with-imm consumes).
    ///
    /// # Safety
    /// `addr..addr+len` must stay registered under `lkey` and valid until the
    /// completion is reaped; nothing else may write it meanwhile.
    pub unsafe fn post_recv(&self, wr_id: u64, addr: u64, len: u32, lkey: u32) -> Result<()> {
        let mut sge = ibv_sge {
            addr,
            length: len,
            lkey,
        };
        let mut wr = ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: if len == 0 { ptr::null_mut() } else { &mut sge },
            num_sge: (len != 0) as c_int,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: a live QP; `wr`/`sge` live for the call; the caller keeps the buffer.
        let ret = unsafe { ibv_post_recv(self.as_raw(), &mut wr, &mut bad) };
        check(self.device(), "ibv_post_recv", ret)
    }

    /// Posts a SEND of `bytes`: inline when `inline` (the bytes are copied at once), else
    /// gathered from `addr`/`lkey` by the NIC later.
    ///
    /// # Safety
    /// Without `inline`, `addr..addr+len` must stay registered and unchanged until the
    /// completion (or a later signaled one) is reaped.
    pub unsafe fn post_send(
        &self,
        wr_id: u64,
        addr: u64,
        len: u32,
        lkey: u32,
        inline: bool,
        signaled: bool,
    ) -> Result<()> {
        let mut sge = ibv_sge {
            addr,
            length: len,
            lkey,
        };
        // SAFETY: plain data.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = ibv_wr_opcode::IBV_WR_SEND;
        wr.send_flags = (if inline {
            ibv_send_flags::IBV_SEND_INLINE.0
        } else {
            0
        }) | (if signaled {
            ibv_send_flags::IBV_SEND_SIGNALED.0
        } else {
            0
        });
        let mut bad = ptr::null_mut();
        // SAFETY: a live QP; `wr`/`sge` live for the call; the caller keeps the buffer.
        let ret = unsafe { ibv_post_send(self.as_raw(), &mut wr, &mut bad) };
        check(self.device(), "ibv_post_send(SEND)", ret)
    }

    /// Posts an RDMA WRITE with immediate `imm` of `len` bytes from `addr` to
    /// `raddr`/`rkey` (the QPU side's request).
    ///
    /// # Safety
    /// As [`post_send`](Self::post_send) without inline.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn post_write_imm(
        &self,
        wr_id: u64,
        addr: u64,
        len: u32,
        lkey: u32,
        raddr: u64,
        rkey: u32,
        imm: u32,
        signaled: bool,
    ) -> Result<()> {
        let mut sge = ibv_sge {
            addr,
            length: len,
            lkey,
        };
        // SAFETY: plain data.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.send_flags = if signaled {
            ibv_send_flags::IBV_SEND_SIGNALED.0
        } else {
            0
        };
        wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
        wr.wr.rdma = rdma_t {
            remote_addr: raddr,
            rkey,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: a live QP; `wr`/`sge` live for the call; the caller keeps the buffer.
        let ret = unsafe { ibv_post_send(self.as_raw(), &mut wr, &mut bad) };
        check(self.device(), "ibv_post_send(WRITE_WITH_IMM)", ret)
    }
}

impl Qp {
    /// The mlx5 direct-access view of this QP's send side and `send_cq` (for a GPU or host
    /// poster that rings the doorbell itself). Fails on a non-mlx5 device.
    pub fn mlx5_direct(&self, send_cq: &Cq) -> Result<crate::mlx5::dv::Mlx5Direct> {
        // SAFETY: both objects are live for the call.
        match unsafe { crate::mlx5::dv::init_obj(self.as_raw(), send_cq.as_raw()) } {
            Ok((qp, cq)) => Ok(crate::mlx5::dv::Mlx5Direct::new(self.qpn(), &qp, &cq)),
            Err(ret) => Err(Error::Mlx5Dv {
                device: self.device().to_string(),
                op: "mlx5dv_init_obj",
                detail: format!(
                    "returned {ret} ({}): not an mlx5 device?",
                    std::io::Error::from_raw_os_error(ret.abs())
                ),
            }),
        }
    }
}

impl Qp {
    /// The whole QP as mlx5 direct verbs describe it (both work queues, doorbell record,
    /// BlueFlame register), and its CQs: for a device side that owns the queue set.
    pub fn mlx5_queues(
        &self,
        send_cq: &Cq,
        recv_cq: &Cq,
    ) -> Result<(
        crate::mlx5::dv::QpView,
        crate::mlx5::dv::CqView,
        crate::mlx5::dv::CqView,
    )> {
        let fail = |ret: c_int| Error::Mlx5Dv {
            device: self.device().to_string(),
            op: "mlx5dv_init_obj",
            detail: format!(
                "returned {ret} ({}): not an mlx5 device?",
                std::io::Error::from_raw_os_error(ret.abs())
            ),
        };
        // SAFETY: all three objects are live for the calls.
        let (qp, send) =
            unsafe { crate::mlx5::dv::init_obj(self.as_raw(), send_cq.as_raw()) }.map_err(fail)?;
        // SAFETY: as above.
        let recv = unsafe { crate::mlx5::dv::init_cq(recv_cq.as_raw()) }.map_err(fail)?;
        Ok((
            crate::mlx5::dv::QpView::new(self.qpn(), &qp),
            crate::mlx5::dv::CqView::new(&send),
            crate::mlx5::dv::CqView::new(&recv),
        ))
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp, destroyed once.
        unsafe { ibv_destroy_qp(self.qp.as_ptr()) };
    }
}
