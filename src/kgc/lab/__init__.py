"""Labs: real components (QEMU node images, containerd, a Kubernetes control plane) that the
self-tests and `kgc lab` use. Labs live beside the product; the product never imports them.

Each lab module exposes ``register(subparsers)`` adding its ``kgc lab <name>`` commands, and
may expose ``SCENARIOS: dict[str, Callable[[argparse.Namespace], int]]`` for
``kgc lab run --scenario NAME``.
"""

LAB_MODULES = ("kgc.lab.node", "kgc.lab.containerd", "kgc.lab.cluster", "kgc.lab.certify")
