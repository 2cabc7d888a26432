"""Labs: real components (QEMU node images, containerd, a Kubernetes control plane) that the
self-tests and ``kgc lab`` use. Labs live beside the product; the product never imports them.

One entry: ``kgc_lab.cli:main(argv)`` (``kgc lab ...``). Shared by every lab: ``common``
(``LabError``, ``free_port``, the cache ``${KGC_CACHE:-~/.cache/kgc}``), ``supervise``
(starting and stopping processes), ``ledger`` (the record of what each lab started) and
``cleanup`` (``kgc lab cleanup``), ``scenarios`` (the registry behind
``kgc lab run --scenario``). Each lab module exposes ``register(subparsers)`` adding its
``kgc lab <name>`` commands.
"""

# Modules with a ``register(subparsers)`` adding their ``kgc lab <name>`` commands.
LAB_MODULES = ("kgc_lab.node", "kgc_lab.containerd", "kgc_lab.cluster", "kgc_lab.certify")
