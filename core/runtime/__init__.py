"""The machine around the loop: GPU compile warm-up, the sharded (SPMD) target, the tool's version."""
