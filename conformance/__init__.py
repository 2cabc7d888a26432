"""The conformance suites, one folder per layer (shipped in the wheel as kgc.conformance)."""
