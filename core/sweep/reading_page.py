"""The reading page of a sweep: HTML (self-contained, opens in any browser) and a Markdown
fallback, from `core.sweep.reading.passages`.

Everything the model wrote, and every name the JSON holds, is escaped: the HTML through
jinja2's autoescape (one template, no external asset: the styles are inline and the origin
colours are the chat's palette, core/chat/palette.py, as hex), the Markdown by
`md_escape`. Each column's text is its tokens grouped into runs of one origin; the token
where a cell first leaves target-only's text carries a visible mark (▶ and its position) and
the text after it is shaded.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from core.chat.palette import COMMITTED_STYLES, ORIGIN_HELP
from core.sweep.reading import Column, Passage, passages

HTML_SUFFIX, MD_SUFFIX = ".reading.html", ".reading.md"


def reading_paths(beside: str | Path) -> tuple[Path, Path]:
    """The page and its Markdown beside `beside` (a sweep's JSON or Markdown): s.json gives
    s.reading.html and s.reading.md."""
    p = Path(beside).expanduser()
    stem = p.name[: -len(p.suffix)] if p.suffix else p.name
    return p.with_name(stem + HTML_SUFFIX), p.with_name(stem + MD_SUFFIX)


def origin_colours() -> dict[str, tuple[str, bool]]:
    """Each committed origin's colour (hex) and boldness, from the chat's palette."""
    out = {}
    for origin, style in COMMITTED_STYLES.items():
        colour = style.color.get_truecolor().hex if style.color is not None else "#eeeeee"
        out[origin] = (colour, bool(style.bold))
    return out


def runs(col: Column) -> list[dict[str, Any]]:
    """The column's tokens as runs of one origin, split at the divergence: each run's text,
    origin, first and last token index, and whether it lies after the divergence; a run
    {"mark": True} stands where the column first leaves target-only's text."""
    out: list[dict[str, Any]] = []
    for i, (piece, origin) in enumerate(col.tokens):
        after = col.diverge is not None and i >= col.diverge
        if col.diverge == i:
            out.append({"mark": True})
        last = out[-1] if out else None
        if last and not last.get("mark") and last["origin"] == origin and last["after"] == after:
            last["text"] += piece
            last["end"] = i
        else:
            out.append({"mark": False, "text": piece, "origin": origin, "start": i, "end": i,
                        "after": after})
    if col.diverge is not None and col.diverge >= len(col.tokens):
        out.append({"mark": True})  # it stops where target-only's goes on
    return out


_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
:root { color-scheme: dark; }
body { background: #161616; color: #e4e4e4; font: 15px/1.45 system-ui, sans-serif; margin: 1.5em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; border-top: 1px solid #444; padding-top: .8em; }
code, .text, pre { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; }
.legend span.sw { padding: 0 .4em; margin-right: 1em; }
.columns { display: grid; grid-auto-flow: column; grid-auto-columns: minmax(24em, 1fr); gap: 1em; overflow-x: auto; }
.column { background: #1f1f1f; border: 1px solid #3a3a3a; border-radius: 6px; padding: .6em .8em; min-width: 0; }
.column.baseline { border-color: #777; }
.column h3 { font-size: 1em; margin: 0 0 .2em; }
.roles { color: #ffd75f; font-size: .85em; } .nums, .where { color: #aaa; font-size: .85em; margin: .15em 0; }
.pass { color: #5fd75f; } .fail { color: #ff5f5f; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin-top: .5em; }
.after { background: rgba(255, 215, 0, .07); }
mark.diverge { background: #ffd700; color: #000; font-weight: bold; border-radius: 3px; padding: 0 .25em; margin: 0 .15em; }
{% for origin, (colour, bold) in colours.items() %}.o-{{ origin }} { color: {{ colour }};{% if bold %} font-weight: bold;{% endif %} }
{% endfor %}</style></head>
<body>
<h1>{{ title }}</h1>
{% if command %}<p>Command: <code>{{ command }}</code></p>{% endif %}
{% if provenance %}<ul>{% for line in provenance %}<li>{{ line }}</li>{% endfor %}</ul>{% endif %}
<p>For each prompt and seed: target-only's text, then the chosen cells' texts for the same
seed (the recommended, the fastest, and the fastest cell at each TV budget). Each token is
coloured by its origin, as in the chat; <mark class="diverge">▶</mark> marks the token where a
cell's text first leaves target-only's, and the text after it is shaded.</p>
<p class="legend">{% for origin, help in legend %}<span class="sw o-{{ origin }}" title="{{ help }}">■ {{ origin }}</span>{% endfor %}</p>
{% if recommendation %}<ul>{% for line in recommendation %}<li>{{ line }}</li>{% endfor %}</ul>{% endif %}
{% if not passages %}<p>This sweep kept no texts to read.</p>{% endif %}
{% for p in passages %}
<section class="passage" data-prompt="{{ p.prompt }}" data-seed="{{ p.seed }}">
<h2>{{ p.prompt }} · T = {{ "%g"|format(p.temperature) }} · seed {{ p.seed }}</h2>
<div class="columns">
{% for c in p.columns %}<article class="column{% if c.baseline %} baseline{% endif %}" data-cell="{{ c.cell_id }}">
<h3>{{ c.name }}</h3>
{% if c.roles %}<div class="roles">{{ c.roles|join(" · ") }}</div>{% endif %}
{% if c.numbers %}<div class="nums">{{ c.numbers|join(" · ") }}</div>{% endif %}
<div class="where">{{ c.divergence_text() }}{% if c.check is not none %} · check <span class="{{ 'pass' if c.check else 'fail' }}">{{ "passed" if c.check else "failed" }}</span>{% endif %}{% if c.other_texts %} · {{ c.other_texts }} other text(s) in later invocations{% endif %}</div>
<div class="text">{% for r in runs(c) %}{% if r.mark %}<mark class="diverge" title="leaves target-only's text here">▶{{ c.diverge_at }}</mark>{% else %}<span class="o-{{ r.origin or 'unknown' }}{% if r.after %} after{% endif %}" title="{{ r.origin or 'origin unknown' }}, token {{ r.start }}{% if r.end != r.start %}-{{ r.end }}{% endif %}">{{ r.text }}</span>{% endif %}{% endfor %}</div>
</article>
{% endfor %}</div>
</section>
{% endfor %}
</body></html>
"""


def reading_html(data: dict[str, Any]) -> str:
    """The self-contained HTML page of `data` (a sweep's JSON dict)."""
    import jinja2

    from core.sweep.report import provenance_lines, recommendation_lines, scrub_paths

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.from_string(_TEMPLATE)
    colours = origin_colours()
    return template.render(
        title="Sweep: the texts side by side",
        command=scrub_paths(str(data["command"]), data) if data.get("command") else None,
        provenance=[line[2:] for line in provenance_lines(data) if line.startswith("- ")],
        recommendation=recommendation_lines(data) if data.get("frontier") else [],
        colours=colours,
        legend=[(o, ORIGIN_HELP.get(o, o)) for o in colours],
        passages=passages(data),
        runs=runs,
    )


# -- Markdown ---------------------------------------------------------------------------------

_MD_SPECIAL = "\\`*_{}[]()#+!|~>"


def md_escape(text: str) -> str:
    """Text as literal Markdown inside a table cell: HTML escaped, Markdown's punctuation
    backslashed, line breaks as <br>."""
    out = html.escape(text, quote=False)
    out = "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in out)
    return out.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def _md_text(col: Column) -> str:
    if col.missing:
        return "*no text for this seed*"
    if col.diverge is None:
        return md_escape(col.text)
    before = "".join(t for t, _ in col.tokens[: col.diverge])
    after = "".join(t for t, _ in col.tokens[col.diverge :])
    return f"{md_escape(before)}**▶{col.diverge_at}**{md_escape(after)}"


def _md_passage(p: Passage) -> list[str]:
    cols = p.columns
    head = [md_escape(c.name) for c in cols]
    about = []
    for c in cols:
        bits = [*(md_escape(r) for r in c.roles), *(md_escape(n) for n in c.numbers),
                md_escape(c.divergence_text())]
        if c.check is not None:
            bits.append("check passed" if c.check else "check **failed**")
        about.append("<br>".join(bits))
    return [f"### {md_escape(p.prompt)}, T = {p.temperature:g}, seed {p.seed}\n",
            "| " + " | ".join(head) + " |", "|" + "---|" * len(cols),
            "| " + " | ".join(about) + " |",
            "| " + " | ".join(_md_text(c) for c in cols) + " |", ""]


def reading_markdown(data: dict[str, Any]) -> str:
    """The Markdown fallback: the same passages as tables of one column per text, the
    divergence marked **▶N** (origins are coloured in the HTML page only)."""
    out = ["# Sweep: the texts side by side\n",
           "For each prompt and seed, target-only's text and the chosen cells' (the "
           "recommended, the fastest, the fastest at each TV budget), the same seed for every "
           "column; **▶N** marks where a text first leaves target-only's (token N). Each "
           "token's origin is coloured in the HTML page beside this file.\n"]
    found = passages(data)
    if not found:
        out.append("This sweep kept no texts to read.\n")
    for p in found:
        out += _md_passage(p)
    return "\n".join(out) + "\n"
