"""The screen's six attention classes (paper A's screen, in its order) and the label of a head in none:
the one vocabulary the probe's key positions, the screen, the cell tables' columns and the published
panel's importer read."""
from __future__ import annotations

CLASSES = ("induction", "duplicate-token", "previous-token", "first-token", "self", "local")
UNCLASSIFIED = "unclassified"
