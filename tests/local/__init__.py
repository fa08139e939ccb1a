"""Tier 2: real local processes."""
