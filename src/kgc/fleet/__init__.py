"""The node layers as an in-cluster fleet: a container image runs ``kgc node-run`` on every
selected node (a DaemonSet, or a Sonobuoy DaemonSet plugin) against the node paths the
node layers read, mounted read-only under ``/host``; ``kgc fleet collect`` reads each pod's
verdict from its log and merges them into one report, in which a node whose pod did not
finish, or whose verdict is not that node's by its identity, is an ``error`` with the
reason — never missing, never a pass.

Modules: ``protocol`` (the log markers and their total parser), ``manifests`` (pure
builders of the DaemonSet, its namespace and ServiceAccount, and the Sonobuoy plugin),
``noderun`` (the image's entry point), ``collect`` (gather and merge), ``cli``.
"""
