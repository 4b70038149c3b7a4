"""Findings of transactions (see __init__.py)."""

CHECKS = ()
