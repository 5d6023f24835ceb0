"""A Hugging Face revision as a stack states it: a 40-hex commit or a valid git ref name.

The Hub resolves `revision` as git does (a commit, a branch such as `main`, a tag, `refs/pr/1`),
and refuses anything else only after the cluster is up (the download Job, then every worker's
`--revision`). So a stack's `model.revision` and `serving.speculative.draftRevision` take what
`git check-ref-format --allow-onelevel` accepts (git-scm.com/docs/git-check-ref-format,
rules 1 and 3-10; rule 2, at least one '/', is what --allow-onelevel lifts: `main` is a branch
name) or a full commit id: `main; rm -rf /` (a space) is refused when the stack loads, with the
field and the fix.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

COMMIT = re.compile(r"^[0-9a-f]{40}$")
# rule 4: control characters (< \040, \177), space, ~ ^ :; rule 5: ? * [; rule 10: backslash
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def ref_name_problem(name: str) -> str | None:
    """Why `name` is not a git ref name (git check-ref-format --allow-onelevel), or None."""
    bad = _BAD_CHARS.search(name)
    if not name:
        return "it is empty"
    if bad:
        return f"it holds {bad.group()!r}, which no git ref name may (rules 4, 5, 10)"
    if name == "@":
        return "'@' alone is not a ref name (rule 9)"
    if "@{" in name:
        return "it holds '@{' (rule 8)"
    if ".." in name:
        return "it holds '..' (rule 3)"
    if name.startswith("/") or name.endswith("/") or "//" in name:
        return "it begins or ends with '/', or holds '//' (rule 6)"
    if name.endswith("."):
        return "it ends with '.' (rule 7)"
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return "a '/'-separated part begins with '.' or ends with '.lock' (rule 1)"
    return None


def _revision(value: str) -> str:
    if COMMIT.match(value):
        return value
    why = ref_name_problem(value)
    if why is not None:
        raise ValueError(f"revision {value!r} is neither a 40-hex commit nor a git ref name: "
                         f"{why}: use the commit id from the model's Hugging Face page (Files "
                         "and versions), or a branch or tag name such as main")
    return value


# A field of this type is a str the Hub and git both accept as a revision.
Revision = Annotated[str, AfterValidator(_revision)]
