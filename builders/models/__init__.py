"""Models: building them by name, their weights, their structure (layers, roles, stages)."""
