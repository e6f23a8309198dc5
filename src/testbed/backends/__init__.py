"""Backends provision deployments and hand out endpoints: local, kubernetes, external."""
