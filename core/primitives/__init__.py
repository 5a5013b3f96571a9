"""What a decode step is made of, below every package that runs one: a model with its prompt
cache (cached_model) and its compiled decode step (compiled), the mlx-lm module layout
(introspect), logits to distributions and the acceptance rules (sampling), per-position
acceptance (acceptance). The loop (core/decode/), the drafters, the calibration, the model
loaders and the cost model all import these; these import none of them."""

__all__: list[str] = []
