"""Suite for the iommu layer."""
