"""Packaging: the library under src/, plus the repository's top-level conformance/ and
profiles/ folders shipped inside it as ``kgc.conformance`` and ``kgc.profiles`` (the design
card keeps them at the top of the repository; a node needs them after `pip install`)."""

from setuptools import find_namespace_packages, find_packages, setup

packages = find_namespace_packages("src", include=["kgc", "kgc.*"], exclude=["*.__pycache__"])
packages += ["kgc.conformance", *(f"kgc.conformance.{p}" for p in find_packages("conformance"))]
packages += ["kgc.profiles"]

setup(
    packages=packages,
    package_dir={"": "src", "kgc.conformance": "conformance", "kgc.profiles": "profiles"},
    package_data={"kgc": ["**/*.sh", "**/*.json", "**/*.yaml", "**/*.proto", "**/*.toml"],
                  "kgc.profiles": ["*.yaml"]},
)
