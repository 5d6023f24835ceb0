"""Scalars whose type or value depends on which YAML reader reads the stack file.

`stacks check` reads a stack file with PyYAML (YAML 1.1); `pulumi up` reads the same file with
the Pulumi CLI's Go reader, which has been gopkg.in/yaml.v2 (pulumi/pulumi
sdk/go/common/encoding/marshal.go) and YAML 1.2 readers (gopkg.in/yaml.v3) take only
true/false as booleans. Their readings differ for plain (unquoted) scalars such as:

- `y`, `n` (yaml.v2: booleans; PyYAML, YAML 1.2: strings) and `yes`, `no`, `on`, `off`
  (PyYAML, yaml.v2: booleans; YAML 1.2: strings);
- `010` (octal 8 in YAML 1.1, 10 in YAML 1.2), `1_000` (1000, or a string), `1:30`
  (PyYAML's base-60 integer 90, a string to the Go readers).

With strict types (stacks/config/schema_base.py) one reader's boolean is the other's refused
string, or both take a number that differs: so a spelling like these is refused where it is
written, with the spelling every reader reads alike. Quoted scalars are strings to every reader.
"""

from __future__ import annotations

import re

import yaml

_BOOL_TAG = "tag:yaml.org,2002:bool"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
# YAML 1.2's core-schema booleans: the only spellings every reader takes as true or false.
CORE_BOOLEANS = ("true", "True", "TRUE", "false", "False", "FALSE")
# The other boolean words of YAML 1.1 (PyYAML: yes/no/on/off) and yaml.v2 (resolve.go: also y/n),
# in the letter cases they take.
OTHER_BOOLEANS = frozenset(f(w) for w in ("y", "n", "yes", "no", "on", "off")
                           for f in (str.lower, str.capitalize, str.upper))
_PLAIN_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")


def ambiguous(node: yaml.ScalarNode) -> tuple[str, str] | None:
    """(what is wrong, the fix) for a plain scalar YAML readers read differently, else None."""
    # A plain scalar's style is None (PyYAML's loader) or '' (LibYAML's); any other style is
    # quoted or a block scalar: a string to every reader.
    if node.style not in (None, ""):
        return None
    text = node.value
    if node.tag == _BOOL_TAG and text in CORE_BOOLEANS:
        return None
    if node.tag == _BOOL_TAG or text in OTHER_BOOLEANS:
        meaning = "true" if text.lower() in ("y", "yes", "on") else "false"
        return (f"'{text}' is a boolean to some YAML readers and a string to others "
                "(stacks check and pulumi up could read it differently)",
                f"write {meaning} (or quote it, \"{text}\", if you mean the text)")
    if node.tag == _INT_TAG and not _PLAIN_INT.fullmatch(text):
        return (f"'{text}' is a number YAML readers do not all read alike (a leading zero, "
                "'_', ':' or a 0x/0b/0o prefix: octal, digit groups, base 60, or text)",
                "write the number in plain decimal digits (e.g. 8, 1000, 90)")
    if node.tag == _FLOAT_TAG and ("_" in text or ":" in text):
        return (f"'{text}' is a number YAML readers do not all read alike ('_' or ':' in it)",
                "write the number without '_' or ':'")
    return None
