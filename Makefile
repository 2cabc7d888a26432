# The two commands the README opens with. Both install what they need first.
.PHONY: certify test bootstrap lint types

PYTEST_ARGS ?=

bootstrap:
	bash scripts/bootstrap.sh

# Main job: certify the built-in lab and write the HTML report (reports/html/index.html).
certify: bootstrap
	.venv/bin/kgc lab certify

# Self-tests. pytest exits 5 when nothing ran: that fails here like any other non-zero exit.
test: bootstrap
	.venv/bin/pytest tests -p no:cacheprovider -q -rfEs --durations=15 $(PYTEST_ARGS)

lint: bootstrap
	.venv/bin/ruff check src tests conformance benchmarks

types: bootstrap
	.venv/bin/mypy
