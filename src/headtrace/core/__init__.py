"""Shared foundations: Parquet tables and their schemas, atomic writes, heads, revision names, the probe."""
