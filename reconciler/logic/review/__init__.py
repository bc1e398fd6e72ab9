"""The merge-request view: the revision diff, capacity deltas, the MR comment, CI annotations and the pods a committed
report names."""
