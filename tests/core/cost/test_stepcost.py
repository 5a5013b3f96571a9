"""core.cost.stepcost measures every schedule, fused included, and counts a step's primitives."""

from __future__ import annotations

from core.cost.stepcost import count_primitives, main, measure
from core.models import load_model


def test_measure_reports_every_schedule_and_the_peer(tmp_path):
    lm = load_model("shape:tiny")
    vocab = int(lm.model.model.embed_tokens.weight.shape[0])
    res = measure(lm.model, vocab, context=32, steps=4, repeats=1)
    for key in ("per_step_s", "pipelined_s", "chained8_s", "fused_per_step_s",
                "fused_pipelined_s", "fused_chained8_s", "mlx_lm_generate_step_s"):
        assert 0 < res[key] < 5, key
    prims = res["primitives_per_step"]
    assert prims["by_op"]["QuantizedMatmul"] >= 7 * 2  # 7 projections per layer, 2 layers
    assert prims["total"] == sum(prims["by_op"].values())


def test_count_primitives_grows_with_layers():
    small = load_model("shape:tiny-draft")  # tiny's first layer only
    big = load_model("shape:tiny")
    v = int(big.model.model.embed_tokens.weight.shape[0])
    assert count_primitives(small.model, 16, v)["total"] < count_primitives(big.model, 16, v)["total"]


def test_cli_writes_json(tmp_path):
    out = tmp_path / "steps.json"
    assert main(["--model", "shape:tiny", "--context", "16", "--steps", "2", "--repeats", "1",
                 "--json", str(out)]) == 0
    assert "shape:tiny" in out.read_text()
