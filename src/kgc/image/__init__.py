"""Certifying a node image file before it ships: `kgc image check` (read-only, user space)."""
