"""Read stack files and Pulumi config into a validated StackConfig (the edge of the system).

Every validation failure becomes a `Problem` naming the config field (as the user writes it in
the stack file) and the fix, so `stacks check` can list all of them at once. The file itself
is vetted first (stacks.config.stack_file: encoding, duplicate keys, namespaces, empty values).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from stacks.config import stack_file as files
from stacks.config.errors import Problem, StackError
from stacks.config.schema import CONFIG_KEYS, StackConfig
from stacks.config.stack_file import PROJECT, SECRET_KEYS, StackFile

__all__ = ["PROJECT", "P", "SECRET_KEYS", "STACKS_DIR", "Problem", "StackError", "StackFile",
           "all_stack_names", "base_candidates", "derived_stack_names", "load_stack",
           "load_stack_file",
           "parse_config", "problems_from_validation", "read_stack_file", "stack_file"]

# Prefix of a stack-config field path in a Problem (`dynamo-bench:serving.workers[0]...`).
P = f"{PROJECT}:"
STACKS_DIR = Path(__file__).resolve().parents[1]

# Each `pattern=` of the schema, said in words (a test checks every pattern has its words).
PATTERN_RULES = {
    r"^[a-z0-9][a-z0-9-]{0,38}$": "1-39 lowercase letters, digits and '-', starting with a "
                                  "letter or digit",
    r"^cr-[0-9a-f]{8,17}$": "'cr-' and 8-17 lowercase hex digits",
    r"^vpc-[0-9a-f]{8,17}$": "'vpc-' and 8-17 lowercase hex digits",
    r"^subnet-[0-9a-f]{8,17}$": "'subnet-' and 8-17 lowercase hex digits",
    r"^[A-Za-z0-9_.-]+$": "letters, digits, '_', '.' and '-' (a stack name)",
    r"^[A-Za-z0-9_-]+$": "letters, digits, '_' and '-' (a base stack's name)",
    r"^\d+[hdw]$": "a whole number and h, d or w (e.g. 15d)",
    r"^[\w.-]+/[\w.-]+$": "<organisation>/<name> of letters, digits, '_', '.' and '-'",
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "lowercase letters, digits and '-', starting and "
                                        "ending with a letter or digit (a DNS label)",
    r"^\d+\.\d+\.\d+": "a MAJOR.MINOR.PATCH version such as 1.6.1",
    r"^[0-9a-f]{40}$": "a 40-character lowercase hex commit id",
    r"^[0-9a-f]{64}$": "a 64-character lowercase hex sha256 (as sha256sum prints it)",
    r"^[a-z][a-z0-9_-]{0,63}$": "a parser name as vLLM and Dynamo spell them: a lowercase "
                                "letter, then up to 63 lowercase letters, digits, '_' and '-' "
                                "(e.g. qwen3_coder)",
    r"\S": "a command-line argument that is neither empty nor only spaces (the engine would "
           "get an empty argument), or no entry at all",
}


def stack_file(name: str, stacks_dir: Path = STACKS_DIR) -> Path:
    return stacks_dir / f"Pulumi.{name}.yaml"


def all_stack_names(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """Stacks with a file of their own (a `<variant>.<base>` file Pulumi wrote for a derived
    stack is not one: derived_stack_names lists those)."""
    names = (p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))
    return sorted(n for n in names if DERIVED_SEPARATOR not in n)


# What a strict field takes (stacks/config/schema_base.py), in words, and the fix: YAML decides a
# value's type by how it is written (`true`, `1`, `1.5`, `'1'`), so the fix says how to write it.
TYPE_RULES = {
    "int_type": ("a whole number",
                 "write a whole number such as 4: not true/false, no decimal point, no quotes"),
    "bool_type": ("true or false",
                  "write true or false, unquoted (not 1/0, not 'true' in quotes)"),
    "float_type": ("a number",
                   "write a number such as 0.25 or 2: not true/false, no quotes"),
    "string_type": ("text",
                    "write text; quote it when YAML would read it as a number, a boolean or "
                    "null (\"1\", \"true\", \"null\")"),
    "list_type": ("a list", "write a YAML list ([a, b] or one `- item` a line)"),
    "dict_type": ("a mapping", "write a mapping of keys (`key: value`)"),
    "model_type": ("a mapping", "write a mapping of keys (`key: value`)"),
}


def yaml_kind(value: object) -> str:
    """How YAML wrote `value`: `true is a boolean`, `'1' is a string`."""
    if isinstance(value, bool):
        return f"{str(value).lower()} is a boolean"
    if value is None:
        return "null is YAML's empty value"
    kinds = ((int, "an integer"), (float, "a decimal number"), (str, "a string"),
             (list, "a list"), (dict, "a mapping"))
    kind = next((k for t, k in kinds if isinstance(value, t)), type(value).__name__)
    shown = repr(value) if isinstance(value, (int, float, str)) else "the value"
    return f"{shown} is {kind}"


def _field_path(loc: tuple[Any, ...]) -> str:
    """('serving', 'workers', 0, 'tensorParallelSize') -> dynamo-bench:serving.workers[0]...."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not out:
            out = f"{P}{part}"
        else:
            out += f".{part}"
    return out or PROJECT


