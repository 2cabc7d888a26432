"""Suite for the keda layer."""
