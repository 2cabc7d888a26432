"""Suite for the reboot layer."""
