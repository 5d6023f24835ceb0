"""index.html beside report.md: the same report as one self-contained page to open in a browser.

It is rendered from report.md itself (markdown-it-py, CommonMark with tables, raw HTML escaped),
so the answers come first and every table and figure is the markdown's; each plot is inlined
as a base64 PNG (the page needs no other file), headings get anchors and a table of contents
follows the first screen (the answers table, the Pareto plot and the warnings at a glance:
reports/render/first_screen.py, which a 1400 px wide window shows without scrolling); the links
to the full CSVs point beside it. A plot the markdown names but the folder lacks shows as a
visible "missing" note, never as a broken image.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

INDEX = "index.html"

STYLE = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2430;
       margin: 0; background: #f6f7f9; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 32px 64px; background: #fff; }
h1 { font-size: 26px; margin-top: 8px; }
h2 { font-size: 20px; margin-top: 36px; border-bottom: 1px solid #dde1e6; padding-bottom: 4px; }
h3 { font-size: 16px; margin-top: 24px; }
nav.toc { background: #f0f3f7; padding: 8px 16px; border-radius: 6px; font-size: 13px; }
nav.toc ol { margin: 4px 0; padding-left: 20px; columns: 2; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 12px; display: block;
        overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #d5dae1; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #eef1f5; position: sticky; top: 0; }
td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #fafbfc; }
img { max-width: 100%; height: auto; display: block; margin: 12px 0;
      border: 1px solid #e3e6ea; }
code { background: #f0f2f5; padding: 0 3px; border-radius: 3px; font-size: 90%; }
.missing { color: #b00020; font-weight: bold; }
/* the first screen: the answers table wraps its long cells instead of scrolling sideways, and
   the Pareto plot below it keeps to what a window shows */
h2#answers + table, h2[id^="answers-"] + table { display: table; width: 100%; }
h2#answers + table td, h2[id^="answers-"] + table td { white-space: normal;
                                                       text-align: left; }
img[alt="pareto"] { max-height: 33vh; width: auto; }
"""
# The table of contents goes before this section (after the first screen), else after the title.
TOC_BEFORE = "summary"


def _slug(text: str, seen: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "section"
    slug, n = base, 2
    while slug in seen:
        slug, n = f"{base}-{n}", n + 1
    seen.add(slug)
    return slug


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _inline_images(tokens: list[Token], folder: Path) -> list[str]:
    """Every image of the markdown as a data URI (in place); the names of those missing."""
    missing = []
    for tok in tokens:
        for child in tok.children or []:
            if child.type != "image":
                continue
            src = str(child.attrGet("src") or "")
            file = folder / src
            if src.endswith(".png") and "/" not in src and file.is_file():
                child.attrSet("src", _data_uri(file))
            else:
                missing.append(src)
                child.type, child.tag, child.children = "html_inline", "", None
                child.content = (f'<span class="missing">[plot {html.escape(src)} missing '
                                 "from the report folder]</span>")
    return missing


def _anchor_headings(tokens: list[Token]) -> list[tuple[int, str, str]]:
    """Ids on every heading; (level, id, text) of each, in order."""
    seen: set[str] = set()
    out = []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            text = tokens[i + 1].content
            slug = _slug(text, seen)
            tok.attrSet("id", slug)
            out.append((int(tok.tag[1]), slug, text))
    return out


def render_html(markdown_text: str, folder: Path) -> str:
    """The page for report.md's text, its plots read from `folder`."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(markdown_text)
    missing = _inline_images(tokens, folder)
    headings = _anchor_headings(tokens)
    body = md.renderer.render(tokens, md.options, {})
    title = next((t for level, _, t in headings if level == 1), "dynamo-bench report")
    toc = "".join(f'<li><a href="#{slug}">{html.escape(text.split(" — ")[0])}</a></li>'
                  for level, slug, text in headings if level == 2)
    nav = f'<nav class="toc"><strong>Sections</strong><ol>{toc}</ol></nav>' if toc else ""
    at = body.find(f'<h2 id="{TOC_BEFORE}">')
    if at < 0:
        at = body.find("</h1>")
        at = at + 5 if at >= 0 else -1
    if at >= 0:
        body = body[:at] + "\n" + nav + "\n" + body[at:]
    note = (f'<p class="missing">{len(missing)} plot(s) missing: {html.escape(", ".join(missing))}'
            "</p>") if missing else ""
    return ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            f"<main>\n{note}{body}</main>\n</body>\n</html>\n")


def write_html(folder: Path) -> Path:
    """Write `folder`/index.html from `folder`/report.md and the plots beside it."""
    page = render_html((folder / "report.md").read_text(), folder)
    path = folder / INDEX
    path.write_text(page)
    return path
