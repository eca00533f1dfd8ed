"""A small client of the appliance's wire protocol (CUDA-Q Realtime RPC over UDP).

Request (24-byte header, little-endian): ``u32 magic "CUQR" | u32 function_id | u32
arg_len | u32 request_id | u64 ptp_timestamp``, then the argument. Response: ``u32 magic
"CUQS" | i32 status | u32 result_len | u32 request_id | u64 ptp_timestamp``, then the
result. ``function_id`` is the 32-bit FNV-1a of the handler's name (``decode`` by
default for ``qfwd run --decoder``). One request in flight per call; an answer to an
earlier request (a late one) is skipped. docs/protocol.md has the statuses.
"""

from __future__ import annotations

import enum
import os
import socket
import struct
import time
from dataclasses import dataclass
from typing import Union

REQUEST_MAGIC = 0x43555152
RESPONSE_MAGIC = 0x43555153
HEADER = struct.Struct("<IIIIQ")
RESPONSE_HEADER = struct.Struct("<IiIIQ")
MAX_DATAGRAM = 65507


class Status(enum.IntEnum):
    """Response statuses (src/wire.rs ``status``): 0 success, > 0 the handler's own error,
    < 0 a protocol error."""

    OK = 0
    BAD_ARGUMENT = 1
    OVER_BUDGET = 2
    LENGTH_MISMATCH = -3
    UNKNOWN_FUNCTION = -4
    OVERSIZED = -5
    OVERLOAD = -6
    DECODER_TIMEOUT = -7
    SHUTTING_DOWN = -8


def function_id(name: str) -> int:
    """The 32-bit FNV-1a of ``name``: the function_id that selects a handler."""
    h = 0x811C9DC5
    for b in name.encode("utf-8"):
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


@dataclass(frozen=True)
class Response:
    status: int
    result: bytes
    request_id: int
    round_trip_ns: int

    @property
    def ok(self) -> bool:
        return self.status == Status.OK


class Client:
    """``Client(host, port)``: sends requests to a ``qfwd run`` over UDP and waits for each
    answer (``timeout`` seconds, then ``TimeoutError``)."""

    def __init__(self, host: str, port: int, *, timeout: float = 1.0):
        self.address = (host, port)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._sock.settimeout(timeout)
        self._timeout = timeout
        self._next_id = int.from_bytes(os.urandom(4), "little")

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, function: Union[str, int], payload: bytes = b"") -> Response:
        """Sends one request and returns its response (whatever its status)."""
        fid = function_id(function) if isinstance(function, str) else int(function)
        payload = bytes(payload)
        if HEADER.size + len(payload) > MAX_DATAGRAM:
            raise ValueError(
                f"a request of {len(payload)} bytes does not fit one datagram "
                f"({MAX_DATAGRAM - HEADER.size} at most)"
            )
        rid = self._next_id
        self._next_id = (self._next_id + 1) & 0xFFFFFFFF
        datagram = HEADER.pack(REQUEST_MAGIC, fid, len(payload), rid, 0) + payload
        start = time.perf_counter_ns()
        deadline = time.monotonic() + self._timeout
        self._sock.sendto(datagram, self.address)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer from {self.address} within {self._timeout} s")
            self._sock.settimeout(left)
            try:
                data, _ = self._sock.recvfrom(MAX_DATAGRAM)
            except socket.timeout as e:
                raise TimeoutError(
                    f"no answer from {self.address} within {self._timeout} s"
                ) from e
            if len(data) < RESPONSE_HEADER.size:
                continue
            magic, status, result_len, got_id, _ = RESPONSE_HEADER.unpack_from(data)
            if magic != RESPONSE_MAGIC or got_id != rid:
                continue  # not ours, or an earlier request's late answer
            result = data[RESPONSE_HEADER.size:]
            if len(result) != result_len:
                raise ValueError(
                    f"response declares {result_len} result bytes but {len(result)} follow"
                )
            return Response(status, result, rid, time.perf_counter_ns() - start)

    def decode(self, function: Union[str, int], payload: bytes) -> Response:
        """Sends a decoder request (``payload``: ``Decoder.payload(syndrome)``) to the handler
        ``function`` (a name or a function_id) and returns the response; its ``result`` is
        the bit-packed observable flips when ``ok``."""
        return self.request(function, payload)
