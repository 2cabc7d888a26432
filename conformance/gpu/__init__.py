"""Suite for the gpu layer (cluster scope)."""
