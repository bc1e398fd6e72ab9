"""The wire formats migplan reads and writes on others' objects: the mig-parted config and the observed-state
annotation."""
