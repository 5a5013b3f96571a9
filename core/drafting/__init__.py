"""Draft sources (the drafter seam) and the compiled decode step a model drafter can use."""
