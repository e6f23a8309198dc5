"""Expanding a campaign into a plan: matrix points, treatments, workers, model-fit checks."""
