"""Suite for the persistence layer."""
