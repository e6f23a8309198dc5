"""Parts testbed plays that a real cluster runs as software of its own (stand-ins)."""
