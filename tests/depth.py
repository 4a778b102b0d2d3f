"""How deep the suite digs: quick for the person who runs it, thorough for CI.

``python -m pytest`` is the quick run: every test, with the property tests drawing a quarter of
their examples, the crash tests killing at each commit point once rather than at each of its
occurrences, and the benchmark quick-run check left to CI. ``AGENTMAIL_TESTS=thorough`` (what
``.ci/run`` sets) runs them all at full depth: the same tests, the same code reached, more cases.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck

THOROUGH = os.environ.get("AGENTMAIL_TESTS", "") == "thorough"
QUICK_SHARE = 4  # the quick run draws 1 in 4 of a property test's examples


def examples(thorough: int) -> int:
    """A property test's ``max_examples``: ``thorough`` under CI, a quarter (at least 10) else."""
    return thorough if THOROUGH else max(10, thorough // QUICK_SHARE)


# Health checks that measure the machine, not the code: on a loaded 2-core machine a slow draw
# says nothing about agentmail. The suite's profile (tests/conftest.py) suppresses them, with no
# deadline; a test that suppresses more goes through ``suppressed`` so it never drops these
# (a per-test list replaces the profile's: tests/system/test_lint.py holds every test to it).
LOAD_CHECKS = (HealthCheck.too_slow,)


def suppressed(*checks: HealthCheck) -> list[HealthCheck]:
    """A test's ``suppress_health_check``: its own ``checks`` and always the load checks."""
    return [*LOAD_CHECKS, *(check for check in checks if check not in LOAD_CHECKS)]
