"""Test data shared across the suite: the builders of data directories (written by the real storage code or a
real in-process group, never checked-in binary files) that the audit and rmqctl tests read."""
