"""The benchmark protocol: request counts, acceptance at the TV extremes, the JSON contract,
the reports on disk, the greedy check, NLL scoring and the mlx-lm peer rows.

Everything but the last test runs on `shape:tiny` / `shape:tiny-draft` (random ~100k-parameter
llamas, CPU, milliseconds per request); the last runs the issue's CLI command on the default
pair (`real_model`). No test asserts a speed: speed lives in docs/benchmarks.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import threading
from collections import Counter
from pathlib import Path

import mlx.core as mx
import pytest

from core import bench
from core.bench.quality import _Scorer
from core.bench.report import report_markdown
from core.bench.results import output_sha
from core.decode.engine import Engine
from core.errors import UserError
from core.events import PHASES, RunSummary
from core.settings import Settings
from tests.helpers.bench import (
    SHORT_PROMPT,
    TINY,
    _bench_parser,
    run_cli,
    without_default_system,
)


@pytest.fixture(scope="module")
def prompt_ids(tiny_pair):
    ids, _ = bench.fit_prompt_ids(tiny_pair.target.tokenizer, bench.load_prompt("code-bugfix"), 96)
    return ids


class CountingEngine:
    """Wraps an Engine, recording every request's settings and summary (and resets)."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.vocab_size = inner.vocab_size
        self.requests: list[tuple[Settings, RunSummary]] = []
        self.resets = 0

    @property
    def target_model(self):  # the scorer reads the target model through here
        return self.inner.target_model

    def reset(self) -> None:
        self.resets += 1
        self.inner.reset()

    def generate(self, prompt_ids, settings, cancel=None):
        for item in self.inner.generate(prompt_ids, settings, cancel=cancel):
            if isinstance(item, RunSummary):
                self.requests.append((settings, item))
            yield item


def _key(s: Settings) -> Settings:
    """A request's setting without what the protocol varies (seed, traced)."""
    return s.replace(seed=0, traced=False)


# --------------------------------------------------------------------------- protocol


def test_timed_requests_are_invocations_times_seeds_and_warmup_is_excluded(engine, prompt_ids):
    counting = CountingEngine(engine)
    spec = Settings(temperature=0.7, tv_budget=0.5, k=3)
    report = bench.run_protocol(
        counting, prompt_ids, [("spec", spec)], tokens=6, seeds=2, invocations=3, warmup=2
    )
    assert [r.name for r in report.results] == ["target-only", "spec"]  # baseline added, first
    untraced = Counter(_key(s) for s, summ in counting.requests if not summ.traced)
    traced = Counter(_key(s) for s, summ in counting.requests if summ.traced)
    for r in report.results:
        assert r.timed_requests == 3 * 2
        assert len(r.e2e_s) == 6 and len(r.rounds) == 6
        assert r.to_dict()["timed_requests"] == 6
        s = _key(Settings.from_dict(r.settings))
        assert untraced[s] == 2 + 3 * 2  # warm-up + timed; no extra references needed here
        assert traced[s] == 2  # one per seed, paired with the untraced one of that seed
        assert len(r.traced_ratios) == 2 and r.tracing_overhead == pytest.approx(
            statistics.median(r.traced_ratios) - 1.0
        )
    # Every request: a fresh cache (the whole prompt but its last token prefilled), exactly N
    # tokens whatever EOS says, and seeds 0, 1 repeated per invocation.
    assert counting.resets == len(counting.requests)
    for s, summ in counting.requests:
        assert summ.prefill_tokens == len(prompt_ids) - 1
        assert summ.tokens == 6 and s.ignore_eos and s.max_tokens == 6
    timed_seeds = [s.seed for s, summ in counting.requests if not summ.traced]
    assert set(timed_seeds) == {0, 1}
    assert report.protocol["seed_values"] == [0, 1]


