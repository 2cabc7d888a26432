# The two commands the README opens with. Both install what they need first.
.PHONY: certify test bootstrap lint types

PYTEST_ARGS ?=

bootstrap:
	bash scripts/bootstrap.sh

# Main job: certify the built-in lab and write the HTML report (reports/html/index.html).
certify: bootstrap
	.venv/bin/kgc lab certify

# Self-tests: two pytest sessions side by side (the TCG-guest suites and the rest; see
# scripts/run-tests.sh). pytest exits 5 when nothing ran: that fails here like any other
# non-zero exit. KGC_TEST_SERIAL=1 runs one session.
test: bootstrap
	bash scripts/run-tests.sh $(PYTEST_ARGS)

lint: bootstrap
	.venv/bin/ruff check src lab tests conformance benchmarks

types: bootstrap
	.venv/bin/mypy
