//! The few Linux calls that std and socket2 do not wrap, as safe functions returning
//! `io::Result`: a datagram receive that also returns the kernel's receive timestamp and
//! the socket's drop counter (`recvmsg` with `SO_TIMESTAMPNS` and `SO_RXQ_OVFL` control
//! messages), the socket's drop counter on demand (`SO_MEMINFO`), and the parent-death
//! signal (`prctl(PR_SET_PDEATHSIG)`).
//!
//! This is the only place where the transports and the process code call libc directly;
//! every `unsafe` block states why it is sound.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd};

/// What the kernel said about one received datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes copied into the buffer.
    pub len: usize,
    pub peer: SocketAddr,
    /// When the datagram reached the host, ns of `CLOCK_REALTIME` (`SO_TIMESTAMPNS`).
    pub arrival_ns: Option<u64>,
    /// The socket's drop counter when the datagram was queued (`SO_RXQ_OVFL`).
    pub drops: Option<u32>,
}

fn set_int_option(fd: BorrowedFd<'_>, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` is a live c_int and the length passed is its size; the kernel only
    // reads it. `fd` is a valid descriptor for the borrow's lifetime.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks the kernel to attach a receive timestamp and the drop counter to every datagram
/// `fd` receives (see [`recv_with_meta`]).
pub fn enable_receive_meta(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)
}

/// Control-message room for a timestamp and a drop counter, 8-byte aligned as `cmsghdr`
/// needs.
const CONTROL_WORDS: usize = 16;

/// Receives one datagram without blocking into `buf` (`MSG_DONTWAIT`); `WouldBlock` when
/// none waits. Returns the kernel's receive timestamp and drop counter when
/// [`enable_receive_meta`] asked for them.
pub fn recv_with_meta(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
    let mut addr = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut control = [0u64; CONTROL_WORDS];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is a valid value (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = addr.as_mut_ptr().cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; CONTROL_WORDS]>() as _;
    // SAFETY: every pointer in `msg` points to memory that lives across the call and has
    // the length given beside it (`buf`, `addr`, `control`); the kernel writes at most
    // those lengths.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `msg_namelen` bytes of the zero-initialised storage; a
    // sockaddr_storage of that length is what `SockAddr::new` takes.
    let peer = unsafe { socket2::SockAddr::new(addr.assume_init(), msg.msg_namelen) }
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an IP peer"))?;
    let (arrival_ns, drops) = control_messages(&msg);
    Ok(Received {
        len: n as usize,
        peer,
        arrival_ns,
        drops,
    })
}

/// The receive timestamp and drop counter among the control messages `recvmsg` left in
/// `msg`.
fn control_messages(msg: &libc::msghdr) -> (Option<u64>, Option<u32>) {
    let mut arrival = None;
    let mut drops = None;
    // SAFETY: `msg` was filled by a successful recvmsg: its control pointer and (updated)
    // length describe the control buffer, which the CMSG_* macros walk within bounds.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !c.is_null() {
        // SAFETY: `c` is a non-null header inside the control buffer (CMSG_FIRSTHDR /
        // CMSG_NXTHDR never return one past its end).
        let (level, kind) = unsafe { ((*c).cmsg_level, (*c).cmsg_type) };
        // SAFETY: as above; CMSG_DATA points inside the same message.
        let data = unsafe { libc::CMSG_DATA(c) };
        if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
            // SAFETY: an SCM_TIMESTAMPNS message carries one `timespec`; the data may be
            // unaligned for it, hence read_unaligned.
            let ts = unsafe { std::ptr::read_unaligned(data.cast::<libc::timespec>()) };
            if ts.tv_sec >= 0 && ts.tv_nsec >= 0 {
                arrival = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
        } else if level == libc::SOL_SOCKET && kind == libc::SO_RXQ_OVFL {
            // SAFETY: an SO_RXQ_OVFL message carries one u32.
            drops = Some(unsafe { std::ptr::read_unaligned(data.cast::<u32>()) });
        }
        // SAFETY: `msg` and `c` are as above.
        c = unsafe { libc::CMSG_NXTHDR(msg, c) };
    }
    (arrival, drops)
}

/// The socket's drop counter now (`SO_MEMINFO`'s `SK_MEMINFO_DROPS`): datagrams the
/// kernel dropped at this socket, its receive buffer full.
pub fn socket_drops(fd: BorrowedFd<'_>) -> io::Result<u32> {
    // Room for more than the kernel's SK_MEMINFO_VARS (9 today); it writes what it has.
    let mut info = [0u32; 16];
    let mut len = size_of::<[u32; 16]>() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes and `len` is a live socklen_t; the kernel
    // writes at most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let at = libc::SK_MEMINFO_DROPS as usize;
    if (len as usize) < (at + 1) * size_of::<u32>() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "SO_MEMINFO without a drop counter (kernel older than 4.6)",
        ));
    }
    Ok(info[at])
}

/// Asks the kernel to send `signal` to this process when the thread that started it
/// exits (`prctl(PR_SET_PDEATHSIG)`).
pub fn set_parent_death_signal(signal: i32) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes the signal number as its one argument; the rest are
    // ignored. No memory is passed.
    let rc = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn a_datagram_comes_with_its_arrival_time_and_the_drop_counter() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_receive_meta(rx.as_fd()).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        tx.send_to(b"hello", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let got = loop {
            match recv_with_meta(rx.as_fd(), &mut buf) {
                Ok(r) => break r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(std::time::Instant::now() < deadline);
                    std::thread::yield_now();
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(&buf[..got.len], b"hello");
        assert_eq!(got.peer, tx.local_addr().unwrap());
        let at = got.arrival_ns.expect("a kernel timestamp");
        // The realtime clock may step, but not by seconds during a test.
        assert!(at + 1_000_000_000 > before && at < before + 5_000_000_000);
        // The kernel attaches the counter only once it is above zero.
        assert_eq!(got.drops, None);
        assert_eq!(socket_drops(rx.as_fd()).unwrap(), 0);
        assert_eq!(
            recv_with_meta(rx.as_fd(), &mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
    }
}
