"""A report people read: report.md opens with its answers (the verdict table, the Pareto plot,
the warnings in one short line each) and then its summary, shows one short table per question
(at most ten columns, the outcome counts kept in `completed/attempted`, the full CSV linked and
beside it), and index.html is the same report as one self-contained page (plots inline, no other
file or host needed). The browser test (tests/test_reports_browser.py) renders it for real."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from reports_fixtures import copy_runs, run_dir

from reports.build import build_report
from reports.render.html import render_html
from reports.render.md_columns import MAX_COLUMNS, ci, short_columns, with_display_columns


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readable")
    root = copy_runs(tmp)
    return build_report([run_dir(root, s, r) for s in ("local-agg", "local-disagg",
                                                        "local-agg-kv")
                         for r in ("fixture", "fixture-repeats")], tmp / "out", name="demo",
                        with_compare=True)


def md_tables(md: str) -> list[list[str]]:
    """The header cells of every markdown table."""
    return [[c.strip() for c in line.strip("|").split(" | ")]
            for prev, line in zip(md.splitlines(), md.splitlines()[1:], strict=False)
            if line.startswith("|") and not prev.startswith("|")]


def test_report_md_opens_with_its_answers_then_the_summary(report):
    md = (report.out_dir / "report.md").read_text()
    # the first table is the answers' (verdicts with their intervals), then the Pareto plot
    assert md.index("## Answers") < md.index("| question | compared | difference [95 % CI] |")
    assert md.index("|") > md.index("## Answers")
    assert md.index("| question |") < md.index("![pareto]") < md.index("## Summary")
    assert md.index("**Warnings at a glance**") < md.index("## Summary")
    assert md.index("**Headline answers") < md.index("## Stacks")


def test_every_markdown_table_has_at_most_ten_columns(report):
    md = (report.out_dir / "report.md").read_text()
    widths = [len(t) for t in md_tables(md)]
    assert len(widths) >= 10 and max(widths) <= MAX_COLUMNS


def test_narrowed_tables_link_their_full_csv(report):
    md = (report.out_dir / "report.md").read_text()
    sweep = pd.read_csv(report.out_dir / "concurrency_sweep.csv")
    assert {"aiperf_ttft_p50_ms", "ttft_p90_ms", "percentile_samples", "attempted",
            "failed"} <= set(sweep.columns)           # the CSV keeps every column
    assert f"All {len(sweep.columns)} columns: [concurrency_sweep.csv](concurrency_sweep.csv)" \
        in md
    section = md.split("## Concurrency sweep")[1].split("\n## ")[0]
    (header, *_) = md_tables(section)
    assert header[:4] == ["stack", "concurrency", "flag", "completed/attempted"]
    # each percentile with its 95 % interval (reports/tables/intervals.py)
    assert {ci(c) for c in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms")} \
        <= set(header)


def test_completed_attempted_keeps_every_outcome_class():
    t = pd.DataFrame({"stack": ["a", "b"], "attempted": [30, 10], "completed": [28, 10],
                      "failed": [1, 0], "truncated": [1, 0], "cancelled": [0, 0],
                      "step_flag": ["FAILED: 1 truncated stream; CLIENT-BOUND: 3.1 < 4", ""],
                      "aggregated_attempted": [5, 5], "aggregated_completed": [4, 5],
                      "aggregated_failed": [0, 0], "aggregated_truncated": [0, 0],
                      "aggregated_cancelled": [1, 0]})
    out = with_display_columns(t)
    assert out["completed/attempted"].tolist() == ["28/30 (1 failed, 1 truncated)", "10/10"]
    assert out["aggregated completed/attempted"].tolist() == ["4/5 (1 cut at end)", "5/5"]
    assert out["flag"].tolist() == ["FAILED; CLIENT-BOUND", ""]


def test_a_table_without_a_chosen_list_is_folded_to_ten_columns():
    wide = pd.DataFrame(columns=["stack", "step", "step_flag", "attempted", "completed",
                                 "failed", "truncated", "cancelled", "percentile_samples",
                                 *[f"m{i}_p50_ms" for i in range(8)], "m0_p90_ms",
                                 "aiperf_x", "m0_p50_ms_min", "usable"])
    cols = short_columns("a_new_table", wide)
    assert cols == ["stack", "step", "flag", "completed/attempted", "m0_p50_ms", "m1_p50_ms",
                    "m2_p50_ms", "m3_p50_ms", "m4_p50_ms", "m5_p50_ms"]


def test_index_html_is_the_same_report_self_contained(report):
    page = (report.out_dir / "index.html").read_text()
    md = (report.out_dir / "report.md").read_text()
    # every plot inline, nothing fetched from elsewhere
    srcs = re.findall(r'src="([^"]*)"', page)
    assert len(srcs) == len(re.findall(r"!\[[^\]]*\]\([^)]+\.png\)", md)) >= 6
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "http://" not in page and "https://" not in page and "<link" not in page
    # the same sections in the same order, the answers first, the same tables
    md_heads = re.findall(r"^## (.+)$", md, flags=re.M)
    html_heads = re.findall(r"<h2 id=\"[^\"]+\">(.+?)</h2>", page)
    assert [h.replace("&amp;", "&") for h in html_heads] == md_heads
    assert html_heads[0].startswith("Answers") and html_heads[1] == "Summary"
    assert page.index(">Answers") < page.index("<table") < page.index(">Summary</h2>")
    # the table of contents after the first screen, before the summary
    assert page.index("<table") < page.index('<nav class="toc">') < page.index(">Summary</h2>")
    assert page.count("<table>") == len(md_tables(md))
    assert '<a href="concurrency_sweep.csv">concurrency_sweep.csv</a>' in page


def test_a_missing_plot_is_said_never_a_broken_image(tmp_path):
    (tmp_path / "there.png").write_bytes(b"\x89PNG fake")
    page = render_html("# r\n\n## Summary\n\n![pareto](gone.png)\n\n![ok](there.png)\n"
                       "\nnote on `<variant>.<base>` and <b>raw</b>\n", tmp_path)
    assert "[plot gone.png missing from the report folder]" in page
    assert "1 plot(s) missing: gone.png" in page
    assert len(re.findall(r"<img ", page)) == 1
    # raw HTML in the markdown is text, never markup
    assert "<b>raw</b>" not in page and "&lt;b&gt;raw&lt;/b&gt;" in page
