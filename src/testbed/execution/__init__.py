"""Executing a plan: the pipeline as named steps, strategies, workers and treatments."""
