"""A conversation to token ids through the model's chat template, rendered under bounds.

Why not `tokenizer.apply_chat_template`: the template is code from the model file (a GGUF's
metadata, a folder's tokenizer_config.json), and transformers renders it without a bound on
time or size, so a template that loops ran forever and a broken one was a Jinja traceback.
And it tokenised the rendered text whole, so `<|im_end|><|im_start|>` typed in a message
became control tokens: a user could forge turns.

Here the template renders in jinja2's ImmutableSandboxedEnvironment (as transformers does,
with its globals), under a deadline and an output bound; a failure names the model and falls
back to the plain `role: content` layout with a warning (the CLIs print it, the app shows it).
Each message's text goes through the template as a placeholder and is tokenised on its own
with special tokens split, so only the template's own markers are control tokens, unless
`specials_in_text` says the user's markers are meant.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

log = logging.getLogger(__name__)

RENDER_SECONDS = 2.0  # a template renders in milliseconds; a loop past this is a broken one
RENDER_CHARS = 4_000_000  # output chars beyond the messages' own; more is a runaway loop
_OPEN, _CLOSE = "\ue000", "\ue001"  # private-use marks around a placeholder index


class TemplateFailure(Exception):
    """The template could not render within its bounds; the message says why."""


def chat_prompt_ids(
    tokenizer: Any,
    messages: Sequence[dict[str, str]],
    *,
    add_generation_prompt: bool = True,
    model: str | None = None,
    specials_in_text: bool = False,
    notice: Callable[[str], None] | None = None,
) -> list[int]:
    """Token ids of a conversation rendered by the model's chat template, ready to answer
    (`add_generation_prompt=False`: without the answer's header, for per-message spans).

    A template that fails is said once per model and template: to `notice` (the CLIs print
    it), else as a WARNING of this module's logger (the app's bridge shows core's warnings)."""
    template = _template_of(tokenizer)
    if template is not None:
        try:
            return _templated_ids(tokenizer, template, messages, add_generation_prompt,
                                  specials_in_text)
        except TemplateFailure as exc:
            key = (model, template)
            if key not in _WARNED:
                _WARNED.add(key)
                text = (f"The chat template of {model or 'the model'} could not be used ({exc}); "
                        "the plain 'role: content' layout is used instead.")
                if notice is not None:
                    notice(text)
                else:
                    log.warning("%s", text)
    return _plain_ids(tokenizer, messages, add_generation_prompt, specials_in_text)


_WARNED: set[tuple[str | None, str]] = set()  # a failed template is said once, not every turn


def _template_of(tokenizer: Any) -> str | None:
    if getattr(tokenizer, "has_chat_template", True) is False:
        return None
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named templates: the default one
        template = template.get("default")
    return template if isinstance(template, str) and template else None


def _encode(tokenizer: Any, text: str, user: bool, specials_in_text: bool) -> list[int]:
    """Ids of one piece; a user's piece with its special-token spellings kept as text."""
    if not text:
        return []
    if user and not specials_in_text:
        try:
            return [int(i) for i in tokenizer.encode(text, add_special_tokens=False,
                                                     split_special_tokens=True)]
        except TypeError:  # a tokenizer without the option has no special tokens to split
            pass
    return [int(i) for i in tokenizer.encode(text, add_special_tokens=False)]


def _plain_ids(
    tokenizer: Any, messages: Sequence[dict[str, str]], header: bool, specials_in_text: bool
) -> list[int]:
    ids: list[int] = []
    for m in messages:
        ids += _encode(tokenizer, f"{m['role']}: ", False, specials_in_text)
        ids += _encode(tokenizer, str(m["content"]), True, specials_in_text)
        ids += _encode(tokenizer, "\n", False, specials_in_text)
    return ids + (_encode(tokenizer, "assistant: ", False, specials_in_text) if header else [])


def _templated_ids(
    tokenizer: Any,
    template: str,
    messages: Sequence[dict[str, str]],
    header: bool,
    specials_in_text: bool,
) -> list[int]:
    texts = [str(m["content"]) for m in messages]
    stand_ins = [{**m, "content": f"{_OPEN}{i}{_CLOSE}"} for i, m in enumerate(messages)]
    specials = getattr(tokenizer, "special_tokens_map", None) or {}
    context = {k: v for k, v in specials.items() if isinstance(v, str)}
    rendered = render_bounded(template, messages=stand_ins, add_generation_prompt=header,
                              **context)
    ids: list[int] = []
    rest = rendered
    while (start := rest.find(_OPEN)) >= 0:
        end = rest.find(_CLOSE, start)
        index = rest[start + 1 : end] if end > 0 else ""
        if not index.isdigit() or int(index) >= len(texts):
            raise TemplateFailure("it changed a message's text in a way this tool cannot follow")
        ids += _encode(tokenizer, rest[:start], False, specials_in_text)
        ids += _encode(tokenizer, texts[int(index)], True, specials_in_text)
        rest = rest[end + 1 :]
    return ids + _encode(tokenizer, rest, False, specials_in_text)


def render_bounded(template: str, *, seconds: float = RENDER_SECONDS,
                   chars: int = RENDER_CHARS, **context: Any) -> str:
    """The template rendered in the sandbox, or TemplateFailure: a syntax error, an error it
    raises, a render past `seconds` (checked on every line the template's code runs) or an
    output past `chars`."""
    import jinja2

    try:
        compiled = _compiled(template)
    except jinja2.TemplateError as exc:
        raise TemplateFailure(f"it does not parse: {_first_line(exc)}") from None
    deadline = time.monotonic() + seconds
    previous = sys.gettrace()

    def tracer(frame: Any, event: str, arg: Any) -> Callable[..., Any] | None:
        if time.monotonic() > deadline:
            raise TemplateFailure(f"it ran past {seconds:g} s")
        return tracer

    out: list[str] = []
    size = 0
    sys.settrace(tracer)
    try:
        for chunk in compiled.generate(**context):
            size += len(chunk)
            if size > chars:
                raise TemplateFailure(f"it wrote more than {chars:,} characters")
            out.append(chunk)
    except TemplateFailure:
        raise
    except RecursionError:
        raise TemplateFailure("it recursed too deep") from None
    except Exception as exc:  # raise_exception(), undefined names, type errors, ...
        raise TemplateFailure(f"{type(exc).__name__}: {_first_line(exc)}") from None
    finally:
        sys.settrace(previous)
    return "".join(out)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0].rstrip(".") if text else type(exc).__name__


@lru_cache(maxsize=8)
def _compiled(template: str) -> Any:
    """The template compiled in transformers' kind of sandbox: its globals and filters, the
    loop controls and the `generation` tag, and `*`/`**` bounded so one operation cannot
    allocate gigabytes between two traced lines."""
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):  # transformers' assistant-mask tag: here its body as is
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Callable[[], str]) -> str:
            return caller()

    class Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**"])

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**" and isinstance(right, int) and abs(right) > 64:
                raise TemplateFailure("it raises a number to a huge power")
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, str | list | tuple) and isinstance(n, int) \
                            and len(seq) * n > RENDER_CHARS:
                        raise TemplateFailure("it repeats a text past the output bound")
            return super().call_binop(context, operator, left, right)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = Bounded(trim_blocks=True, lstrip_blocks=True,
                  extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)
