"""The pair's caches kept to the conversation (core/decode/caches.py): a run's model brought
to seq[:-1], every other cache and drafter rewound to what agrees with the text, a settled run
leaving each at most seq[:-1], and a reset that empties every cache but keeps the compiled
graphs. With no draft loaded, every operation goes over the target alone."""

from __future__ import annotations

import threading

from core.decode.caches import PairCaches
from core.settings import Settings
from tests.helpers.tiny import PROMPT, noisy_copy


def test_prefill_brings_the_run_s_model_to_all_but_the_last_token(target) -> None:
    caches = PairCaches(target, noisy_copy(target, 0.2, seed=7))
    s = Settings()
    seq = list(PROMPT)
    fed = caches.prefill(seq, s, False, threading.Event())
    assert fed == len(seq) - 1 and caches.target.seq == seq[:-1]
    assert caches.draft is not None and caches.draft.seq == []  # the other model is not fed
    assert caches.prefill(seq + [5, 6], s, False, threading.Event()) == 2  # the rest only
    caches.settle(seq)  # the conversation went back to `seq`: everything past it rewound
    assert caches.target.seq == seq[:-1]
    state = caches.state()
    assert state["target_seq"] == seq[:-1] and state["draft_seq"] == []


def test_no_draft_means_the_target_alone(target) -> None:
    caches = PairCaches(target, None)
    assert caches.draft is None and caches.models == (caches.target,)
    assert set(caches.state()) == {"target_seq", "target_offset"}
    caches.use_step("eager")
    assert caches.step_report()["step"] == "eager"


def test_reset_empties_every_cache_and_keeps_the_compiled_graphs(target) -> None:
    caches = PairCaches(target, noisy_copy(target, 0.2, seed=7))
    caches.prefill(list(PROMPT), Settings(), False, threading.Event())
    compiled = [m.compiled for m in caches.models]
    caches.drafters["x"] = object()  # type: ignore[assignment]
    old = caches.models
    caches.reset()
    assert all(m.seq == [] for m in caches.models) and caches.drafters == {}
    assert all(a is not b for a, b in zip(old, caches.models, strict=True))
    assert all(m.compiled is c for m, c in zip(caches.models, compiled, strict=True))
    assert caches.models == (caches.target, caches.draft)
