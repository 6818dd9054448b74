"""Reporting: figures, the findings summary and the console lines."""
