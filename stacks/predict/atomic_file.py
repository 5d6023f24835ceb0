"""Cache files written whole (tmp file, then a rename): `make demo` builds timing tables and asks
AIConfigurator beside its live campaign, so two processes may write or read one cache entry at
once; a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
