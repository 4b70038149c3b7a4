"""Kafka wire-protocol dissector."""
