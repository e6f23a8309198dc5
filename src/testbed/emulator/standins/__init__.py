"""Parts testbed plays that a real cluster runs (documented as stand-ins, never as the
real thing): operators and controllers of kinds the emulator does not implement."""
