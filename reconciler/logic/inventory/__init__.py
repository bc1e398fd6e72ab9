"""The inventory: loading YAML safely, the schemas, the hardware and strategy rules, the placement solver, validation
of a root, and where roots and reports live."""
