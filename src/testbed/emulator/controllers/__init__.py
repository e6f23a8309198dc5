"""Controllers of the emulated cluster: workloads, the scheduler, and the plane running them."""
