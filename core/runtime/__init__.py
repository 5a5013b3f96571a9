"""The machine around the loop: GPU compile warm-up (all first, or in the order of need) and its watch, the sharded (SPMD) target and its collectives' meter, the tool's version."""
