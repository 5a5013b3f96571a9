"""A target bigger than one machine: speculation over a target sharded with MLX distributed.

Launched with `mlx.launch -n N -- specdec-tui chat|bench|calibrate ...` (ring over TCP on one
machine or several, NCCL on CUDA, MPI), every rank runs the same program, SPMD: the same
decode loop over its tensor-parallel shard of the target (mlx-lm's own `shard(group)`: q/k/v
and gate/up split by output, o and down by input, one all_sum after each of those two), with
the draft source replicated (the draft model is small; a lookup is host logic). A process
launched into a group of more than one rank shards its target without being asked: that is
the only reason to launch it so, and a flag that could be forgotten would leave N full
replicas doing the same work. The app (TUI) stays one process and is refused.

What keeps the ranks in step (a rank that strayed would feed its collectives other shapes
and hang them, or mix another sequence's activations into everyone's):
- The same seed, prompt and settings on every rank; the engine's keys come from the seed.
- Rank 0's decisions, broadcast: the drafts every rank verifies, and each round's accepted
  count and next token (`Spmd.agree`: an all_sum where only rank 0 contributes, lazily in the
  round's graph, so no host sync of its own). With two ranks all_sum is a + b = b + a, so the
  logits agree bit for bit anyway (the tests check it); with more ranks or other reduction
  orders a last-bit difference could flip a sampled acceptance, and then ranks would diverge.
- Nothing decided from a clock: a calibration is rank 0's, shared (`agree_curve`); the
  cost-aware policy does not scale its prices by observed round times (each rank's differ).
- A cancel has to come from the event stream (or be broadcast); the CLI never cancels.

Output: only rank 0 prints and writes files (`rank0_only`); the others follow headless and
print only their errors, tagged with their rank. A rank that dies: the ring backend fails the
others' collectives ("connection to a peer was lost"), and mlx.launch terminates the rest when
one exits non-zero (NCCL would otherwise wait forever); either way every survivor ends with a
sentence, not a hang.

Communication in the trace: priced, not waited for (core/runtime/comm_meter.py).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import mlx.core as mx
import numpy as np

from core.errors import UserError
from core.runtime.comm_meter import PROBE_BURSTS, PROBE_CHAIN, comm_prices, install_comm_meter

# Set by the launchers: mlx.launch (ring, NCCL, JACCL) sets MLX_RANK; mpirun sets its own.
LAUNCH_ENV = ("MLX_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
# The backend the launcher set up, by the variables it left (else MLX tries them in turn).
_BACKEND_ENV = (("NCCL_HOST_IP", "nccl"), ("MLX_JACCL_COORDINATOR", "jaccl"),
                ("MLX_HOSTFILE", "ring"))
# The backends' own error prefixes: a collective that failed because a peer went away.
_COLLECTIVE_ERRORS = ("[ring]", "[nccl]", "[mpi]", "[jaccl]")

T = TypeVar("T")


class DistributedError(UserError):
    """A launched group that cannot run (cannot join it, cannot shard the target)."""


_group: Any = None  # the launched group of more than one rank, once joined
_spmd: Spmd | None = None


def launched_group() -> Any | None:
    """The group this process was launched into when it has more than one rank, else None.

    A plain run (no launcher's variables) never initialises MLX distributed."""
    global _group
    if _group is not None:
        return _group
    if not any(os.environ.get(k) for k in LAUNCH_ENV):
        return None
    backend = next((name for var, name in _BACKEND_ENV if os.environ.get(var)), "any")
    try:
        group = mx.distributed.init(backend=backend)
    except (RuntimeError, ValueError) as exc:
        raise DistributedError(
            f"This process was launched into a distributed group but could not join it "
            f"({_first_line(exc)})."
        ) from exc
    if group.size() < 2:
        return None
    _group = group
    return group


def rank() -> int:
    """This process's rank in the launched group (0 when not launched)."""
    g = launched_group()
    return g.rank() if g is not None else 0


def is_rank0() -> bool:
    return rank() == 0


def rank0_only(fn: Callable[..., T]) -> Callable[..., T | None]:
    """`fn` runs on rank 0 only (prints, reports, profiles); elsewhere it returns None."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T | None:
        return fn(*args, **kwargs) if is_rank0() else None

    return wrapper


def current_spmd() -> Spmd | None:
    """This process's place in a launched group (joined and set up once), or None."""
    global _spmd
    if _spmd is None:
        group = launched_group()
        if group is None:
            return None
        _spmd = Spmd(group)
        _spmd.install()
    return _spmd


def refuse_app_when_launched() -> None:
    """The app is one process; launched over several ranks, say so in one sentence."""
    group = launched_group()
    if group is not None:
        raise DistributedError(
            f"The app runs in one process, not over {group.size()} launched ranks: run "
            "`specdec-tui chat` or `specdec-tui bench` under the launcher instead."
        )


def lost_peer_sentence(exc: BaseException) -> str | None:
    """The sentence for a collective that failed because another rank went away, or None
    when `exc` is not that (then it is a bug to show in full)."""
    if _group is None or not isinstance(exc, RuntimeError):
        return None
    msg = _first_line(exc)
    if not msg.startswith(_COLLECTIVE_ERRORS):
        return None
    return (
        f"rank {_group.rank()} of {_group.size()} lost its peers inside a collective ({msg}): "
        "another rank ended first; its own output says why, unless it was killed (a signal, "
        "or out of memory) and left none."
    )


# -- the ranks in step ---------------------------------------------------------------------


class Spmd:
    """One rank of a sharded target: loads and shards, and makes every rank follow rank 0."""

    def __init__(self, group: Any) -> None:
        self.group = group
        self.rank = int(group.rank())
        self.size = int(group.size())

    def install(self) -> None:
        """The process-wide parts: the traced-collective meter, the end-of-peer sentence on
        SIGTERM, and quiet followers."""
        install_comm_meter()
        _say_when_terminated(self.rank, self.size)
        if self.rank != 0:
            _follow_headless(self.rank)

    # -- agreement -------------------------------------------------------------------------

    def agree(self, x: mx.array) -> mx.array:
        """`x` as rank 0 has it, on every rank: an all_sum that only rank 0 feeds. Lazy (it
        joins the caller's graph; the caller's own sync waits for it). Integers travel as
        int32, floats as float32; the result has `x`'s dtype.

        A follower's zeros still depend on its own `x`, through the same graph on every rank:
        MLX evaluates lazily, and a follower that skipped computing `x` would skip the
        collectives inside it (the sharded forward's), pairing its next all_sum with another
        rank's different one (a crash or garbage, not an error)."""
        if x.size == 0:
            return x
        wire = mx.int32 if mx.issubdtype(x.dtype, mx.integer) else mx.float32
        mine = mx.where(mx.array(self.rank == 0), x.astype(wire), mx.zeros((), wire))
        return mx.distributed.all_sum(mine, group=self.group).astype(x.dtype)

    def agree_json(self, obj: Any) -> Any:
        """A JSON value as rank 0 has it, on every rank (two small collectives and syncs)."""
        data = json.dumps(obj, sort_keys=True).encode() if self.rank == 0 else b""
        n = int(self.agree(mx.array([len(data)], dtype=mx.int32)).item())
        buf = np.zeros(n, dtype=np.int32)
        buf[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        got = np.array(self.agree(mx.array(buf)), dtype=np.int64)
        return json.loads(bytes(got.astype(np.uint8).tolist()).decode())

    def agree_curve(self, curve: Any) -> Any:
        """Rank 0's calibration on every rank: choices priced from it (k, dispatch) agree."""
        from core.dispatch.curve import VerifyCostCurve

        return VerifyCostCurve.from_dict(self.agree_json(curve.to_dict()))

    def describe(self) -> dict[str, Any]:
        """How this group ran, for a report: its ranks, that traced comm is priced (and how),
        and the prices charged, per size class."""
        return {
            "ranks": self.size,
            "comm": "priced",
            "probe": {"chain": PROBE_CHAIN, "bursts": PROBE_BURSTS,
                      "statistic": "fastest burst, least rank"},
            "prices_s": {f"up to {n} B": v for n, v in sorted(comm_prices().items())},
        }

    def barrier(self) -> None:
        mx.eval(mx.distributed.all_sum(mx.array(1.0), group=self.group))

    # -- loading ---------------------------------------------------------------------------

    def load_pair(self, target_spec: str, draft_spec: str | None, *, progress: bool = False) -> Any:
        """core.models.load_pair, with the target sharded over the group. An mlx-lm folder or
        Hub repo loads through mlx-lm's `sharded_load` (lazily: each rank materialises only its
        shard); shapes and GGUF files load whole, then `shard(group)`. A `self:` draft derives
        from the whole target first (a truncated one shares the target's layers, so it is
        sharded with them and its steps communicate too)."""
        from core.models import check_pair, load_model, load_pair

        source = mlx_source(target_spec)
        derived = (draft_spec or "").strip().startswith("self:")
        if source is not None and not derived:
            target = self._sharded_mlx(target_spec, source)
            if draft_spec is None or not draft_spec.strip():
                pair = _pair_without_draft(target)
            elif draft_spec.strip() == target_spec.strip():
                pair = check_pair(target, target)
            else:
                pair = check_pair(target, load_model(draft_spec, target=target, progress=progress))
        else:
            pair = load_pair(target_spec, draft_spec, progress=progress)
            shard_model(pair.target.model, self.group, pair.target.name)
        self.barrier()  # every rank loaded before the first round's collectives
        return pair

    def engine(self, pair: Any) -> Any:
        """An Engine over `pair` whose rounds follow rank 0 (core.decode.engine.Engine.spmd)."""
        from core.decode.engine import Engine

        engine = Engine.from_pair(pair)
        engine.spmd = self
        return engine

    def _sharded_mlx(self, spec: str, source: str) -> Any:
        from mlx_lm.utils import sharded_load

        from core.models import LoadedModel, compute_dtype
        from core.models.mlx_folder import _download_repo, check_mlx_folder

        local = Path(source).expanduser()
        folder = local if local.exists() else _download_repo(source)
        config = check_mlx_folder(folder, spec)  # regular files, a bounded config.json
        if why := _heads_problem(config, self.size):
            raise DistributedError(f"{spec} cannot be sharded over {self.size} ranks: {why}.")
        try:
            model, tokenizer, config = sharded_load(
                str(folder), tensor_group=self.group, return_config=True
            )
        except ValueError as exc:  # "does not support tensor parallelism", ...
            raise DistributedError(
                f"{spec} cannot be sharded over {self.size} ranks ({_first_line(exc)})."
            ) from exc
        own = {"bfloat16": mx.bfloat16, "float16": mx.float16, "float32": mx.float32}.get(
            str(config.get("torch_dtype") or config.get("dtype")), mx.bfloat16
        )
        model.set_dtype(compute_dtype(own))
        mx.eval(model.parameters())
        name = local.name if local.exists() else source
        return LoadedModel(model, tokenizer, spec, name, kind="mlx", config=dict(config),
                           source=str(folder))


def mlx_source(spec: str) -> str | None:
    """The folder or Hub repo id when `spec` is one that core.models loads with mlx-lm."""
    from core.models.loader import _REPO_ID

    spec = spec.strip()
    if spec in ("", "default") or spec.startswith(("self:", "shape:")):
        return None
    path = Path(spec).expanduser()
    if path.exists():
        return spec if path.is_dir() else None
    if spec.lower().endswith(".gguf") or spec.startswith((".", "/", "~", os.sep)):
        return None
    return spec if _REPO_ID.match(spec) else None


def shard_model(model: Any, group: Any, name: str = "the target") -> None:
    """Shard a loaded mlx-lm model in place over `group` with its own tensor-parallel
    `shard(group)` (on the model or its body), then materialise the shards."""
    n = group.size()
    owner = model if hasattr(model, "shard") else getattr(model, "model", None)
    if owner is None or not hasattr(owner, "shard"):
        kind = getattr(model, "model_type", type(model).__module__.rsplit(".", 1)[-1])
        raise DistributedError(
            f"{name} cannot be sharded: mlx-lm's {kind} model has no tensor-parallel shard()."
        )
    args = getattr(model, "args", None)
    config = {
        "num_attention_heads": getattr(args, "num_attention_heads", None),
        "num_key_value_heads": getattr(args, "num_key_value_heads", None),
    }
    if why := _heads_problem(config, n):
        raise DistributedError(f"{name} cannot be sharded over {n} ranks: {why}.")
    try:
        owner.shard(group)
        mx.eval(model.parameters())
    except ValueError as exc:  # a width that does not split (quantization groups, ...)
        raise DistributedError(
            f"{name} cannot be sharded over {n} ranks ({_first_line(exc)})."
        ) from exc


def _heads_problem(config: dict[str, Any], n: int) -> str | None:
    heads = config.get("num_attention_heads")
    kv = config.get("num_key_value_heads") or heads
    for count, what in ((heads, "attention heads"), (kv, "key-value heads")):
        if isinstance(count, int) and count % n:
            return f"its {count} {what} do not split into {n} equal parts"
    return None


def _pair_without_draft(target: Any) -> Any:
    from core.models import ModelPair

    return ModelPair(
        target=target,
        draft=None,
        vocab_size=target.vocab_rows,
        eos_ids=frozenset(int(i) for i in target.tokenizer.eos_token_ids),
        speculation_ok=False,
        speculation_reason="no draft model was given",
    )


# -- a rank's output and its end -----------------------------------------------------------


def _say_when_terminated(rank_: int, size: int) -> None:
    """On SIGTERM (mlx.launch ends the other ranks when one exits non-zero) write one sentence
    and exit, even while the main thread waits inside a collective: the signal's wake-up byte
    is read by a thread of its own, since a Python handler would wait for the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    text = (
        f"specdec-tui: rank {rank_} of {size} was stopped: another rank ended first (or the "
        "launch was interrupted); its own output says why, unless it was killed and left none.\n"
    ).encode()

    def end(*_: Any) -> None:
        os.write(2, text)
        os._exit(143)

    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.signal(signal.SIGTERM, end)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def watch() -> None:
        while True:
            got = os.read(read_fd, 64)
            if not got or signal.SIGTERM in got:
                end()

    threading.Thread(target=watch, name="specdec-sigterm", daemon=True).start()


class _ErrorsOnly:
    """A follower's stderr: only its error sentences and tracebacks, tagged with its rank
    (rank 0 prints everything else once)."""

    encoding = "utf-8"

    def __init__(self, rank_: int, out: Any) -> None:
        self.rank, self.out, self.buf, self.passing = rank_, out, "", False

    def write(self, text: str) -> int:
        self.buf += text
        *lines, self.buf = self.buf.split("\n")
        for line in lines:
            self.passing = self.passing or line.startswith("Traceback")
            if line.startswith("specdec-tui:"):
                line = f"specdec-tui (rank {self.rank}):" + line[len("specdec-tui:") :]
            elif not self.passing:
                continue
            self.out.write(line + "\n")
        self.out.flush()
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return False


def _follow_headless(rank_: int) -> None:
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (for the process)
    sys.stderr = _ErrorsOnly(rank_, sys.__stderr__)  # type: ignore[assignment]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__).rstrip(".")
