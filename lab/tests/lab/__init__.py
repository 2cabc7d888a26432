"""Self-tests of what all labs share: records of what they start, cleanup, the one entry."""
