"""Self-tests of kgc.kube that need no cluster (the cluster lab ones are in lab/tests/cluster)."""
