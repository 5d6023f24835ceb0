"""Session-wide test settings.

The estimate date (EKS version support status, control-plane rate, which versions EKS offers)
is pinned for every in-process call and every subprocess the tests start, so no test changes
with the calendar: 2026-12-01, the EKS catalogue's date (stacks.eks_versions.CATALOGUE_DATE).
Tests that need another day pass `--as-of` / `on=` explicitly.
"""

from __future__ import annotations

import os

from stacks.eks_versions import AS_OF_ENV, CATALOGUE_DATE

os.environ[AS_OF_ENV] = CATALOGUE_DATE.isoformat()
