"""kata-gpu-conformance: certify Kata Containers + VFIO GPU passthrough nodes and clusters."""

__version__ = "0.1.0"
