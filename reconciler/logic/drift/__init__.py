"""Drift: every way the cluster differs from the plan, as findings with stable codes, and one classification of a node
against its config."""
