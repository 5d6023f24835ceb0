"""Read a Pulumi stack file so that what it says is what it means (the edge of the system).

YAML and a text file can both lie quietly: a repeated key keeps only its last value (a $200
budget became $100,000 that way), `on:` is read as a boolean, a misspelled namespace
(`dynamo_bench:cost`) is simply never read, `serving:` with nothing after it is null and the
stack silently becomes a base, and a stray Latin-1 byte or a byte-order mark ends in a
traceback. Every one of these is a `Problem` here, naming the file (and line) and the fix:

- bytes: at most `MAX_BYTES`; no NUL bytes (binary), no byte-order mark, no UTF-16/32; valid
  UTF-8 (the first bad byte is named with its line and column);
- YAML: one document; every mapping key a plain string that appears once; at most
  `MAX_NODES` values once aliases are expanded and `MAX_DEPTH` levels, no self-reference;
  no plain value that YAML readers read differently (`yes`, `y`, `010`, `1_000`:
  stacks.config.yaml_spelling), since `pulumi up` reads the file with another reader;
- layout: top-level keys Pulumi knows, a non-empty `config:` mapping, every key
  `<namespace>:<key>` with the project's namespace or a provider's, no empty (null) value.

`config_key_problems` is the key rule alone; the Pulumi program runs it on the config Pulumi
hands it, so a key the CLI refuses is refused by `pulumi up` too.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stacks.config.errors import Problem, StackError
from stacks.config.yaml_spelling import ambiguous

PROJECT = "dynamo-bench"
# Config keys of the project that are not part of the schema (read by the program itself).
SECRET_KEYS = ("hfToken",)
# Keys about who deploys, not about the experiment: set with `pulumi config set` in the same
# file, read by the Pulumi program, never part of the stack's typed config.
API_ACCESS_KEY = "apiAccessCidrs"      # stacks/config/api_access.py
# Set by `python -m workloads campaign` through the Automation API
# (stacks/config/campaign_config.py).
CAMPAIGN_KEY = "campaign"
NODE_GROUP_SIZES_KEY = "nodeGroupSizes"
DEPLOYER_KEYS = (*SECRET_KEYS, API_ACCESS_KEY, CAMPAIGN_KEY, NODE_GROUP_SIZES_KEY)
# Namespaces a stack file may also hold: Pulumi's own and the providers the program uses
# (requirements.txt: pulumi-aws, pulumi-eks, pulumi-kubernetes).
PROVIDER_NAMESPACES = ("aws", "eks", "kubernetes", "pulumi")
# Top-level keys of a Pulumi stack file (Pulumi's project/stack file reference).
TOP_LEVEL_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")
# The shipped stack files are 1-5 KB; these limits only stop a wrong file or a YAML bomb.
MAX_BYTES = 1_000_000
MAX_NODES = 100_000
MAX_DEPTH = 64

# LibYAML's loader (PyYAML's CSafeLoader, same nodes, tags and constructor) reads a stack
# file about 9x faster than the pure-Python SafeLoader (measured on the shipped files: 0.7 ms
# against 6.4 ms a file; the tests read them over a thousand times). But its composer recurses
# on the C stack: a flow sequence nested 100,000 deep crashed the process with a segmentation
# fault (measured, PyYAML 6.0.3, 8 MiB stack: 30,000 did too, 20,000 did not). So it reads
# only files whose nesting stays far below that even on a 1 MiB stack: flow nesting is at most
# the file's count of `[` and `{` (the shipped files have at most 15), block nesting at most
# ~1,400 levels in MAX_BYTES (one more space of indent per level). Others take the pure-Python
# loader, whose deep nesting ends in a RecursionError, reported below.
_FAST_LOADER = getattr(yaml, "CSafeLoader", None)
FAST_MAX_BRACKETS = 200

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class StackFile:
    """What a stack file holds, vetted: the project's config (prefix stripped), how the HF
    token is stored, and the providers' own config keys (full keys)."""

    name: str
    path: Path
    config: dict[str, Any]
    hf_token: str | None = None            # "secret", "plain", or None when absent
    api_access: str | None = None          # dynamo-bench:apiAccessCidrs as Pulumi reads it
    campaign: str | None = None            # dynamo-bench:campaign (JSON text)
    node_group_sizes: str | None = None    # dynamo-bench:nodeGroupSizes (JSON text)
    provider_config: dict[str, Any] = field(default_factory=dict)


