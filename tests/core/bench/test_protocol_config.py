"""run_protocol's parameter objects (core.bench.protocol.ProtocolConfig, ProtocolInputs): what a
caller passes, with keyword options on top, read before any request (no model needed here)."""

from __future__ import annotations

import pytest

from core.bench.errors import BenchError
from core.bench.protocol import ProtocolConfig, ProtocolInputs, run_protocol


def test_an_unknown_option_is_named() -> None:
    with pytest.raises(TypeError, match="unknown option.*: tokenz"):
        run_protocol(None, [1, 2], [], tokenz=4)


def test_the_config_is_read_and_options_go_on_top_of_it() -> None:
    with pytest.raises(BenchError, match="tokens, seeds and invocations must be at least 1"):
        run_protocol(None, [1, 2], [], ProtocolConfig(tokens=0))
    # tokens=5 replaces the config's 0: the run gets as far as the (empty) prompt
    with pytest.raises(BenchError, match="The prompt is empty"):
        run_protocol(None, [], [], ProtocolConfig(tokens=0), ProtocolInputs(), tokens=5)
    with pytest.raises(BenchError, match="There is no setting to benchmark"):
        run_protocol(None, [1, 2], [], ProtocolConfig(seeds=2), ProtocolInputs(task_name="x"))


def test_the_sweep_keeps_the_same_protocol_record() -> None:
    """A sweep's JSON keeps its config's dict, and merge_sweeps compares parts by it: a knob
    left to the backend (compile_warmup None) is left out, so older parts still match."""
    config = ProtocolConfig(tokens=64, seeds=2, invocations=1, warmup=0, traced=False,
                            quality=True, predict=False)
    assert config.to_dict() == {"tokens": 64, "seeds": 2, "invocations": 1, "warmup": 0,
                                "traced": False, "quality": True, "predict": False}
    assert ProtocolConfig(compile_warmup=False).to_dict()["compile_warmup"] is False
    from core.sweep import ProtocolConfig as SweepConfig

    assert SweepConfig is ProtocolConfig


# --------------------------------------------------------------------------- counts bounded


@pytest.mark.parametrize("field", ["seeds", "invocations", "warmup"])
def test_counts_past_their_bound_are_refused_before_anything_is_allocated(field) -> None:
    """`--seeds 1000000000` built a list of a billion requests and died of a MemoryError."""
    import time

    from core.bench.protocol import MAX_COUNTS

    start = time.perf_counter()
    with pytest.raises(BenchError, match=f"{field} must be at most {MAX_COUNTS[field]:,}"):
        run_protocol(None, [1, 2], ["target-only"], ProtocolConfig(**{field: 10**9}))
    assert time.perf_counter() - start < 1.0


@pytest.mark.usefixtures("wide_console")
@pytest.mark.parametrize("flag", ["--seeds", "--invocations", "--warmup"])
def test_bench_and_sweep_bound_the_counts_on_the_command_line(flag, capsys, no_load) -> None:
    from tests.helpers.cli_checks import QUICK, refused

    quick = [a for a in QUICK]
    i = quick.index(flag) if flag in quick else None
    if i is not None:
        del quick[i:i + 2]
    refused(capsys, ["bench", *quick, flag, "1000000000"], f"{flag} must be at most")
    refused(capsys, ["sweep", "--prompt", "hi", "--tokens", "2", flag, "1000000000"],
            f"{flag} must be at most")


@pytest.mark.usefixtures("wide_console")
def test_a_large_plan_states_its_size_and_needs_yes_without_a_terminal(capsys, no_load) -> None:
    """A 9,698-cell sweep or --invocations 1e9 started with no bound, estimate or warning."""
    from core import cli
    from tests.helpers.cli_checks import refused

    # 22 cells x 9 prompts x (1 warm-up + 3 x 3 timed + quality): past 500 requests
    msg = refused(capsys, ["sweep", "--all-prompts", "--tokens", "8"], "requests", "--yes")
    assert "hour" in msg or "minute" in msg, msg
    refused(capsys, ["bench", "--prompt", "hi", "--tokens", "8", "--seeds", "100",
                     "--invocations", "10", "--target", "shape:tiny", "--draft",
                     "shape:tiny-draft"], "requests", "--yes")
    # with --yes it goes on (to the load, which the fixture stops)
    with pytest.raises(AssertionError, match="models loaded"):
        cli.main(["sweep", "--all-prompts", "--tokens", "8", "--yes"])
