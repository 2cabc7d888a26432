"""Cluster lab smoke suite (a package so its conftest does not shadow tests/conftest.py)."""
