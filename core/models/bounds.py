"""Bounds on a model's declared sizes, checked before anything of that size is built.

Why: a config (a shape's options, an mlx-lm folder's config.json, a GGUF's metadata) is text
a user did not necessarily write, and every size in it decides an allocation. `layers=100000`
climbed ~200 MB/s until killed and `vocab=100000000000` was an OverflowError traceback (issue
32, rows 8 and 9); a size past these bounds is refused in one sentence naming the model.
The bounds sit well above every published model (Llama 3.1 405B: 126 layers, 16384 wide,
53248 intermediate; Gemma: a 262144-token vocabulary; Llama 4: a 10M context).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.models.loaded import ModelLoadError

# key -> (lowest, highest, what it is in words)
CONFIG_BOUNDS: dict[str, tuple[int, int, str]] = {
    "num_hidden_layers": (1, 1024, "layers"),
    "vocab_size": (1, 2**21, "vocabulary entries"),
    "hidden_size": (1, 2**16, "hidden width"),
    "intermediate_size": (1, 2**18, "MLP width"),
    "num_attention_heads": (1, 1024, "attention heads"),
    "num_key_value_heads": (1, 1024, "KV heads"),
    "head_dim": (1, 2**12, "head width"),
    "max_position_embeddings": (1, 2**26, "context window"),
}


def check_config_bounds(config: Mapping[str, Any], model: str) -> None:
    """Every size in `config` that it declares: an integer within CONFIG_BOUNDS, and heads
    that divide into KV heads. Absent keys are left to the model class's defaults."""
    for key, (lo, hi, words) in CONFIG_BOUNDS.items():
        if key not in config or config[key] is None:
            continue
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelLoadError(
                f"{model} gives {key} = {value!r} ({words}), which must be a whole number."
            )
        if not lo <= value <= hi:
            raise ModelLoadError(
                f"{model} gives {key} = {value:,} ({words}); this tool loads {lo} to {hi:,}."
            )
    heads, kv = config.get("num_attention_heads"), config.get("num_key_value_heads")
    if isinstance(heads, int) and isinstance(kv, int) and heads % kv:
        raise ModelLoadError(
            f"{model} has {heads} attention heads, not a multiple of its {kv} KV heads."
        )
