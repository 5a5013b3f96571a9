"""The loaded pair: loading, loaded, failed; a first use compiling GPU kernels; the idle warm-up;
and the engine's warnings, as SpecDecApp's feature (tui/features/base.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tui.engine_info import PairInfo, decoded
from tui.features.base import Feature
from tui.messages import (
    EngineFailed,
    EngineNotice,
    IdleWarmup,
    KernelsCompiling,
    ModelsLoaded,
    ModelsLoading,
)
from tui.status import ModelsStatus
from tui.widgets.chat import ChatView


@dataclass
class ModelsState:
    """The pair as the app knows it: its plain description and a thread-safe decode."""

    info: PairInfo | None = None
    decode: Callable[[Sequence[int]], str] | None = None

    def decode_ids(self, ids: Iterable[int]) -> str:
        """A recorded run's text, when a tokenizer is loaded (a profile stores ids only)."""
        return decoded(self.decode, self.info, ids)


class ModelsFeature(Feature):
    """Folds the bridge's load, compile, idle warm-up and notice messages."""

    models_state: ModelsState

    @property
    def info(self) -> PairInfo | None:
        """The loaded pair, or None (loading, or the load failed)."""
        return self.models_state.info

    @info.setter
    def info(self, info: PairInfo | None) -> None:
        self.models_state.info = info
        self.set_status(models=_models(self.status.models, loaded=info is not None))

    @property
    def models_loading(self) -> bool:
        return self.status.models.loading

    @property
    def compiling(self) -> str | None:
        """A first use compiling GPU kernels: its latest line (None once done)."""
        return self.status.models.compiling

    def on_models_loading(self, message: ModelsLoading) -> None:
        self.models_state.info = None
        self.set_status(models=_models(self.status.models, loading=True, loaded=False))
        self.query_one(ChatView).loading = True
        self.sub_title = f"loading {message.target} ← {message.draft or 'no draft'}…"

    def on_models_loaded(self, message: ModelsLoaded) -> None:
        info = message.info
        self.models_state.info, self.models_state.decode = info, message.decode
        self.query_one(ChatView).loading = False
        draft = info.draft_name or "no draft"
        device = f" · {info.device}" if info.device else ""
        self.sub_title = f"{info.target_name} ← {draft} · {info.backend}{device}"
        self.set_status(models=_models(self.status.models, loading=False, loaded=True))
        self.refresh_panels(all_panels=True)

    def on_engine_failed(self, message: EngineFailed) -> None:
        """A load failed: no pair, and the title says so (the notification is runs')."""
        if message.task != "load":
            return
        self.set_status(models=_models(self.status.models, loading=False))
        self.query_one(ChatView).loading = False
        self.sub_title = "no models loaded"

    def on_engine_notice(self, message: EngineNotice) -> None:
        self.notify(message.text, severity="warning", timeout=8)

    def on_kernels_compiling(self, message: KernelsCompiling) -> None:
        """A first use compiling GPU kernels: a notification when it starts and when it ends,
        the status line with its elapsed time in between."""
        notice = message.notice
        if notice.kind == "done":
            compiling = None
            self.notify(notice.text, timeout=8)
        else:
            compiling = notice.text
            if notice.kind == "started":
                self.notify(notice.text, severity="warning", timeout=8)
        self.set_status(models=_models(self.status.models, compiling=compiling))

    def on_idle_warmup(self, message: IdleWarmup) -> None:
        """The engine thread warmed one more size while idle: the status line says how far,
        and nothing once all are warm."""
        progress = message.progress
        idle = None if progress.finished else progress.text()
        self.set_status(models=_models(self.status.models, idle_warming=idle))


def _models(part: ModelsStatus, **changes: Any) -> ModelsStatus:
    return dataclasses.replace(part, **changes)
