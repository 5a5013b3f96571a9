"""The default model's greedy target-only tokens for one prompt, generated once per test session
and shared by every pytest-xdist worker: the exactness tests of the compiled step, of the tree,
lookup and hybrid sources and of the engine's greedy speculative run compare their runs to it
(or to its first tokens).

Why shared: on this CPU the 160 tokens cost ~27 s, and each test used to generate its own. Greedy
speculative decoding must give target-only's tokens whatever the drafts, so a run compared to
this reference is checked at least as much as against another mode's run of its own.

Why 160: the longest user, the tree's test, runs tokens 113..159 (its accepted forks come from
132 on); the compiled step's uses the first 32, lookup/hybrid's 48, the engine's 24.

Why this prompt: the story SmolLM2 writes for it repeats its own sentences with different
endings ("a testament to the resilience / the human capacity / the beauty ..."), so the text
forks (the tree builds trees of several branches and accepts them), the lookup finds phrases to
copy within its first 48 tokens, and drafts are accepted several at a time (the compiled
verifications run full); and the chat template makes it 38 tokens, where a pasted module of a
few hundred tokens costs a decode step a row to prefill in every process that runs it.

The first worker to ask generates the tokens under an exclusive lock on a file in the session's
shared temporary folder (the pattern pytest-xdist documents for session data); the others wait,
then read them. The file's name is keyed by everything the tokens depend on.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from pathlib import Path
from typing import Any

PROMPT = "Write a short story about a lighthouse."
TOKENS = 160  # the tree's test reads up to here; a longer user raises it


def prompt_ids(pair: Any) -> list[int]:
    """The prompt as the chat template gives it to the default pair's target."""
    from core.models import chat_prompt_ids

    return chat_prompt_ids(pair.target.tokenizer, [{"role": "user", "content": PROMPT}])


def _generate(pair: Any, ids: list[int]) -> tuple[int, ...]:
    from core.decode.engine import Engine
    from core.settings import Settings
    from tests.helpers.engine import run

    s = Settings(mode="target-only", temperature=0.0, max_tokens=TOKENS, ignore_eos=True,
                 traced=False)
    _, summary = run(Engine.from_pair(pair), ids, s)
    return tuple(summary.token_ids)  # as RunSummary.token_ids, so the tests compare them


def _key(pair: Any, ids: list[int]) -> str:
    """What the tokens depend on: the target (spec, name, weights' file and its size and time),
    the prompt's ids, the count and the versions of MLX and mlx-lm."""
    import mlx.core as mx
    import mlx_lm

    t = pair.target
    stat = Path(t.source).stat() if t.source and Path(t.source).exists() else None
    parts = [t.spec, t.name, t.source, stat and (stat.st_size, stat.st_mtime_ns), ids, TOKENS,
             mx.__version__, mlx_lm.__version__]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def greedy_reference(pair: Any, shared: Path | None) -> tuple[list[int], tuple[int, ...]]:
    """(prompt ids, TOKENS greedy target-only tokens). `shared`: the folder every worker of this
    session sees (None outside pytest-xdist: generated here)."""
    ids = prompt_ids(pair)
    if shared is None:
        return ids, _generate(pair, ids)
    path = shared / f"greedy-reference-{_key(pair, ids)}.json"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not path.exists():
            path.write_text(json.dumps(_generate(pair, ids)))
        return ids, tuple(json.loads(path.read_text()))
