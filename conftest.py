"""Repository-level pytest configuration.

The kgc plugin is registered through the `pytest11` entry point in pyproject.toml, so
`pytest -m host` works wherever the package is installed (the suites and profiles ship in
the wheel). Nothing here is needed for a conformance run; the self-tests' fixtures live in
tests/conftest.py.
"""