def stack_name(path: Path) -> str:
    return path.name[len("Pulumi."):-len(".yaml")]


def _fail(path: Path, message: str, fix: str, line: int | None = None) -> StackError:
    where = f"{path.name}:{line}" if line else path.name
    return StackError(stack_name(path), [Problem(where, message, fix)])


# --- bytes -> text ---------------------------------------------------------------------------

def decode(path: Path, data: bytes) -> str:
    """The file's text, or a one-line StackError saying what is wrong with its bytes."""
    save = "save it as plain UTF-8 (no byte-order mark)"
    if len(data) > MAX_BYTES:
        raise _fail(path, f"is {len(data):,} bytes; a stack file is a few KB (limit "
                    f"{MAX_BYTES:,})", "check that this is the stack file you meant")
    if data.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
        raise _fail(path, "is UTF-16 or UTF-32 encoded (it starts with that byte-order mark)",
                    save)
    if data.startswith(b"\xef\xbb\xbf"):
        raise _fail(path, "starts with a UTF-8 byte-order mark (BOM)", save)
    if b"\x00" in data:
        even, odd = data[0::2].count(0), data[1::2].count(0)
        if max(even, odd) > len(data) // 4:
            raise _fail(path, "looks UTF-16 encoded (every other byte is NUL)", save)
        raise _fail(path, "contains NUL bytes: it is binary, not a text file",
                    "point at the YAML stack file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise _fail(path, f"byte 0x{data[exc.start]:02X} at line {line}, column {column} is "
                    "not UTF-8 (Latin-1 or Windows-1252 text?)", save, line) from None


# --- text -> YAML data -----------------------------------------------------------------------

def _where(path: Path, trail: str | None, key: str, line: int) -> str:
    """A key's field path inside `config:` (`dynamo-bench:cost.budgetUsd`), else file:line."""
    if trail is None:
        return f"{path.name}:{line}"
    return f"{trail}.{key}" if trail else key


def _vet_mapping(path: Path, node: yaml.MappingNode, trail: str | None) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for key, _ in node.value:
        line = key.start_mark.line + 1
        if key.tag == _MERGE_TAG:
            continue  # `<<: *defaults` supplies defaults; explicit keys override them
        if not isinstance(key, yaml.ScalarNode):
            problems.append(Problem(f"{path.name}:{line}", "a key is a YAML mapping or list, "
                                    "not a name", "write the key as a plain name"))
            continue
        if key.tag != _STR_TAG:
            problems.append(Problem(_where(path, trail, key.value, line), f"key '{key.value}' "
                                    f"(line {line}) is read by YAML as a non-string (a "
                                    "boolean, number or null), not as the name it looks like",
                                    f"quote it: \"{key.value}\""))
            continue
        if key.value in seen:
            problems.append(Problem(_where(path, trail, key.value, line), f"appears twice "
                                    f"(lines {seen[key.value]} and {line}); YAML keeps only "
                                    "the last one and silently drops the other",
                                    "keep one of them"))
        else:
            seen[key.value] = line
    return problems


