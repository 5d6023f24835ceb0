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


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    root = copy_runs(tmp)
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
