"""Suite for the sizing layer."""
