"""Findings of groups (see __init__.py)."""

CHECKS = ()
