# The two commands the README opens with. Both install what they need first.
.PHONY: certify check test venv bootstrap lint types

PYTEST_ARGS ?=

bootstrap:
	bash scripts/bootstrap.sh

# Main job: certify the built-in lab and write the HTML report (reports/html/index.html).
certify: bootstrap
	.venv/bin/kgc lab certify

# The Python venv alone (.venv with the test extra): all `make check` needs.
venv:
	bash scripts/venv.sh

# The product tier: tests/ without the lab-marked tests, lab tools hidden, no root, no
# network, 2 xdist workers (≤ 5 min on 2 cores); needs no `make bootstrap`.
check: venv
	bash scripts/run-tests.sh check $(PYTEST_ARGS)

# Self-tests, all of them (the README's test command, CI): check, then the lab tier in two
# pytest sessions side by side (the TCG-guest suites and the rest; see
# scripts/run-tests.sh). pytest exits 5 when nothing ran: that fails here like any other
# non-zero exit. KGC_TEST_SERIAL=1 runs the lab tier as one session.
test: bootstrap
	bash scripts/run-tests.sh all $(PYTEST_ARGS)

lint: bootstrap
	.venv/bin/ruff check src lab tests conformance benchmarks

types: bootstrap
	.venv/bin/mypy
