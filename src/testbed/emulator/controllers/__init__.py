"""Controllers of the emulated cluster: Deployment, ReplicaSet, Job, the scheduler and the plane that runs them."""
