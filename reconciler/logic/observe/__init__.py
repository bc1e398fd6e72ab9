"""What the node observers and the cluster say about holders: the observation joined with the plan, occupancy, owners
and the per-container GPU rules."""
