"""Domain values of migplan. Pure: stdlib only, frozen dataclasses, no I/O."""
