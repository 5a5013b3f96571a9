"""The decode loop and what it is made of: the engine, the model+cache, sampling and the acceptance rules, per-round timers."""
