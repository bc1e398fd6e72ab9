"""Adoption of a running cluster (`migplan import`): each GPU's cut and the inventory files written."""
