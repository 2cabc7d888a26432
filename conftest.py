"""Repository-level pytest configuration.

The kgc plugin itself is registered through the `pytest11` entry point in pyproject.toml,
so `pytest -m host` works wherever the package is installed. Here: only what the repo's own
layout needs.
"""

import os

# Reports of a run from the repository go to the repository's reports/ folder, wherever
# pytest is started from.
os.environ.setdefault("KGC_REPORT_DIR", os.path.join(os.path.dirname(__file__), "reports"))