def _fix_for(err: ErrorDetails) -> str:
    kind = err["type"]
    if kind == "value_error":
        return ""  # the schema's own validators state the fix in their message
    if kind == "extra_forbidden":
        return "remove it or check its spelling against the schema (stacks/config/schema.py)"
    if kind == "missing":
        return "add it"
    if kind in ("literal_error", "enum"):
        return f"use one of the allowed values ({err.get('ctx', {}).get('expected', '')})"
    if kind.startswith(("greater", "less", "too_short", "too_long")):
        return "bring the value into the allowed range"
    if kind in TYPE_RULES:
        return TYPE_RULES[kind][1]
    if kind.endswith(("_type", "_parsing")):
        return "write a value of the expected type"
    if kind == "string_pattern_mismatch":
        return f"write {pattern_words(err.get('ctx', {}).get('pattern', ''))}"
    if kind == "finite_number":
        return "write a finite number (NaN and infinity are not values pre-flight can check)"
    return "correct the value"


def pattern_words(pattern: str) -> str:
    return PATTERN_RULES.get(pattern, f"a value matching {pattern}")


def _message(err: ErrorDetails) -> str:
    kind = err["type"]
    if kind == "string_pattern_mismatch":
        return f"'{err['input']}' breaks the rule: {pattern_words(err['ctx']['pattern'])}"
    if kind == "finite_number":
        return f"{err['input']} is not a finite number"
    if kind in TYPE_RULES:
        return f"{yaml_kind(err['input'])}, not {TYPE_RULES[kind][0]}"
    # model_validator errors carry the message; strip pydantic's "Value error, " prefix.
    return str(err["msg"]).removeprefix("Value error, ")


def problems_from_validation(exc: ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if p not in ("function-after",))
        problems.append(Problem(_field_path(loc), _message(err), _fix_for(err)))
    return problems


def parse_config(name: str, raw: dict[str, Any]) -> StackConfig:
    """Validate raw `{key: value}` config (keys without the project prefix)."""
    try:
        return StackConfig.model_validate({"name": name, **raw})
    except ValidationError as exc:
        raise StackError(name, problems_from_validation(exc)) from None


def read_stack_file(path: Path) -> dict[str, Any]:
    """The project's config keys from a Pulumi stack file (prefix stripped), vetted."""
    return files.read(path, CONFIG_KEYS).config


def load_stack_file(name: str, stacks_dir: Path = STACKS_DIR) -> StackFile:
    """Stack file `name`, vetted (StackError when it is missing or says something it cannot);
    a derived name `<variant>.<base>` without a file of its own is the variant on that base."""
    path = stack_file(name, stacks_dir)
    if (derived := _derived_stack_file(name, stacks_dir)) is not None:
        return _with_own_file(derived, path) if path.exists() else derived
    if not path.exists():
        raise StackError(name, [Problem("stack", f"no stack file {path.name} in {stacks_dir}",
                                        _other_names(name, stacks_dir))])
    return files.read(path, CONFIG_KEYS)


def _other_names(name: str, stacks_dir: Path) -> str:
    """The fix for a missing stack name: the closest existing names, else all of them."""
    known = all_stack_names(stacks_dir)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if close:
        return f"did you mean {' or '.join(close)}? (`python -m stacks check --all` lists all)"
    return f"create it or use one of: {', '.join(known) or 'none'}"