def test_tv1_accepts_everything_and_tv0_does_not(engine, prompt_ids):
    base = Settings(temperature=0.7, k=4)
    report = bench.run_protocol(
        engine, prompt_ids, [("tv1", base.replace(tv_budget=1.0)), ("tv0", base.replace(tv_budget=0.0))],
        tokens=16, seeds=2, invocations=1, warmup=0, traced=False,
    )
    tv1, tv0 = report.result("tv1"), report.result("tv0")
    assert tv1.acceptance == 1.0
    assert tv1.per_position_acceptance == [1.0] * 4
    assert tv1.mean_accepted_length == 4.0
    assert tv0.acceptance is not None and tv0.acceptance < 1.0
    assert tv0.mean_tv is not None and tv0.mean_tv < 1e-6  # lossless: the output is p exactly
    assert tv1.mean_tv is not None and tv1.mean_tv > 0.0  # the draft's distribution, not p's
    assert report.result("target-only").acceptance is None



def test_tv_per_token_is_what_the_output_tokens_moved(engine, prompt_ids):
    """TV per token counts every generated token (a bonus or a target step moved nothing), so
    it is at most the TV per judged draft; target-only and lossless moved nothing, draft-only
    is not measured."""
    base = Settings(temperature=0.7, k=4)
    rows = [("tv1", base.replace(tv_budget=1.0)), ("tv0", base.replace(tv_budget=0.0)),
            ("draft", base.replace(mode="draft-only"))]
    report = bench.run_protocol(engine, prompt_ids, rows, tokens=16, seeds=2, invocations=1,
                                warmup=0, traced=False, quality=False, predict=False)
    tv1, tv0 = report.result("tv1"), report.result("tv0")
    assert tv1.tv_per_token is not None and 0.0 < tv1.tv_per_token < tv1.mean_tv
    assert tv0.tv_per_token is not None and tv0.tv_per_token < 1e-6
    assert report.result("target-only").tv_per_token == 0.0
    assert report.result("draft").tv_per_token is None
    assert tv1.to_dict()["quality"]["tv_per_token"] == tv1.tv_per_token


# --------------------------------------------------------------------------- the contract

NUM = (int, float)


def _check_result_contract(row: dict) -> None:
    for key in ("mode", "rule", "tv_budget", "temperature", "bonus"):
        assert key in row["settings"]
    assert "k" in row["settings"] or "policy" in row["settings"]
    assert isinstance(row["name"], str) and row["name"]
    speculative = row["settings"]["mode"] == "speculative"
    if speculative:
        assert isinstance(row["acceptance"], float) and 0.0 <= row["acceptance"] <= 1.0
    else:
        assert row["acceptance"] is None
    for key in ("rounds_per_request", "median_e2e_s", "decode_tok_s", "speedup_vs_target",
                "min_e2e_s", "max_e2e_s", "ttft_s"):
        assert isinstance(row[key], NUM) and row[key] >= 0, key
    assert row["min_e2e_s"] <= row["median_e2e_s"] <= row["max_e2e_s"]
    assert isinstance(row["timed_requests"], int)
    assert len(row["e2e_s"]) == row["timed_requests"]
    assert all(isinstance(x, float) for x in row["e2e_s"])
    # each timed request's median plain step (its host's speed), or None with too few steps
    assert len(row["step_ms"]) == row["timed_requests"]
    assert all(x is None or (isinstance(x, float) and x > 0) for x in row["step_ms"])
    if row["settings"]["mode"] == "target-only" and row["tokens_per_request"] >= 17:
        assert all(isinstance(x, float) for x in row["step_ms"])
    # each timed request's text, named by its tokens' sha256 (16 hex digits)
    assert len(row["output_sha"]) == row["timed_requests"]
    assert all(re.fullmatch("[0-9a-f]{16}", x) for x in row["output_sha"])
    assert row["mean_accepted_length"] is None or isinstance(row["mean_accepted_length"], float)
    assert isinstance(row["per_position_acceptance"], list)
    if row["phase_ms"] is not None:
        assert set(row["phase_ms"]) == set(PHASES)
        assert all(isinstance(v, float) for v in row["phase_ms"].values())
        assert isinstance(row["tracing_overhead"], float)
        assert isinstance(row["outside_rounds_ms"], float) and row["outside_rounds_ms"] >= 0
    assert row["kernel"] is None or isinstance(row["kernel"], str)
    q = row["quality"]
    assert set(q) >= {"target_nll", "target_nll_baseline", "mean_tv"}
    assert isinstance(q["target_nll"], float) and q["target_nll"] > 0
    assert isinstance(q["target_nll_baseline"], float)
    assert q["mean_tv"] is None or isinstance(q["mean_tv"], float)
    assert row["greedy_match"] in (True, False, None)
    if row["settings"]["temperature"] > 0 and row["settings"]["rule"] != "greedy":
        assert row["greedy_match"] is None


