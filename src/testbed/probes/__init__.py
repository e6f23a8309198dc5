"""Probes: correctness, load, ab and scale. Each runs against endpoints and emits records."""
