"""Node lab suites (a package, so that its conftest does not shadow lab/tests/conftest.py
for the suites beside it in one session)."""
