"""Messages as length-prefixed frames over the engine's socket: `send_bytes` and `recv_bytes`.

The frames are multiprocessing.connection's own (a signed 32-bit big-endian length, or -1 and a
64-bit one for a frame of 2 GiB or more, then the bytes), so either end could be that class; this
one imports only `os` and `struct`. multiprocessing.connection brought multiprocessing's context,
reduction, tempfile, bz2 and lzma with it: ~7 ms of the engine's start and of the front end's on the
2-core machine, where the engine's start is a NumPy run's critical path. Reads and
writes are plain `os.read`/`os.write` on the descriptor, as there; an interrupted call is retried
by Python itself (PEP 475). One thread reads, and writers hold their own lock (client and server).
"""

from __future__ import annotations

import os
import struct

_SHORT = struct.Struct("!i")
_LONG = struct.Struct("!Q")
_SHORT_MAX = 0x7FFFFFFF
# A frame's header and its bytes go in one write up to this size (one packet for a small message);
# a larger one is written after its header rather than copied behind it.
_JOIN_MAX = 16384
_READ_CHUNK = 1 << 20


class FrameConnection:
    """One end of the engine's socket pair, owning the descriptor `fd` (closed by `close`)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def fileno(self) -> int:
        return self._checked()

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def send_bytes(self, data: bytes) -> None:
        fd = self._checked()
        n = len(data)
        header = _SHORT.pack(n) if n <= _SHORT_MAX else _SHORT.pack(-1) + _LONG.pack(n)
        if n <= _JOIN_MAX:
            _write_all(fd, header + data)
        else:
            _write_all(fd, header)
            _write_all(fd, data)

    def recv_bytes(self) -> bytes:
        """The next frame's bytes. EOFError at the end of the stream (the other end closed, or
        this end was shut down to wake the reader); OSError as the descriptor raises it."""
        fd = self._checked()
        (n,) = _SHORT.unpack(_read_exactly(fd, _SHORT.size, at_start=True))
        if n == -1:
            (n,) = _LONG.unpack(_read_exactly(fd, _LONG.size))
        elif n < 0:
            raise OSError(f"bad frame length {n}")
        return _read_exactly(fd, n)

    def _checked(self) -> int:
        if self._fd is None:
            raise OSError("handle is closed")
        return self._fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, n: int, at_start: bool = False) -> bytes:
    chunks: list[bytes] = []
    left = n
    while left:
        chunk = os.read(fd, min(left, _READ_CHUNK))
        if not chunk:
            if at_start and left == n:
                raise EOFError
            raise EOFError("got end of file during message")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]
