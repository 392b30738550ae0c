"""Adapters from remedy's seams to real systems (Kubernetes). The domain never imports these."""
