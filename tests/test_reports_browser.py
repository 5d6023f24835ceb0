"""The report's index.html in a real browser: headless Chromium (Debian's `chromium`) renders the
page built from the committed fixture runs to a non-empty, non-blank screenshot, and every plot
image in it loads (naturalWidth > 0, read back from the browser's DOM).

Marked `browser`. Without a Chromium the tests skip with the reason locally; in CI (`CI` or
`DYNAMO_BENCH_CI` set, as .ci/run does, which also installs it) they fail instead.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from reports_fixtures import copy_runs, run_dir

from reports.build import build_report

pytestmark = pytest.mark.browser

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WINDOW = (1280, 2000)
# Appended to a copy of the page: after load, the body says how many images it has and which
# did not decode.
PROBE = """<script>
window.addEventListener("load", () => {
  const imgs = [...document.images];
  const broken = imgs.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.alt);
  document.body.setAttribute("data-images", imgs.length);
  document.body.setAttribute("data-broken", JSON.stringify(broken));
});
</script>"""


def chromium() -> str:
    found = next((p for name in BROWSERS if (p := shutil.which(name))), None)
    if found:
        return found
    reason = "no headless Chromium on PATH (Debian: apt-get install chromium)"
    if os.environ.get("CI") or os.environ.get("DYNAMO_BENCH_CI"):
        pytest.fail(f"{reason}: CI must run the browser test (.ci/run installs it)")
    pytest.skip(reason)


def headless(browser: str, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", f"--user-data-dir={tmp / 'profile'}", *args],
                          capture_output=True, text=True, timeout=180)


def _table(role: str, sha: str) -> dict:
    return {"role": role, "aiconfigurator": "0.12.0", "system": "a100_sxm_40gb",
            "backend": "vllm", "backend_version": "0.14.0", "sha256": sha * 16}


# The timings the demo's rehearsal records (AIConfigurator tables: one for local-agg's workers,
# one per role for local-disagg), so the page carries the demo's long provenance labels.
DEMO_TIMINGS = {"local-agg": [_table("worker", "7bec")],
                "local-disagg": [_table("prefill", "5b36"), _table("decode", "3904")]}


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    root = copy_runs(tmp)
    for stack, tables in DEMO_TIMINGS.items():
        path = run_dir(root, stack) / "manifest.json"
        doc = json.loads(path.read_text())
        doc["attempts"][-1]["target"]["timings"] = {"source": "aiconfigurator",
                                                    "tables": tables}
        path.write_text(json.dumps(doc))
    report = build_report([run_dir(root, "local-agg"), run_dir(root, "local-disagg")],
                          tmp / "out", name="demo", with_compare=True)
    return report.out_dir / "index.html"


def loaded_images(browser: str, page: Path, tmp: Path) -> tuple[int, list[str]]:
    probe = tmp / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    done = headless(browser, tmp, "--virtual-time-budget=15000", "--dump-dom",
                    probe.as_uri())
    body = re.search(r'<body data-images="(\d+)" data-broken="([^"]*)"', done.stdout)
    assert body, f"the probe did not run: {done.stderr[-500:]}"
    return int(body.group(1)), json.loads(html.unescape(body.group(2)))


def test_index_html_renders_to_a_real_screenshot(page, tmp_path):
    browser = chromium()
    shot = tmp_path / "index.png"
    done = headless(browser, tmp_path, f"--screenshot={shot}",
                    f"--window-size={WINDOW[0]},{WINDOW[1]}", page.as_uri())
    assert shot.is_file() and shot.stat().st_size > 50_000, done.stderr[-500:]
    with Image.open(shot) as img:
        assert img.size == WINDOW
        px = np.asarray(img.convert("L"), dtype=float)
    # text, tables and a heading, not one background colour
    assert px.std() > 20 and (px < 100).mean() > 0.005


def test_every_plot_image_loads_in_the_browser(page, tmp_path):
    browser = chromium()
    count, broken = loaded_images(browser, page, tmp_path)
    expected = len(re.findall(r"<img ", page.read_text()))
    assert count == expected >= 6 and broken == []


def test_the_probe_sees_a_broken_image(page, tmp_path):
    """The image check can fail: one plot's data corrupted is reported by its alt text."""
    browser = chromium()
    bad = tmp_path / "bad" / "index.html"
    bad.parent.mkdir()
    text = page.read_text()
    first = re.search(r'<img src="data:image/png;base64,([^"]{16})[^"]*" alt="([^"]*)"', text)
    bad.write_text(text.replace(first.group(1), "AAAAAAAAAAAAAAAA", 1))
    count, broken = loaded_images(browser, bad, tmp_path)
    assert broken == [first.group(2)]


