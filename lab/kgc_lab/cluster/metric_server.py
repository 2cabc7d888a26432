"""Loopback metric endpoint for the cluster lab (KEDA ``metrics-api`` trigger target): the
product's own trigger endpoint (:mod:`kgc.layers.keda.endpoint_server`, what a real run
deploys in its namespace), bound to 127.0.0.1 on a free port.

    GET  /metric            -> {"value": <number>, "updated": <unix time>, "sets": <n>}
    PUT  /metric {"value": N}  sets the value (POST is accepted too)

Writes the port to ``--port-file`` once listening.
Run as ``python -m kgc_lab.cluster.metric_server --port-file FILE [--value N]``.
"""

from __future__ import annotations

import argparse
import signal
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from kgc.layers.keda.endpoint_server import State, handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kgc-lab-metric-server")
    ap.add_argument("--port-file", required=True, type=Path)
    ap.add_argument("--value", type=float, default=0.0)
    args = ap.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(State(args.value)))
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.rename(args.port_file)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
