"""Bugs planted by hand: each must make its group's test selection fail.

Two kinds. The issue that asked for mutation testing named bugs a sceptical reviewer planted
while the suite stayed green; each is kept here so it stays caught. And mutmut 3.8.1 never
mutates code outside plain functions: decorated functions (every `@property`), module-level
constants and class bodies are its blind spots (mutmut/mutation/file_mutation.py,
`_skip_node_and_children`), so the decisions that live there are planted here instead.
`make mutate` applies each to a scratch copy of the repo and runs the group's tests there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Planted:
    name: str
    module: str      # repo-relative path
    old: str         # must occur exactly once in the module
    new: str
    what: str        # the wrong figure or decision it would cause


PLANTED: tuple[Planted, ...] = (
    # The examples.
    Planted("itl-bound-ignored-per-request", "reports/tables/goodput.py",
            'ok &= req["itl_ms"] <= slo.itl_ms', "ok &= True",
            "a request with a slow ITL counts as meeting an ITL SLO (goodput too high)"),
    Planted("ttft-bound-non-strict-per-request", "reports/tables/goodput.py",
            '(req["ttft_ms"] < slo.ttft_ms)', '(req["ttft_ms"] <= slo.ttft_ms)',
            "a request at exactly the TTFT bound meets 'TTFT < bound'"),
    Planted("ttft-bound-non-strict-per-step", "reports/tables/goodput.py",
            "if not ttft_p50_ms < slo.ttft_ms:", "if not ttft_p50_ms <= slo.ttft_ms:",
            "a step whose p50 TTFT equals the bound meets the SLA's 'p50 TTFT < 5 s'"),
    Planted("step-judged-on-p90-user-speed", "reports/tables/goodput.py",
            'pct(done["tok_s_per_user"], 50)', 'pct(done["tok_s_per_user"], 90)',
            "a step is judged on p90 per-user speed instead of p50"),
    Planted("sla-p50-user-speed-is-p90", "reports/tables/sla.py",
            '"p50": pct(ok["tok_s_per_user"], 50)', '"p50": pct(ok["tok_s_per_user"], 90)',
            "sla.csv's p50 per-user speed is a p90"),
    Planted("http-504-not-a-timeout", "workloads/outcomes.py",
            "in (408, 504)", "in (408,)",
            "a gateway timeout is counted as an ordinary failure, not a timeout"),
    Planted("timed-out-message-not-a-timeout", "workloads/outcomes.py",
            ' or "timed out" in text', "",
            "an error saying 'timed out' is not counted as a timeout"),
    Planted("empty-step-error-rate-zero", "workloads/outcomes.py",
            "if finished > 0 else 1.0", "if finished > 0 else 0.0",
            "a step where no request finished has a 0 % error rate (a @property)"),
    Planted("reserved-tag-prefixes-only-aws", "stacks/preflight/aws_checks.py",
            'RESERVED_TAG_PREFIXES = ("aws:", "kubernetes.io/cluster/", "karpenter.sh/", '
            '"eks.amazonaws.com/")', 'RESERVED_TAG_PREFIXES = ("aws:",)',
            "pre-flight and the tag builder accept keys Kubernetes / Auto Mode reserve "
            "(a module constant)"),
    Planted("reserved-tag-prefix-guard-off", "stacks/preflight/aws_checks.py",
            'if reserved and what == "the key":', "if False:",
            "pre-flight accepts a tag key under kubernetes.io/cluster/, karpenter.sh/, ..."),
    Planted("tag-builder-accepts-reserved-prefixes", "components/tags.py",
            "bad = [k for k in tags if k.startswith(_RESERVED_PREFIXES)]", "bad = []",
            "the Pulumi program tags resources with a reserved key a NodeClass refuses"),
    # mutmut's blind spots: properties and module constants that decide a figure.
    Planted("memory-fits-strict", "stacks/sizing/memory.py",
            "return self.needed_gib <= self.budget_gib",
            "return self.needed_gib < self.budget_gib",
            "a worker that needs exactly its budget is refused (a @property)"),
    Planted("memory-needed-without-fixed-bytes", "stacks/sizing/memory.py",
            "+ self.sequence_fixed_gib)", ")",
            "a hybrid model's per-sequence state is left out of what must fit (a @property)"),
    Planted("preflight-ok-ignores-problems", "stacks/preflight/run.py",
            "return not self.problems", "return True",
            "a stack with problems passes pre-flight (a @property)"),
    Planted("planned-cost-ignores-hours", "stacks/preflight/run.py",
            "return self.hourly.total * self.planned_hours", "return self.hourly.total",
            "the budget check compares one hour's cost with the ceiling (a @property)"),
    Planted("gib-is-gb", "stacks/sizing/memory.py", "GIB = 1024**3", "GIB = 1000**3",
            "every GiB figure of the memory table is off by 7 % (a module constant)"),
)
