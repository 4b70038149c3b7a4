"""One HTML page about a capture: its findings, then the investigation notebooks run on it."""
