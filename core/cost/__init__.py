"""What a round costs and what to do about it: the draft-length policies, the measured guard, the speedup prediction, the step-cost probe."""
