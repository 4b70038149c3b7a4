"""Findings of connections (see __init__.py)."""

CHECKS = ()
