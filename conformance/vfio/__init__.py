"""Suite for the vfio layer."""
