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
                            quality=True, predict=False)  # fmt: skip
    assert config.to_dict() == {"tokens": 64, "seeds": 2, "invocations": 1, "warmup": 0,
                                "traced": False, "quality": True, "predict": False}  # fmt: skip
    assert ProtocolConfig(compile_warmup=False).to_dict()["compile_warmup"] is False
    from core.sweep import ProtocolConfig as SweepConfig

    assert SweepConfig is ProtocolConfig
