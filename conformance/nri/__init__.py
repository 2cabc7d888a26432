"""Suite for the nri layer."""
