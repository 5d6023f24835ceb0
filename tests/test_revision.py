"""`model.revision` and `serving.speculative.draftRevision` take a 40-hex commit or a git ref
name (stacks/config/revision.py: git check-ref-format's rules), refused when the stack loads
with the field and the fix, not by Hugging Face after the cluster is up."""

from __future__ import annotations

import pytest
from stack_variants import check, copy_shipped, edit, variant_config, write_stack

from stacks.config.revision import ref_name_problem

F = "dynamo-bench:"
GOOD = ["main", "v1.0", "refs/pr/1", "release/2026-09", "a" * 40]
BAD = {"main; rm -rf /": "' '", "": "empty", "..": "'..'", "a..b": "'..'", "x.lock": ".lock",
       "/main": "'/'", "main/": "'/'", "a//b": "'//'", "main.": "ends with '.'",
       "@": "'@' alone", "a@{1}": "'@{'", ".hidden": "begins with '.'", "a~1": "'~'",
       "a^": "'^'", "a:b": "':'", "a?": "'?'", "a*": "'*'", "a[": "'['", "a\\b": "'\\\\'",
       "tab\there": "'\\t'", "del\x7f": "'\\x7f'"}


@pytest.mark.parametrize("name", GOOD)
def test_a_ref_name_or_commit_is_accepted(name):
    assert ref_name_problem(name) is None


@pytest.mark.parametrize("name", BAD)
def test_what_git_refuses_as_a_ref_name_is_refused(name):
    why = ref_name_problem(name)
    assert why is not None and BAD[name] in why, why


def test_stacks_check_refuses_a_revision_no_hub_would_resolve(tmp_path):
    stacks_dir = copy_shipped(tmp_path)
    write_stack(stacks_dir, "rev-shell", variant_config(
        "agg-a100", edit("model", {"id": "Qwen/Qwen3-30B-A3B", "revision": "main; rm -rf /"})))
    write_stack(stacks_dir, "rev-draft", variant_config(
        "agg-b200-axk2", edit("serving.speculative.draftRevision", "main; rm -rf /")))
    write_stack(stacks_dir, "rev-branch", variant_config(
        "agg-a100", edit("model", {"id": "Qwen/Qwen3-30B-A3B", "revision": "main"})))
    code, out = check(stacks_dir, "rev-shell")
    assert code == 2, out
    assert (f"{F}model.revision: revision 'main; rm -rf /' is neither a 40-hex commit nor a "
            "git ref name: it holds ' '") in out, out
    assert "use the commit id from the model's Hugging Face page" in out
    code, out = check(stacks_dir, "rev-draft")
    assert code == 2 and f"{F}serving.speculative.draftRevision: revision 'main; rm -rf /'" \
        in out, out
    code, out = check(stacks_dir, "rev-branch")
    assert code == 0, out
