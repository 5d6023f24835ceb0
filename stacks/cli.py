"""How the project's CLIs (`python -m stacks|workloads|reports`) meet bad input: one line on
stderr and exit 2, before anything is created or any load is sent.

`run_cli` runs a typer app with that rule for what click checks (an unknown option, a missing
argument, a value outside its choices, a path that must exist) and for a path the command
cannot use (a missing or unwritable folder: the OSError naming it). `fail` and `stack_error`
are the same rule inside a command. A bug still shows its traceback (exit 1).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import click
import typer

from stacks.config.errors import Problem, StackError
from stacks.config.loader import STACKS_DIR, load_stack_file

USAGE_ERROR = 2
# An OSError of these kinds names a path the user gave that cannot be used as given.
PATH_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
               FileExistsError)


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def fail(message: object, code: int = USAGE_ERROR) -> NoReturn:
    """`error: <message>` as one line on stderr, then exit `code`."""
    print(f"error: {one_line(message)}", file=sys.stderr)
    raise typer.Exit(code)


def problem_line(stack: str, problem: Problem) -> str:
    """One problem of a stack as one line (a missing stack file speaks for itself)."""
    if problem.field == "stack":
        return f"{problem.message} -> fix: {problem.fix}"
    return f"stack '{stack}': {problem}"


def stack_error(exc: StackError) -> NoReturn:
    """A stack that cannot be used: one line for one problem (a mistyped name), else every
    problem on its own line (each names its field and fix); exit 2."""
    if len(exc.problems) == 1:
        fail(problem_line(exc.stack, exc.problems[0]))
    print(str(exc), file=sys.stderr)
    raise typer.Exit(USAGE_ERROR)


def writable_dir(path: Path, option: str = "--out") -> Path:
    """Create `path` if needed and prove a file can be written in it (before any work)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".dynamo-bench-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise typer.BadParameter(f"{path}: cannot write there ({exc.strerror or exc})",
                                 param_hint=f"'{option}'") from None
    return path


def run_cli(app: typer.Typer, prog_name: str, args: list[str] | None = None) -> int:
    """Run `app` as `prog_name`; the exit code. Usage and path errors: one line, exit 2."""
    command = typer.main.get_command(app)
    try:
        result = command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError:
        return USAGE_ERROR   # typer has printed the help
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else prog_name
        print(f"{where}: {one_line(exc.format_message())} (see {where} --help)",
              file=sys.stderr)
        return USAGE_ERROR
    except click.ClickException as exc:
        print(f"{prog_name}: {one_line(exc.format_message())}", file=sys.stderr)
        return exc.exit_code
    except click.Abort:
        print(f"{prog_name}: aborted", file=sys.stderr)
        return 1
    except PATH_ERRORS as exc:
        if exc.filename is None:
            raise
        print(f"{prog_name}: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return USAGE_ERROR
    return result if isinstance(result, int) else 0


def require_stack_names(names: Sequence[str], stacks_dir: Path | None = None) -> None:
    """Stop at the first name without a stack file (nor a `<variant>.<base>` pair): one line
    with the closest names, before anything is loaded or run."""
    for name in names:
        try:
            load_stack_file(name, stacks_dir or STACKS_DIR)
        except StackError as exc:
            if [p.field for p in exc.problems] == ["stack"]:
                stack_error(exc)
            # any other problem is the command's to report, with the stack's other checks
