"""The explore's answer in a report (reports/explore_section.py): the sweep's top candidates per
SLO at their operating points, in rank order, labelled as explore.md labels them; a folder
without the explore's files is refused naming the command that makes them."""

from __future__ import annotations

import pandas as pd
import pytest

from reports.render import explore_section as es

LABEL = "SIMULATED (DynoSim, ai-dynamo 1.6.1, AIConfigurator 0.12.0 a100_sxm_40gb/vllm 0.14.0)"


def _folder(tmp_path):
    rows = []
    for slo in ("sla-a", "sla-b"):
        for i, (rank, usd) in enumerate([(2, 0.7), (1, 0.6), (None, None), (3, 0.9), (4, 1.0)]):
            rows.append({"candidate": f"c{i}", "workload": "concurrency_sweep", "slo": slo,
                         "rank": rank, "usd_per_1m_output_tokens": usd, "gpus": 16,
                         "concurrency": 64 * (i + 1), "pareto": rank == 1})
        rows.append({"candidate": "m", "workload": "multi_turn", "slo": slo, "rank": 1})
    pd.DataFrame(rows).to_csv(tmp_path / "explore.csv", index=False)
    (tmp_path / "explore.md").write_text(f"# Explore base-x\n\nEvery figure: {LABEL}.\n")
    return tmp_path


def test_the_section_shows_the_sweeps_top_three_per_slo_in_rank_order(tmp_path):
    table, label, base = es.read(_folder(tmp_path))
    assert (label, base) == (LABEL, "base-x")
    top = es.top_rows(table, "sla-a")
    assert list(top["candidate"]) == ["c1", "c0", "c3"]        # ranks 1, 2, 3; unranked out
    text = es.section(table, label, base)
    assert f"## Explore base-x: the configurations its node groups hold — {LABEL}" in text
    assert "### sla-a" in text and "### sla-b" in text and "MEASURED" not in text
    assert text.index("| c1 ") < text.index("| c0 ") and "| c4 " not in text
    assert "| 1 | c1 | 16 | 128 |" in text                      # counts without decimals
    assert "| m " not in text                                    # the sweep's only


def test_a_folder_without_the_explore_is_refused_naming_the_command(tmp_path):
    with pytest.raises(es.ExploreMissing, match="python -m stacks explore <base> --out DIR"):
        es.read(tmp_path)