def load_stack(name: str, stacks_dir: Path = STACKS_DIR) -> StackConfig:
    return parse_config(name, load_stack_file(name, stacks_dir).config)


def base_candidates(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """Stacks a variant can attach to: valid files of aws stacks that own a cluster and serve
    nothing."""
    out = []
    for name in all_stack_names(stacks_dir):
        try:
            stack = load_stack(name, stacks_dir)
        except StackError:
            continue
        if stack.target == "aws" and stack.is_base and not stack.is_attached:
            out.append(name)
    return out


# --- derived stacks: a variant of one base run on another without copying its file ----------
# The stack `<variant>.<base>` is the file of <variant> with cluster.attachTo set to <base>,
# allowed when <base> declares `cluster.variantsOf: <the variant's own base>` (same node-group
# names). Pulumi stack names may hold '.', stack files and base names here do not.
DERIVED_SEPARATOR = "."


def _cluster_key(file: StackFile, key: str) -> object:
    return (file.config.get("cluster") or {}).get(key)


def _derived_stack_file(name: str, stacks_dir: Path) -> StackFile | None:
    variant, sep, base = name.rpartition(DERIVED_SEPARATOR)
    if not sep or not stack_file(variant, stacks_dir).exists() \
            or not stack_file(base, stacks_dir).exists():
        return None
    where = "stack (the stack name)"
    file = files.read(stack_file(variant, stacks_dir), CONFIG_KEYS)
    own_base = _cluster_key(file, "attachTo")
    if not own_base:
        raise StackError(name, [Problem(where, f"'{variant}' attaches to no base, so it cannot "
                                        f"run on '{base}' as '{name}'", f"use {variant}")])
    twin = _cluster_key(files.read(stack_file(base, stacks_dir), CONFIG_KEYS), "variantsOf")
    if twin != own_base:
        fits = [n for n in derived_stack_names(stacks_dir) if n.startswith(variant + ".")]
        raise StackError(name, [Problem(
            where, f"base '{base}' does not run the variants of '{own_base}' (its "
            f"cluster.variantsOf is {twin or 'unset'})",
            f"use {', '.join(fits)}" if fits else
            f"set cluster.variantsOf: {own_base} on a base with the same node groups")])
    config = copy.deepcopy(file.config)
    config["cluster"] = {**config["cluster"], "attachTo": base}
    return dataclasses.replace(file, name=name, config=config)


def _with_own_file(derived: StackFile, path: Path) -> StackFile:
    """A derived stack's own file holds what Pulumi writes there: `pulumi stack init` its
    encryptionsalt, `pulumi config set` (a campaign's deployer keys through the Automation API,
    hfToken, apiAccessCidrs, provider keys) those keys; never experiment config, which is the
    variant's file's."""
    doc = files.parse_yaml(path, files.decode(path, path.read_bytes()))
    if not isinstance(doc, dict) or not doc.get("config"):
        return derived
    own = files.vet_config(path, doc, CONFIG_KEYS)
    if own.config:
        variant = derived.path.name
        raise StackError(derived.name, [Problem(
            f"{path.name}: config", f"sets {', '.join(f'{PROJECT}:{k}' for k in own.config)}: "
            f"the derived stack {derived.name} takes its experiment config from {variant}",
            f"move it into {variant} (every base it runs on gets it), or remove it")])
    return dataclasses.replace(
        derived, hf_token=own.hf_token or derived.hf_token,
        api_access=own.api_access or derived.api_access, campaign=own.campaign,
        node_group_sizes=own.node_group_sizes,
        provider_config={**derived.provider_config, **own.provider_config})


def derived_stack_names(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """Every `<variant>.<base>` the stack files allow (see _derived_stack_file)."""
    attached: dict[str, list[str]] = {}
    twins: dict[str, str] = {}
    for name in all_stack_names(stacks_dir):
        try:
            file = files.read(stack_file(name, stacks_dir), CONFIG_KEYS)
        except StackError:
            continue
        if isinstance(own := _cluster_key(file, "attachTo"), str):
            attached.setdefault(own, []).append(name)
        if isinstance(twin := _cluster_key(file, "variantsOf"), str):
            twins[name] = twin
    return sorted(f"{v}{DERIVED_SEPARATOR}{base}" for base, twin in twins.items()
                  for v in attached.get(twin, []))
