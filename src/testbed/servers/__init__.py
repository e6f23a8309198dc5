"""Server adapters (one per kind) and the built-in servers."""
