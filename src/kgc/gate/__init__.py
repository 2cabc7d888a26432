"""Release gating: the verdict policy, `kgc gate`, `kgc diff` and Allure quality gates."""
