"""A recorded run with known numbers (two rounds, one traced), under the seed's settings: the
profile, I/O and app tests save, load and check it."""

from __future__ import annotations

from core.events import CommittedToken, PhaseTimings, RoundEvent, RunSummary
from core.profile import RecordedRun
from core.settings import Settings

SEED = Settings(
    temperature=0.7, repetition_penalty=1.1, max_tokens=256, ignore_eos=True, bonus=False
)


ENV = {"backend": "cpu", "device_name": "Test CPU", "mlx": "0.32.4", "timestamp": "t"}


def make_run(settings: Settings = SEED, e2e: float = 0.5) -> RecordedRun:
    rounds = (
        RoundEvent(
            index=0,
            tokens=(CommittedToken(5, "accepted"), CommittedToken(9, "corrected")),
            rejected=(7, 8, 6),
            proposed=4,
            accepted=1,
            rows=5,
            timings=PhaseTimings(
                draft=0.010, verify=0.020, sample=0.003, cache=0.001, other=0.0005, total=0.0345
            ),
            kernel="qmm",
            tv=0.125,
            context=12,
            traced=True,
        ),
        RoundEvent(
            index=1,
            tokens=tuple(CommittedToken(i, "accepted") for i in (11, 12, 13, 14))
            + (CommittedToken(15, "bonus"),),
            proposed=4,
            accepted=4,
            rows=5,
            timings=PhaseTimings(total=0.03),
            kernel="qmv",
            tv=None,
            context=17,
            traced=False,
        ),
    )
    summary = RunSummary(
        mode="speculative",
        tokens=7,
        rounds=2,
        prompt_tokens=10,
        prefill_tokens=10,
        proposed=8,
        accepted=5,
        acceptance=0.625,
        per_position_acceptance=(1.0, 0.5, 0.5, 0.5),
        mean_accepted_length=2.5,
        e2e_s=e2e,
        ttft_s=0.1,
        decode_tok_s=14.0,
        phase_s={"draft": 0.02, "verify": 0.04, "sample": 0.006, "cache": 0.002, "other": 0.001},
        mean_tv=0.125,
        traced=True,
        stop_reason="length",
        token_ids=(5, 9, 11, 12, 13, 14, 15),
    )
    return RecordedRun(
        environment=dict(ENV),
        rounds=rounds,
        summary=summary,
        prompt="Write a scene in a lunar greenhouse.",
        calibration={"backend": "cpu", "rows": [1, 2, 4], "t_verify_s": [0.01, 0.02, 0.04]},
        settings=settings,
    )
