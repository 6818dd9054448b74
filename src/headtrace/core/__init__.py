"""Shared foundations: Parquet tables and their schemas, atomic writes, heads, revision names, the screen's classes."""
