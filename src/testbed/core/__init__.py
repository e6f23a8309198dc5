"""Foundations with no dependencies: the exception tree, clocks, ids and secrets."""
