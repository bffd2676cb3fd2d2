"""Loaders and scorers for real benchmark files in their official formats."""
