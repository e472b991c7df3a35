"""Inter-node and hierarchical tasks: world sizes of 16 and more, laid out node-major (local rank = GPU index)."""