def test_json_contract_keys_and_types(engine, prompt_ids, tiny_pair):
    s = Settings(temperature=0.7, tv_budget=1.0, k=2, bonus=False)
    report = bench.run_protocol(
        engine, prompt_ids, [("fixed-2-tv1", s), ("greedy", s.replace(temperature=0.0))],
        tokens=8, seeds=1, invocations=2, warmup=0,
        decode=lambda ids: tiny_pair.target.tokenizer.decode(ids),
    )
    doc = json.loads(report.to_json())  # allow_nan=False inside: no NaN leaks into the file
    assert set(doc) >= {"environment", "results"}
    assert doc["environment"]["backend"] in ("cpu", "metal", "cuda", "gpu")
    assert doc["protocol"]["tokens"] == 8 and "nll_basis" in doc["protocol"]
    assert len(doc["results"]) == 3
    for row in doc["results"]:
        _check_result_contract(row)
    base = doc["results"][0]
    assert base["name"] == "target-only" and base["speedup_vs_target"] == 1.0
    assert base["quality"]["target_nll"] == base["quality"]["target_nll_baseline"]
    greedy = next(r for r in doc["results"] if r["name"] == "greedy")
    assert greedy["greedy_match"] is True  # at temperature 0 speculation must not change text
    # Its two requests (one seed, two invocations) named by their tokens: the same text on the
    # CPU, and the name is the documented recipe over the ids the JSON keeps.
    sample = greedy["sample_output"]["token_ids"]
    assert greedy["output_sha"] == [output_sha(sample)] * 2
    assert output_sha(sample) != output_sha(sample[:-1])
    assert greedy["sample_output"]["text"]  # decoded for the side-by-side section
    # Every timed text kept, token by token: ids, origins and each token's text; the two
    # invocations of the seed wrote the same text with the same origins, so one entry.
    for row in doc["results"]:
        (kept,) = row["texts"]
        assert kept["seed"] == row["sample_output"]["seed"] and kept["invocations"] == [0, 1]
        assert kept["ids"] == row["sample_output"]["token_ids"]
        assert len(kept["origins"]) == len(kept["ids"]) == len(kept["pieces"]) == 8
        assert "".join(kept["pieces"]) == row["sample_output"]["text"]
    assert set(base["texts"][0]["origins"]) == {"t"}  # target-only decides every token
    tv1 = next(r for r in doc["results"] if r["name"] == "fixed-2-tv1")
    assert set(tv1["texts"][0]["origins"]) == {"a"}  # TV 1 accepts every draft, no bonus
    assert set(greedy["texts"][0]["origins"]) <= set("axb")  # random weights: mostly "x"


# --------------------------------------------------------------------------- the CLI path


def test_cli_writes_markdown_json_and_csv(tmp_path):
    md, js, cs = tmp_path / "r.md", tmp_path / "r.json", tmp_path / "r.csv"
    rc = run_cli([
        "--target", TINY[0], "--draft", TINY[1], "--tokens", "8", "--seeds", "2",
        "--invocations", "1", "--warmup", "0", "--profile", "target-only",
        "--profile", "fixed-4-tv1", "--prompt-name", "code-refactor", "--prompt-tokens", "120",
        "--markdown", str(md), "--json", str(js), "--csv", str(cs),
    ])
    assert rc == 0
    doc = json.loads(js.read_text())
    assert [r["name"] for r in doc["results"]] == ["target-only", "fixed-4-tv1"]
    assert doc["results"][1]["acceptance"] == 1.0  # the preset is TV = 1
    assert doc["results"][1]["settings"]["bonus"] is False
    assert doc["protocol"]["prompt_tokens"] <= 120 and doc["protocol"]["prompt"]["kind"] == "code"
    text = md.read_text()
    assert "| Configuration | Acceptance | Avg. rounds/request | Median E2E latency |" in text
    assert "### Phase split" in text and "### What was given up" in text
    assert "### Outputs side by side (seed 0" in text
    rows = cs.read_text().splitlines()
    assert rows[0].startswith("name,label,engine,mode") and len(rows) == 3
    assert rows[2].startswith("fixed-4-tv1,")


