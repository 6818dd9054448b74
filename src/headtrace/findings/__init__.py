"""Cross-revision findings (paper B): the trajectory table, F1-F5, the layer spread, the onset
spread; ``compute.all_findings`` builds them all."""
