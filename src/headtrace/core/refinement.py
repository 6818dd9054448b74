"""Adaptive refinement's vocabulary (docs/refinement.md): what a round did for a milestone, and the reasons
the ``f3_onsets`` table's ``stop`` column gives for where a bracket stopped. ``headtrace.panel.refine``
writes them; ``headtrace.report.refinement`` words them."""
from __future__ import annotations

ADDED = "added"
TARGET_MET = "target met"
EXHAUSTED = "no candidate revisions left in the bracket"
NEVER = "never reached"
AT_FIRST = "reached at the first revision"
MAX_ROUNDS = "max_rounds reached"
OFF = "refinement off"
NO_POOL = "reference panel: published revisions only, no candidate pool"