def test_cli_logs_a_line_a_step_when_stderr_is_not_a_terminal(capsys):
    """A bench run into a log (a job, a remote call) says where it is after every step, so a
    run cut short shows what it was doing; the bar alone drew nothing there."""
    assert run_cli(["--target", TINY[0], "--draft", TINY[1], "--tokens", "4", "--seeds", "1",
                     "--invocations", "1", "--warmup", "1", "--no-quality", "--no-predict",
                     "--profile", "fixed-4-tv1"]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[")]
    assert re.match(r"\[\d\d:\d\d:\d\d \+\d+\.\d s\] loading shape:tiny / ", lines[0])
    assert lines[1].endswith("] loaded")
    steps = [ln.split("] ", 1)[1] for ln in lines[2:]]
    total = len(steps)  # 2 rows x (1 warm-up + 1 timed + 1 traced)
    assert total == 6 and steps[0] == "1/6 warm-up target-only", steps
    assert [s.split(" ", 1)[0] for s in steps] == [f"{i}/6" for i in range(1, 7)]


def test_cli_refuses_bad_input_in_one_sentence(tmp_path):
    with pytest.raises(UserError, match="no shipped prompt named 'nope'"):
        run_cli(["--target", TINY[0], "--prompt-name", "nope", "--tokens", "4"])
    with pytest.raises(UserError, match="does not exist"):
        run_cli(["--target", TINY[0], "--json", str(tmp_path / "missing" / "x.json")])
    with pytest.raises(UserError, match="--seeds must be at least 1"):
        run_cli(["--target", TINY[0], "--seeds", "0"])
    with pytest.raises(UserError, match="not a known key=value"):
        run_cli(["--target", TINY[0], "--profile", "fixed-4-tv1:warp=9"])


def test_settings_from_profiles_overrides_and_flags():
    parser, head = _bench_parser()
    args = parser.parse_args([*head, "--profile", "fixed-8-tv1:dispatch=gemv,bonus=true",
                              "--profile", "target-only"])
    rows = bench.settings_from_args(args)
    assert [b.name for b in rows] == ["fixed-8-tv1:dispatch=gemv,bonus=true", "target-only"]
    assert rows[0].settings.dispatch == "gemv" and rows[0].settings.bonus is True
    assert rows[0].settings.k == 8 and rows[0].settings.tv_budget == 1.0
    args = parser.parse_args([*head, "--tv", "0.5", "--k", "6", "--no-bonus", "--temperature", "0"])
    (only,) = bench.settings_from_args(args)
    assert only.settings.mode == "speculative"
    assert (only.settings.tv_budget, only.settings.k, only.settings.bonus) == (0.5, 6, False)
    assert only.name == "Fixed-6, greedy, no bonus"
    compiled = Settings(k=8, tv_budget=1.0, dispatch="gemm", step="compiled")
    assert bench.describe(compiled) == "Fixed-8, TV=1, gemm, compiled step"
    assert bench.describe(Settings(mode="target-only", temperature=0.0)) == "Target-only, greedy"


# --------------------------------------------------------------------------- what was given up


def test_draft_source_is_a_setting_of_flags_profiles_and_chat():
    parser, head = _bench_parser()
    (only,) = bench.settings_from_args(parser.parse_args([*head, "--draft-source", "lookup"]))
    assert only.settings.draft_source == "lookup"
    assert only.name == "Fixed-4, TV=0, lookup drafts"
    rows = bench.settings_from_args(parser.parse_args(
        [*head, "--profile", "fixed-4-tv1:draft_source=hybrid,lookup_min_match=3"]))
    assert (rows[0].settings.draft_source, rows[0].settings.lookup_min_match) == ("hybrid", 3)
    assert rows[0].settings.k == 4 and rows[0].settings.tv_budget == 1.0
    assert bench.describe(rows[0].settings) == "Fixed-4, TV=1, no bonus, hybrid drafts (match 3+)"
    assert "drafts" not in bench.describe(Settings())  # the default source goes unsaid
    with pytest.raises(UserError, match="draft_source must be one of model, lookup, hybrid, tree"):
        bench.settings_from_args(parser.parse_args([*head, "--profile", "target-only:draft_source=x"]))
    with pytest.raises(UserError, match="invalid choice"):  # one sentence, exit 2
        parser.parse_args([*head, "--draft-source", "oracle"])
    from core.chat.cli import chat_settings

    args = parser.parse_args(["chat", "hello", "--draft-source", "lookup"])
    assert chat_settings(args).draft_source == "lookup"
    # without a flag: where the app starts (issue 29: one default, not three)
    assert chat_settings(parser.parse_args(["chat", "hello"])).draft_source == "hybrid"


def test_report_splits_acceptance_by_draft_source(engine, prompt_ids):
    """A hybrid row's rounds add up over its sources, and the reports show them apart."""
    hybrid = Settings(temperature=0.0, k=3, draft_source="hybrid", lookup_min_match=1)
    report = bench.run_protocol(
        engine, prompt_ids, [("hybrid", hybrid)], tokens=24, seeds=1, invocations=1,
        warmup=0, traced=False, quality=False,
    )
    row = report.result("hybrid")
    per = row.per_source
    assert set(per) <= {"model", "lookup", "none"} and per
    assert sum(v["rounds"] for v in per.values()) == row.rounds[0]
    assert sum(v["share"] for v in per.values()) == pytest.approx(1.0)
    proposed = sum(v.get("proposed", 0) for v in per.values())
    accepted = sum(v.get("accepted", 0) for v in per.values())
    assert (proposed, accepted) == (row.positions.proposed, row.positions.accepted)
    assert report.result("target-only").per_source == {}
    assert json.loads(report.to_json())["results"][1]["per_source"] == per
    # more than one source in a row: a section of its own
    row.sources = {"model": bench_tally(4, 2), "lookup": bench_tally(8, 8)}
    row.plain_steps = 2
    text = report_markdown(report)
    assert "### Per draft source" in text
    assert "| hybrid | lookup | 1 | 25.0% | 8.0 | 100.0% | 8.00 |" in text
    assert "| hybrid | target steps | 2 | 50.0% | - | - | - |" in text


def bench_tally(proposed: int, accepted: int):
    from core.primitives.acceptance import PositionTally

    t = PositionTally()
    t.observe(proposed, accepted)
    return t


def test_greedy_check_reports_a_forced_divergence(engine, prompt_ids):
    """Against another target's outputs the check must fail, and say where and with what."""
    from core.models import load_pair

    other = Engine.from_pair(load_pair("shape:tiny,seed=1", "shape:tiny-draft"))
    greedy = Settings(temperature=0.0, k=3)
    report = bench.run_protocol(
        engine, prompt_ids, [("greedy", greedy)], tokens=12, seeds=1, invocations=1,
        warmup=0, traced=False, reference=other,
    )
    r = report.result("greedy")
    assert r.greedy_match is False and r.divergence is not None
    d = r.divergence
    mine = r.outputs[0]
    other.reset()
    theirs = list(
        next(
            x
            for x in other.generate(
                prompt_ids, greedy.replace(mode="target-only", max_tokens=12, ignore_eos=True)
            )
            if isinstance(x, RunSummary)
        ).token_ids
    )
    assert mine[: d.position] == theirs[: d.position]
    assert (d.target_only_token, d.speculative_token) == (theirs[d.position], mine[d.position])
    assert d.target_only_token != d.speculative_token
    assert d.logit_margin is not None and math.isfinite(d.logit_margin)
    # This engine's target prefers its own token there: the margin, computed from it, is < 0.
    assert d.logit_margin < 0
    assert "first divergence from target-only at generated token" in report_markdown(report)


def test_first_divergence():
    assert bench.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert bench.first_divergence([1, 2, 3], [1, 5, 3]) == (1, 2, 5)
    assert bench.first_divergence([1, 2], [1, 2, 7]) == (2, -1, 7)


def test_nll_equals_a_plain_forward_over_prompt_and_text(tiny_pair, prompt_ids):
    model, vocab = tiny_pair.target.model, tiny_pair.vocab_size
    text = [7, 300, 41, 41, 5, 260]
    logits = model(mx.array(prompt_ids + text)[None])[0, :, :vocab].astype(mx.float32)
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    rows = logprobs[len(prompt_ids) - 1 : -1]
    want = -float(mx.take_along_axis(rows, mx.array(text)[:, None], axis=-1).mean().item())
    got = bench.score_nll(model, prompt_ids, text, vocab)
    assert got == pytest.approx(want, rel=1e-4, abs=1e-4)
    # Scoring must not depend on what was scored before (the scorer trims its cache back).
    scorer = _Scorer(model, prompt_ids, vocab)
    scorer.nll([1, 2, 3, 4, 5, 6, 7, 8])
    total, n = scorer.nll(text)
    assert total / n == pytest.approx(want, rel=1e-4, abs=1e-4)


def test_a_text_scored_again_costs_no_forward(tiny_pair, prompt_ids, monkeypatch):
    """A run's repeated texts (target-only as baseline and as its row, greedy texts equal to
    it) are scored once: the same tokens again, as a list or a tuple, run no forward and give
    the same numbers; another text does."""
    scorer = _Scorer(tiny_pair.target.model, prompt_ids, tiny_pair.vocab_size)
    forwards = []
    plain = scorer.logits
    monkeypatch.setattr(scorer, "logits", lambda ids: forwards.append(ids) or plain(ids))
    first = scorer.nll([7, 300, 41])
    assert scorer.nll((7, 300, 41)) == first and len(forwards) == 1
    assert scorer.nll([7, 300, 42]) != first and len(forwards) == 2


# --------------------------------------------------------------------------- peer, cancel


def test_peer_rows_time_mlx_lm_on_the_same_models(engine, prompt_ids, tiny_pair):
    peer = bench.Peer(tiny_pair.target.model, tiny_pair.draft.model, k=2,
                      vocab_size=tiny_pair.vocab_size)
    report = bench.run_protocol(
        engine, prompt_ids, [("tv1", Settings(tv_budget=1.0, k=2))], tokens=10, seeds=2,
        invocations=1, warmup=1, traced=False, peer=peer,
    )
    names = [r.name for r in report.results]
    assert {"mlx-lm target-only", "mlx-lm speculative k=2"} <= set(names)
    # Greedy counterparts of ours were added so the ratio compares like with like.
    assert "target-only greedy" in names and "speculative greedy k=2" in names
    tgt, spec = report.result("mlx-lm target-only"), report.result("mlx-lm speculative k=2")
    for r in (tgt, spec):
        assert r.timed_requests == 2 and all(n == 10 for n in r.tokens)
        assert r.ours_vs_peer is not None and r.ours_vs_peer > 0
    assert tgt.peer_of == "target-only greedy" and spec.peer_of == "speculative greedy k=2"
    # Same models, greedy, same vocabulary slice: mlx-lm's text is ours, token for token.
    assert tgt.greedy_match is True and spec.greedy_match is True
    assert 0.0 <= spec.acceptance <= 1.0 and tgt.acceptance is None
    assert "### Against mlx-lm" in report_markdown(report)


def test_cancel_stops_the_run(engine, prompt_ids):
    cancel = threading.Event()
    seen = []

    def progress(done, total, label):
        seen.append(done)
        if done == 2:
            cancel.set()

    with pytest.raises(bench.BenchCancelled):
        bench.run_protocol(engine, prompt_ids, [Settings(k=2)], tokens=4, seeds=2,
                           invocations=2, warmup=0, progress=progress, cancel=cancel)
    assert seen == [1, 2]


def test_prompts_ship_both_kinds_and_fit_a_token_budget(tiny_pair):
    names = bench.prompt_names()
    kinds = {bench.prompt_kind(n) for n in names}
    assert {"code", "creative"} <= kinds and "creative-800" in names
    tok = tiny_pair.target.tokenizer  # byte-level: one token per byte, so cutting is needed
    assert bench.prompt_token_budget("creative-800") == 800
    assert bench.prompt_token_budget("code-bugfix") is None
    text = bench.load_prompt("creative-800")
    assert not text.startswith("#")  # the budget line is not part of the prompt
    ids, used = bench.fit_prompt_ids(tok, text, 800)
    assert 760 <= len(ids) <= 800
    assert text.startswith(used) and len(used) < len(text)
    with pytest.raises(UserError):
        bench.load_prompt("../pyproject")


def test_prompts_that_ask_for_a_copy_ship_with_their_kinds():
    assert bench.prompt_kind("code-edit-pasted") == "code"
    assert bench.prompt_kind("rewrite-paragraph") == "rewrite"
    code = bench.load_prompt("code-edit-pasted")
    module = code.split("```python\n", 1)[1].split("```", 1)[0]
    assert 55 <= len(module.splitlines()) <= 75 and "def load_readings(" in module
    compile(module, "code-edit-pasted", "exec")  # a module the answer can return whole
    paragraph = bench.load_prompt("rewrite-paragraph").split("\n\n", 1)[1]
    assert 180 <= len(paragraph.split()) <= 240


# --------------------------------------------------------------------------- the real pair


@pytest.mark.real_model
def test_cli_on_the_default_pair(tmp_path, default_pair, monkeypatch):
    """The issue's command writes the whole contract.

    Kept short with 8 tokens, no warm-up, a one-word prompt (tests.helpers.bench.SHORT_PROMPT)
    and one invocation of two seeds: this CPU prefills a row at about the cost of a decode step
    (~0.17 s for SmolLM2), every request prefills afresh and speculative rows prefill both. Two seeds keep the per-seed pairing of
    traced and timed requests; that timed requests are invocations x seeds is checked on the
    tiny pair (test_timed_requests_are_invocations_times_seeds_and_warmup_is_excluded).
    No prediction (--no-predict: it calibrates this CPU first, and nothing here reads it; the
    prediction's contract is checked on the tiny pair), and the pair is the session's one.
    Its chat template without the default system message (tests.helpers.bench.
    without_default_system): 11 prompt tokens, not 32, in each of the 13 prefills and scorings.
    """
    import core.models

    without_default_system(default_pair, monkeypatch)
    got, load = [], core.models.load_pair
    monkeypatch.setattr(core.models, "load_pair",
                        lambda *a, **kw: got.append(load(*a, **kw)) or got[-1])
    out = tmp_path / "out.json"
    rc = run_cli([
        "--tokens", "8", "--seeds", "2", "--invocations", "1", "--profile", "target-only",
        "--profile", "fixed-4-tv1", "--json", str(out), "--warmup", "0",
        "--prompt", SHORT_PROMPT, "--no-predict",
    ])
    assert rc == 0
    assert got and all(pair is default_pair for pair in got)  # loaded once, by the fixture
    doc = json.loads(Path(out).read_text())
    assert doc["environment"]["backend"] == "cpu"
    rows = {r["name"]: r for r in doc["results"]}
    assert set(rows) == {"target-only", "fixed-4-tv1"}
    for row in rows.values():
        _check_result_contract(row)
        assert row["timed_requests"] == 2
    assert rows["fixed-4-tv1"]["acceptance"] == 1.0
    assert rows["fixed-4-tv1"]["rounds_per_request"] == 2.0  # 8 tokens, 4 per round, no bonus
    assert "SmolLM2" in doc["protocol"]["models"]["target"]


def _curve_file(tmp_path: Path, rows: int) -> Path:
    from core.dispatch import VerifyCostCurve

    times = {r: 0.010 for r in range(1, rows + 1)}  # flat: an H200-like target, 1 ms drafts
    curve = VerifyCostCurve("cuda", "NVIDIA H200", 600, {"auto": times}, draft_step_s=0.001)
    path = tmp_path / "h200.json"
    path.write_text(json.dumps(curve.to_dict()))
    return path


def test_cli_prices_with_another_machine_s_curve(tmp_path, capsys):
    """--curve: cost-aware chooses k as it would where the curve was measured (here a flat
    GPU-like curve: it drafts, which on this CPU's own curve it would not), with no scaling by
    this machine's round times, and the report says whose curve priced the rows."""
    path, js = _curve_file(tmp_path, 9), tmp_path / "r.json"
    rc = run_cli([
        "--target", TINY[0], "--draft", TINY[1], "--tokens", "12", "--seeds", "1",
        "--invocations", "1", "--warmup", "0", "--no-quality", "--no-traced",
        "--policy", "cost-aware", "--rule", "mentored", "--tv", "1", "--k", "2",
        "--curve", str(path), "--json", str(js),
    ])
    assert rc == 0
    doc = json.loads(js.read_text())
    assert doc["protocol"]["calibration"]["from"] == f"{path} (measured on cuda, NVIDIA H200)"
    spec = next(r for r in doc["results"] if r["name"] != "target-only")
    drafted = {int(k): n for k, n in spec["prediction"]["rounds"].get("model", {}).items()}
    assert drafted and min(drafted) >= 1, spec["prediction"]["rounds"]
    # predicted for there: that curve's one-row step, and no efficiency against times from here
    assert spec["prediction"]["t_step_s"] == 0.010 and spec["efficiency"] is None
    assert "another machine" in spec["prediction"]["t_step_from"]
    err = " ".join(capsys.readouterr().err.split())
    assert "priced with the curve measured on cuda, NVIDIA H200" in err


def test_cli_refuses_a_curve_too_short_for_the_settings(tmp_path):
    with pytest.raises(UserError, match="measured up to 3 rows in auto; these settings need 9"):
        run_cli(["--target", TINY[0], "--draft", TINY[1], "--policy", "cost-aware",
                  "--curve", str(_curve_file(tmp_path, 3))])


def test_another_machine_s_curve_is_not_scaled_by_this_one_s_rounds(engine, prompt_ids):
    from core.dispatch import VerifyCostCurve

    times = {r: 0.010 for r in range(1, 10)}
    engine.set_cost_curve(VerifyCostCurve("cuda", "x", 64, {"auto": times}, draft_step_s=1e-3),
                          observed=False)
    s = Settings(policy="cost-aware", rule="mentored", tv_budget=1.0, max_tokens=10)
    from core.bench.requests import run_request

    req = run_request(engine, prompt_ids, s, None)
    assert req.summary is not None and req.summary.rounds > 1
    assert engine.policy_of("model").scale == [1.0, 1.0]  # observed=True moves it every round


def test_each_seed_runs_every_row_in_a_rotated_order(engine, prompt_ids):
    """Seeds outermost, every row within a seed, and seed j's rows start at the j-th, so no
    row always runs first or last in its seed (a drift within a seed's rows would otherwise
    read as a row's own cost: the A/A control, always last, read 0.91x on the H200)."""
    counting = CountingEngine(engine)
    rows = [("a", Settings(k=2, traced=False)), ("b", Settings(k=3, traced=False))]
    bench.run_protocol(counting, prompt_ids, rows, tokens=4, seeds=3, invocations=1, warmup=0,
                       traced=False, quality=False)
    def name(s: Settings) -> str:
        return "t" if s.mode == "target-only" else {2: "a", 3: "b"}[s.k]

    order = [(name(s), s.seed) for s, _ in counting.requests]
    base = next(s.seed for s, _ in counting.requests)
    assert order == [
        ("t", base), ("a", base), ("b", base),
        ("a", base + 1), ("b", base + 1), ("t", base + 1),
        ("b", base + 2), ("t", base + 2), ("a", base + 2),
    ]
    assert bench.protocol.rotated([], 3) == [] and bench.protocol.rotated([1, 2], 3) == [2, 1]


def test_the_phase_split_adds_up_to_the_traced_e2e(engine, prompt_ids):
    """The report's phase table names what the phases leave out of the traced E2E: the time
    before the first round and between rounds (it was one "prefill + outside rounds" cell)."""
    from core.events import time_accounting

    spec = Settings(temperature=0.0, k=2)
    report = bench.run_protocol(engine, prompt_ids, [("spec", spec)], tokens=8, seeds=1,
                                invocations=1, warmup=0, traced=True, quality=False)
    row = report.result("spec")
    parts = time_accounting(row.traced_summary, row.traced_rounds)
    assert sum(parts.values()) == pytest.approx(row.traced_e2e_s, rel=0.02)
    text = report_markdown(report)
    assert "| before the first round | between rounds | traced E2E |" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("| spec |") and "ms" not in ln
                and ln.count("|") > 10)
    assert f"{parts['between rounds'] * 1e3:.1f}" in line, line
