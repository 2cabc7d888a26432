"""One guest connection -> one host loopback connection (QEMU ``guestfwd=...-cmd:``).

QEMU's user-mode network (libslirp) runs this once per TCP connection the guest opens to a
``guestfwd`` address, with the guest's end of the connection as a socket on
stdin/stdout/stderr; it copies bytes both ways to ``127.0.0.1:PORT`` until both sides are
done. With ``restrict=on`` these forwards are the guest's only way out, and they lead only
to the host's loopback.

Run as a plain file (``python3 -I relay.py PORT``): it imports nothing from kgc, so a
connection costs one interpreter start, not the package's imports. Nothing is ever
written to stderr: that is the guest's connection too.
"""

from __future__ import annotations

import selectors
import socket
import sys


def relay(guest: socket.socket, port: int, host: str = "127.0.0.1") -> int:
    """Copy ``guest`` <-> ``host:port`` until both directions are closed."""
    try:
        up = socket.create_connection((host, port), timeout=10)
    except OSError:
        return 1
    up.settimeout(None)
    guest.settimeout(None)
    peer = {guest: up, up: guest}
    sel = selectors.DefaultSelector()
    for s in peer:
        sel.register(s, selectors.EVENT_READ)
    open_reads = 2
    while open_reads:
        for key, _ in sel.select():
            src: socket.socket = key.fileobj  # type: ignore[assignment]
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if data:
                try:
                    peer[src].sendall(data)
                    continue
                except OSError:
                    open_reads = 0  # the other side is gone
                    break
            sel.unregister(src)
            open_reads -= 1
            try:
                peer[src].shutdown(socket.SHUT_WR)
            except OSError:
                open_reads = 0
                break
    up.close()
    guest.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        return 2
    return relay(socket.socket(fileno=0), int(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