def _vet(path: Path, root: yaml.Node) -> list[Problem]:
    """Duplicate and non-string keys everywhere; expanded size, depth and self-reference.

    `trail` is the config field path of a node (None outside `config:`, "" at its top)."""
    problems: list[Problem] = []
    sizes: dict[int, int] = {}
    visiting: set[int] = set()

    def child_trail(trail: str | None, key: yaml.Node, top: bool) -> str | None:
        if top:
            return "" if isinstance(key, yaml.ScalarNode) and key.value == "config" else None
        if trail is None or not isinstance(key, yaml.ScalarNode):
            return trail
        return f"{trail}.{key.value}" if trail else key.value

    def size(node: yaml.Node, depth: int, trail: str | None) -> int:
        ident = id(node)
        if ident in sizes:
            return sizes[ident]
        line = node.start_mark.line + 1
        if ident in visiting:
            raise _fail(path, "an alias refers to the value that contains it",
                        "write the value out", line)
        if depth > MAX_DEPTH:
            raise _fail(path, f"nests more than {MAX_DEPTH} levels deep",
                        "flatten it: stack config is a few levels deep", line)
        visiting.add(ident)
        total = 1
        if isinstance(node, yaml.MappingNode):
            problems.extend(_vet_mapping(path, node, trail))
            for k, v in node.value:
                total += size(k, depth + 1, None)
                total += size(v, depth + 1, child_trail(trail, k, depth == 0))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                total += size(item, depth + 1, None if trail is None else f"{trail}[{i}]")
        elif trail and isinstance(node, yaml.ScalarNode) and (wrong := ambiguous(node)):
            problems.append(Problem(trail, *wrong))
        visiting.discard(ident)
        sizes[ident] = total
        if total > MAX_NODES:
            raise _fail(path, f"expands to more than {MAX_NODES:,} values (aliases included)",
                        "write the config out plainly", line)
        return total

    size(root, 0, None)
    return problems


def _yaml_error(path: Path, exc: yaml.YAMLError) -> StackError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    text = f"{context}: {what}" if context else what
    line = mark.line + 1 if mark is not None else None
    at = f" (line {line}, column {mark.column + 1})" if mark is not None else ""
    return _fail(path, f"is not valid YAML{at}: {' '.join(str(text).split())}",
                 "fix the YAML syntax", line)


def _reader_error(path: Path, text: str, exc: yaml.reader.ReaderError) -> StackError:
    line = text.count("\n", 0, exc.position) + 1
    column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
    return _fail(path, f"character U+{exc.character:04X} at line {line}, column {column} is a "
                 "control character YAML does not allow", "remove it", line)


def _parse_fast(path: Path, text: str) -> tuple[bool, Any]:
    """(True, data) read by LibYAML, or (False, None) when the file is for the pure-Python
    loader: LibYAML is not built in, the file's flow nesting could go deep, or LibYAML
    refused it (the pure-Python loader then names the problem, line and column as always)."""
    if _FAST_LOADER is None or text.count("[") + text.count("{") > FAST_MAX_BRACKETS:
        return False, None
    loader = _FAST_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return True, None
        problems = _vet(path, node)
        if problems:
            raise StackError(stack_name(path), problems)
        return True, loader.construct_document(node)
    except (yaml.YAMLError, RecursionError):
        return False, None
    finally:
        loader.dispose()


def parse_yaml(path: Path, text: str) -> Any:
    """One YAML document, vetted before it is turned into Python data (None when empty)."""
    read, data = _parse_fast(path, text)
    if read:
        return data
    try:
        loader = yaml.SafeLoader(text)  # the reader refuses control characters right here
    except yaml.reader.ReaderError as exc:
        raise _reader_error(path, text, exc) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problems = _vet(path, node)
        if problems:
            raise StackError(stack_name(path), problems)
        return loader.construct_document(node)
    except yaml.reader.ReaderError as exc:
        raise _reader_error(path, text, exc) from None
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from None
    except RecursionError:
        raise _fail(path, f"nests more than {MAX_DEPTH} levels deep",
                    "flatten it: stack config is a few levels deep") from None
    finally:
        loader.dispose()


# --- YAML data -> config ---------------------------------------------------------------------

