"""`python -m reports audit [STACK] [--region R | --all-regions] [--delete [--yes]]`.

Exit codes (one per verdict, so a script can tell them apart):
  0  nothing of the stack left, no orphans, every kind listed
  1  the stack's resources are left (or --delete could not remove them all)
  2  bad arguments, or AWS could not be asked at all
  3  unknown stack: no stack file and nothing tagged with that name (a typo is not "clean")
  4  nothing of the stack left, but orphans of the project exist
  5  some kind of resource could not be listed: the audit is incomplete
Ids are printed whole, one resource per line, so they can be copied.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import typer
from boto3.session import Session
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console

from reports.accounting.audit import GLOBAL, Resource, Split, split, stack_tags_present
from reports.accounting.audit_delete import Outcome, delete_resources
from reports.accounting.audit_listings import Findings, find_global, find_regional
from reports.accounting.aws_session import clients_for, default_region
from stacks.config.loader import STACKS_DIR, StackError, all_stack_names, load_stack

EXIT_CLEAN, EXIT_LEFT, EXIT_ERROR, EXIT_UNKNOWN_STACK, EXIT_ORPHANS, EXIT_INCOMPLETE = range(6)
console = Console(width=None if sys.stdout.isatty() else 200)


def say(text: str = "") -> None:
    """One line, never wrapped or marked up: ids and ARNs stay whole and copyable."""
    console.print(text, soft_wrap=True, markup=False, highlight=False)


def verdict(left: bool, incomplete: bool, orphans: bool) -> int:
    if left:
        return EXIT_LEFT
    if incomplete:
        return EXIT_INCOMPLETE
    return EXIT_ORPHANS if orphans else EXIT_CLEAN


def stack_region(stack: str, stacks_dir: Path) -> str | None:
    """The region of the stack's cluster (its base's for a variant), if its file is there."""
    try:
        s = load_stack(stack, stacks_dir)
        return (load_stack(s.cluster.attach_to, stacks_dir) if s.cluster.attach_to
                else s).cluster.region
    except StackError:
        return None   # the stack file may be gone after destroy


def regions_to_audit(stack: str | None, region: str | None, all_regions: bool,
                     stacks_dir: Path, session: Session) -> list[str]:
    if all_regions:
        ec2 = clients_for(region or default_region() or "us-east-1", session)("ec2")
        return sorted(r["RegionName"] for r in ec2.describe_regions()["Regions"])
    found = region or (stack and stack_region(stack, stacks_dir)) or default_region()
    if not found:
        say(f"no stack file for '{stack}' and no AWS default region: pass --region or "
            "--all-regions")
        raise typer.Exit(EXIT_ERROR)
    return [found]


def gather(regions: list[str], stack: str | None, session: Session) -> list[Findings]:
    """Every region in parallel (each its own clients, one session), then IAM once."""
    with console.status(f"auditing {len(regions)} region(s) and IAM"), \
            ThreadPoolExecutor(max_workers=min(8, len(regions))) as pool:
        found = list(pool.map(lambda r: find_regional(clients_for(r, session), r, stack),
                              regions))
        found.append(find_global(clients_for(regions[0], session), stack))
    return found


def line(r: Resource) -> str:
    name = f"  name={r.name}" if r.name and r.name != r.id else ""
    parent = f"  in {r.parent}" if r.parent and r.parent != r.name else ""
    return (f"  {r.region:<14} {r.kind:<34} {r.id}{name}{parent}  "
            f"[{r.via or 'project tag, no stack tag'}; found by {', '.join(sorted(r.found_by))}]")


def show(title: str, rows: Iterable[Resource]) -> None:
    say(title)
    for r in rows:
        say(line(r))


def show_unlisted(findings: list[Findings]) -> bool:
    missing = [(f.region, label, err) for f in findings for label, err in f.unlisted.items()]
    for region, label, err in missing:
        say(f"could not list {label} in {region}: {err}")
    if missing:
        say(f"the audit is incomplete: {len(missing)} listing(s) failed, so 'nothing left' "
            "cannot be claimed for those kinds; fix access (or the region) and run it again")
    return bool(missing)


def show_stack_tags(resources: list[Resource], known: set[str]) -> None:
    present = stack_tags_present(resources)
    if not present:
        say("no resource of the project (tag project=dynamo-bench) was found there")
        return
    say("stack tags present:")
    for owner, n in present.items():
        label = owner or "(no stack tag)"
        has_file = ("stack file: yes" if owner in known else "stack file: no") if owner else ""
        regions = sorted({r.region for r in resources if (r.owner or "") == owner})
        say(f"  {label:<32} {n:>4} resource(s)  {has_file:<15} {', '.join(regions)}")


def where(regions: list[str]) -> str:
    return regions[0] if len(regions) == 1 else f"{len(regions)} regions"


def report_split(s: Split, regions: list[str]) -> None:
    if s.mine:
        show(f"{len(s.mine)} resource(s) of stack {s.stack} in {where(regions)} (+ IAM):",
             s.mine)
    else:
        say(f"nothing tagged stack={s.stack} (or made for its cluster) left in "
            f"{where(regions)} (+ IAM)")
    if s.orphans:
        show(f"{len(s.orphans)} orphan(s) of the project (no stack tag, or a stack without "
             "a stack file): not this stack's, never deleted by its --delete", s.orphans)
    if s.others:
        say("other stacks' resources (untouched): "
            + ", ".join(f"{k} ({v})" for k, v in sorted(s.others.items())))


def inventory(findings: list[Findings], known: set[str], regions: list[str]) -> int:
    resources = [r for f in findings for r in f.resources if r.project and not r.gone]
    show_stack_tags(resources, known)
    for owner in sorted({r.owner or "" for r in resources}):
        show(f"{owner or '(no stack tag)'}:", [r for r in resources if (r.owner or "") == owner])
    incomplete = show_unlisted(findings)
    return verdict(bool(resources), incomplete, False)


def delete_everywhere(s: Split, regions: list[str], poll_s: float,
                      session: Session) -> list[Outcome]:
    """Region by region, IAM last (clusters and node groups use their roles until gone)."""
    outcomes: list[Outcome] = []
    for region in sorted({r.region for r in s.mine}, key=lambda r: (r == GLOBAL, r)):
        rows = [r for r in s.mine if r.region == region]
        c = clients_for(regions[0] if region == GLOBAL else region, session)
        outcomes += delete_resources(c, rows, s.stack, poll_s)
    return outcomes


def run_delete(s: Split, regions: list[str], known: set[str], yes: bool, poll_s: float,
               session: Session) -> int:
    if not yes and not typer.confirm(f"Delete these {len(s.mine)} resource(s) of {s.stack}?"):
        say("nothing deleted")
        return EXIT_LEFT
    outcomes = delete_everywhere(s, regions, poll_s, session)
    for o in outcomes:
        say(f"{o.status} {o.resource.kind} {o.resource.id} {o.detail}".rstrip())
    after = gather(regions, s.stack, session)
    now = split([r for f in after for r in f.resources], s.stack, known)
    remaining, failed = now.mine, [o for o in outcomes if o.status == "failed"]
    if remaining or failed:
        reasons = {o.resource.key: o.detail for o in outcomes if o.detail}
        left_keys = {r.key for r in remaining}
        failed_only = [o.resource for o in failed if o.resource.key not in left_keys]
        say(f"could not delete ({len(remaining) + len(failed_only)}):")
        for r in [*remaining, *failed_only]:
            say(f"{line(r)}  {reasons.get(r.key, 'still there after its deletion')}")
        say("AWS finishes some deletions after the call returns (a load balancer's network "
            "interfaces, a cluster's security groups): run the audit again in a few minutes; "
            "what still fails needs a look by hand.")
    say(f"{len(outcomes) - len(failed)} handled, {len(failed)} failed, {len(remaining)} left")
    incomplete = show_unlisted(after)
    return verdict(bool(remaining or failed), incomplete, bool(now.orphans))


def audit_cmd(
        stack: str = typer.Argument(None, help="Stack to audit (its stack tag, its cluster's "
                                    "resources, its IAM). Omit it with --all-regions for an "
                                    "inventory of everything the project left."),
        region: str = typer.Option(None, help="Region; default: the stack file's, else the "
                                   "AWS default."),
        all_regions: bool = typer.Option(False, "--all-regions", help="Audit every enabled "
                                         "region (for when you do not remember where)."),
        delete: bool = typer.Option(False, "--delete", help="Delete the stack's resources "
                                    "(never orphans or other stacks'), after asking."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask (scripts)."),
        stacks_dir: Path = typer.Option(STACKS_DIR, help="Where stack files are (to tell a "
                                        "known stack from an orphaned tag)."),
        poll_s: float = typer.Option(10.0, hidden=True)) -> None:
    """List every resource STACK left in AWS (its tags, its cluster's controller-made
    resources, its IAM), the project's orphans apart, and exit non-zero unless nothing is left.
    Without STACK (and with --all-regions): an inventory of everything the project left.
    Exit codes: 0 clean, 1 left, 2 error, 3 unknown stack, 4 orphans only, 5 incomplete (a
    listing failed)."""
    if delete and not stack:
        say("--delete needs a stack name (orphans are never deleted in bulk)")
        raise typer.Exit(EXIT_ERROR)
    if region and all_regions:
        say("give --region or --all-regions, not both")
        raise typer.Exit(EXIT_ERROR)
    known = set(all_stack_names(stacks_dir))
    session = Session()     # one for the whole command (reports/accounting/aws_session.py says why)
    try:
        regions = regions_to_audit(stack, region, all_regions, stacks_dir, session)
        findings = gather(regions, stack, session)
    except (BotoCoreError, ClientError) as exc:
        say(f"audit failed: {exc}")
        raise typer.Exit(EXIT_ERROR) from None
    if not any(f.listed for f in findings):
        first = next((e for f in findings for e in f.unlisted.values()), "no listing ran")
        say(f"audit failed: AWS answered none of the listings in {where(regions)} ({first})")
        raise typer.Exit(EXIT_ERROR)
    if stack is None:
        raise typer.Exit(inventory(findings, known, regions))
    resources = [r for f in findings for r in f.resources]
    s = split(resources, stack, known)
    if not s.mine and stack not in known:
        say(f"unknown stack '{stack}': no stack file {stacks_dir / f'Pulumi.{stack}.yaml'} and "
            f"nothing tagged stack={stack} in {where(regions)}; a mistyped name is not clean.")
        show_stack_tags(resources, known)
        show_unlisted(findings)
        raise typer.Exit(EXIT_UNKNOWN_STACK)
    report_split(s, regions)
    incomplete = show_unlisted(findings)
    if not delete or not s.mine:
        raise typer.Exit(verdict(bool(s.mine), incomplete, bool(s.orphans)))
    try:
        raise typer.Exit(run_delete(s, regions, known, yes, poll_s, session))
    except (BotoCoreError, ClientError) as exc:
        say(f"audit after deletion failed: {exc}")
        raise typer.Exit(EXIT_ERROR) from None
