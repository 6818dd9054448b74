"""Running jobs: the workflow lock check and per-job logs."""
