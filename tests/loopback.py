"""Run a command in a network namespace of its own, with only the loopback interface up.

    python tests/loopback.py python -m pytest tests

Inside, the only address is 127.0.0.1: a local Ray cluster binds it everywhere (outside,
Ray rewrites 127.0.0.1 to the machine's interface address), and no test can send traffic
anywhere else. Needs root (CAP_SYS_ADMIN) or, failing that, the ``unshare`` command with
unprivileged user namespaces.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import socket
import struct
import sys

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
IFF_UP = 0x1


def isolated() -> bool:
    """Whether this process's network namespace has the loopback interface only."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) == 0:
        loopback_up()
        os.execvp(argv[0], argv)
    unshare = shutil.which("unshare")
    if unshare is None:
        error = os.strerror(ctypes.get_errno())
        print(f"loopback.py: cannot make a network namespace ({error})", file=sys.stderr)
        return 1
    # not root: a user namespace as well, then bring loopback up from inside
    here = os.path.abspath(__file__)
    inner = [sys.executable, here, "--up-then", *argv]
    os.execv(unshare, [unshare, "--user", "--map-root-user", "--net", *inner])
    return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--up-then"]:
        loopback_up()
        os.execvp(sys.argv[2], sys.argv[2:])
    sys.exit(main(sys.argv[1:]))
