"""Suite for the runtime layer."""
