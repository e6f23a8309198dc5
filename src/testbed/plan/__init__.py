"""Expanding a campaign into a plan: matrix points, treatments, workers, capacity checks."""
