"""Records, verdicts, metrics as pure functions, the run directory, the ledger and the index."""