# The first screen: a 1400 px wide window, 900 px of page. The answers table and the Pareto
# plot are outlined in colours the report never uses, so the screenshot itself shows whether
# each lies whole within it (its outline's top and bottom edges both in the picture).
FIRST_SCREEN = (1400, 900)
OUTLINES = {"answers": (255, 0, 255), "pareto": (0, 255, 255)}
MARK = """<style>
h2[id^="answers"] + table { outline: 4px solid rgb(255, 0, 255); outline-offset: 2px; }
img[alt="pareto"] { outline: 4px solid rgb(0, 255, 255); outline-offset: 2px; }
</style>"""
# After load: whether the Stacks table scrolls sideways (its content wider than its box).
STACKS_PROBE = """<script>
window.addEventListener("load", () => {
  let t = document.querySelector("h2#stacks");
  while (t && t.tagName !== "TABLE") t = t.nextElementSibling;
  document.body.setAttribute("data-stacks", t ? `${t.scrollWidth} ${t.clientWidth}` : "none");
});
</script>"""


def outline_box(px: np.ndarray, rgb: tuple[int, int, int]) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) rows and columns of the outline drawn in `rgb`, None if it is
    not in the picture."""
    hit = np.all(px == np.array(rgb, dtype=px.dtype), axis=-1)
    rows, cols = np.nonzero(hit.sum(axis=1) > 50)[0], np.nonzero(hit.sum(axis=0) > 20)[0]
    if not len(rows) or not len(cols):
        return None
    return int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])


def first_screen_shot(browser: str, page: Path, tmp: Path) -> np.ndarray:
    marked = tmp / "marked.html"
    marked.write_text(page.read_text().replace("</head>", MARK + "</head>"))
    shot = tmp / "first.png"
    done = headless(browser, tmp, f"--screenshot={shot}",
                    f"--window-size={FIRST_SCREEN[0]},{FIRST_SCREEN[1]}", marked.as_uri())
    assert shot.is_file(), done.stderr[-500:]
    with Image.open(shot) as img:
        assert img.size == FIRST_SCREEN
        return np.asarray(img.convert("RGB"))


def test_the_first_screen_holds_the_answers_table_and_the_pareto_plot(page, tmp_path):
    """At 1400 x 900 the report opens on its answers: the verdict table and the Pareto plot
    below it, each whole (both edges of its outline in the screenshot), before any scrolling."""
    px = first_screen_shot(chromium(), page, tmp_path)
    boxes = {name: outline_box(px, rgb) for name, rgb in OUTLINES.items()}
    assert boxes["answers"] is not None and boxes["pareto"] is not None, boxes
    (a_top, a_bottom, _, _), (p_top, p_bottom, p_left, p_right) = boxes["answers"], \
        boxes["pareto"]
    # whole: the outline's bottom edge is drawn, above the picture's last rows
    assert 0 < a_top < a_bottom < p_top < p_bottom < FIRST_SCREEN[1] - 2, boxes
    assert p_right - p_left > 500 and p_bottom - p_top > 200, boxes   # a plot, not a stamp


def test_the_outline_check_sees_a_plot_below_the_first_screen(page, tmp_path):
    """The check can fail: with the plot pushed down by a tall block, its outline's bottom
    edge leaves the picture."""
    tall = tmp_path / "tall" / "index.html"
    tall.parent.mkdir()
    tall.write_text(page.read_text().replace('<h2 id="answers', '<div style="height:700px">'
                                             '</div><h2 id="answers', 1))
    px = first_screen_shot(chromium(), tall, tmp_path / "tall")
    box = outline_box(px, OUTLINES["pareto"])
    assert box is None or box[1] >= FIRST_SCREEN[1] - 2


def test_the_stacks_table_does_not_scroll_sideways(page, tmp_path):
    """One cell once held a whole provenance sentence and the table scrolled sideways; the
    long words now sit below it."""
    probe = tmp_path / "stacks.html"
    probe.write_text(page.read_text().replace("</body>", STACKS_PROBE + "</body>"))
    done = headless(chromium(), tmp_path, f"--window-size={FIRST_SCREEN[0]},{FIRST_SCREEN[1]}",
                    "--virtual-time-budget=15000", "--dump-dom", probe.as_uri())
    found = re.search(r'data-stacks="(\d+) (\d+)"', done.stdout)
    assert found, done.stderr[-500:]
    scroll, client = map(int, found.groups())
    assert scroll <= client