def config_key_problems(keys: list[str], schema_keys: tuple[str, ...]) -> list[Problem]:
    """Every config key is `<namespace>:<key>`: the project's (a known key) or a provider's."""
    problems = []
    allowed = ", ".join(f"{PROJECT}:{k}" for k in (*schema_keys, *DEPLOYER_KEYS))
    for key in keys:
        ns, colon, short = str(key).partition(":")
        if not colon:
            fix = (f"write {PROJECT}:{key}" if key in schema_keys or key in DEPLOYER_KEYS else
                   f"write <namespace>:{key} (one of {allowed}, or a provider's key)")
            problems.append(Problem(str(key), "config key without a namespace: Pulumi would "
                                    "read it as a key of no project", fix))
        elif ns == PROJECT:
            if short not in schema_keys and short not in DEPLOYER_KEYS:
                problems.append(Problem(str(key), "unknown config key", f"use one of {allowed}"))
        elif ns not in PROVIDER_NAMESPACES:
            close = difflib.get_close_matches(ns.lower(), [PROJECT], n=1, cutoff=0.6)
            if close or ns.lower().replace("_", "-") == PROJECT:
                problems.append(Problem(str(key), f"namespace '{ns}' is not the project's "
                                        f"('{PROJECT}'), so nothing would read it",
                                        f"write {PROJECT}:{short}"))
            else:
                problems.append(Problem(str(key), f"namespace '{ns}' is neither this "
                                        f"project's ({PROJECT}) nor a provider's "
                                        f"({', '.join(PROVIDER_NAMESPACES)})",
                                        f"write {PROJECT}:{short} or remove it"))
    return problems


def token_state(value: Any) -> str:
    """How `dynamo-bench:hfToken` is stored: Pulumi writes a secret as `{secure: <cipher>}`."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        return "secret"
    return "plain"


def vet_config(path: Path, doc: Any, schema_keys: tuple[str, ...]) -> StackFile:
    name = stack_name(path)
    if doc is None:
        raise _fail(path, "is empty: it has no `config:` block",
                    f"add `config:` with the {PROJECT}:<key> entries")
    if not isinstance(doc, dict):
        raise _fail(path, f"is a YAML {type(doc).__name__}, not a mapping with `config:`",
                    f"write `config:` with the {PROJECT}:<key> entries")
    problems = [Problem(f"{path.name}: {k}", f"'{k}' is not a key of a Pulumi stack file",
                        f"use {', '.join(TOP_LEVEL_KEYS)}, or move it under config:")
                for k in doc if k not in TOP_LEVEL_KEYS]
    config = doc.get("config")
    if "config" not in doc:
        problems.append(Problem(path.name, "has no `config:` block",
                                f"put the {PROJECT}:<key> entries under `config:`"))
    elif not isinstance(config, dict) or not config:
        state = "is empty" if not config else f"is a {type(config).__name__}"
        problems.append(Problem(f"{path.name}: config", f"`config:` {state}, not a mapping of "
                                "config keys", f"put the {PROJECT}:<key> entries under it"))
    if problems:
        raise StackError(name, problems)
    assert isinstance(config, dict)
    problems = config_key_problems(list(config), schema_keys)
    raw: dict[str, Any] = {}
    providers: dict[str, Any] = {}
    hf_token = api_access = None
    deployer: dict[str, str] = {}
    for key, value in config.items():
        ns, _, short = key.partition(":")
        if value is None:
            problems.append(Problem(key, "is empty (null): YAML reads a key with nothing after "
                                    "it as null, and a null section would silently fall back "
                                    "to its defaults", "give it a value or remove the key"))
        elif ns in PROVIDER_NAMESPACES:
            providers[key] = value
        elif ns == PROJECT and short in SECRET_KEYS:
            hf_token = token_state(value)
        elif ns == PROJECT and short == API_ACCESS_KEY:
            # Pulumi hands a structured value to the program as JSON text
            api_access = value if isinstance(value, str) else json.dumps(value)
        elif ns == PROJECT and short in (CAMPAIGN_KEY, NODE_GROUP_SIZES_KEY):
            deployer[short] = value if isinstance(value, str) else json.dumps(value)
        elif ns == PROJECT and short in schema_keys:
            raw[short] = value
    if problems:
        raise StackError(name, problems)
    return StackFile(name=name, path=path, config=raw, hf_token=hf_token,
                     api_access=api_access, campaign=deployer.get(CAMPAIGN_KEY),
                     node_group_sizes=deployer.get(NODE_GROUP_SIZES_KEY),
                     provider_config=providers)


def read(path: Path, schema_keys: tuple[str, ...]) -> StackFile:
    """Read and vet one stack file; raises StackError (never a traceback) on any problem."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _fail(path, f"cannot be read: {exc.strerror or exc}",
                    "check the path and its permissions") from None
    return vet_config(path, parse_yaml(path, decode(path, data)), schema_keys)
