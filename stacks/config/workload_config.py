"""Typed parameters of the planned workloads (`dynamo-bench:workloads`).

Each workload holds its `full`-scale values (the plan's) and a `quick` block that overrides some
of them for local runs and CI: same shape, shorter durations and counts. The quick block is
validated against the same model, so a typo in it fails at load time too.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Field, StrictBool, StrictFloat, StrictInt, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from stacks.config.errors import field_error, relocated
from stacks.config.schema_base import Schema

Scale = Literal["quick", "full"]
PositiveInt = Annotated[StrictInt, Field(ge=1)]
Share = Annotated[StrictFloat, Field(ge=0.0, le=1.0)]
# When a cold-cache workload restarts the workers (empty KV caches) before its steps. Every
# step uses fresh hash ids, so an earlier step's cache cannot serve a later step's prompts:
# one restart before the workload's first step already makes every step a cold measurement,
# while a restart per step reloads the model each time (minutes to hours on a cluster).
ColdRestart = Literal["every-step", "first-step", "never"]


def restarts_before(policy: ColdRestart, index: int) -> bool:
    """Whether the workload's `index`-th cold-cache step (0-based, in plan order across
    repeats; a trace's warm replays are not counted) restarts the workers first."""
    return policy == "every-step" or (policy == "first-step" and index == 0)


def restart_count(policy: ColdRestart, cold_steps: int) -> int:
    """Worker restarts for a workload of `cold_steps` cold-cache steps."""
    return sum(restarts_before(policy, i) for i in range(cold_steps))


class Workload(Schema):
    enabled: StrictBool = True
    quick: dict[str, Any] = {}

    @model_validator(mode="after")
    def _quick_keys(self) -> Self:
        # The merged quick values are validated by WorkloadsConfig, after this model's own
        # (subclass) validators: a wrong full value is then reported as itself, not as quick.
        for key in ("quick", "enabled"):
            if key in self.quick:
                raise field_error("quick", key, message=f"quick may override parameters, "
                                  f"not '{key}': move it out of the quick block")
        return self

    def at_scale(self, scale: Scale) -> Self:
        """The parameters to run at `scale` (quick = full values with the quick overrides)."""
        if scale == "full" or not self.quick:
            return self
        # quick={} so the result is final (and its own validator does not recurse)
        merged = {**self.model_dump(by_alias=True, exclude={"quick"}), **self.quick, "quick": {}}
        return type(self).model_validate(merged)


class ConcurrencySweep(Workload):
    concurrencies: Annotated[list[PositiveInt], Field(min_length=1)] = [1, 2, 4, 8, 16, 32, 64]
    isl: PositiveInt = 1024
    osl: PositiveInt = 512
    duration_s: Annotated[StrictFloat, Field(gt=0)] = 120.0
    quick: dict[str, Any] = {"concurrencies": [1, 4, 16], "durationS": 12, "osl": 128}


class MultiTurn(Workload):
    # Concurrent conversations: the plan's 8. Conversations that advance in lockstep under
    # round-robin would each return to the same worker every turn (accidental session affinity)
    # and hide what a KV router adds, when their count is a multiple of the routed workers
    # (2 or 4 here). The randomised think time below (turnDelaySigma > 0: each pause drawn from
    # the conversation's own seed) is what breaks the lockstep; pre-flight notes a fixed-pause
    # workload whose count aligns (stacks/preflight/workload_checks.py lockstep_notes) and the
    # ablation report names a lockstep it sees (reports/comparisons/ablation.py).
    conversations: PositiveInt = 8
    turns: Annotated[StrictInt, Field(ge=1, le=64)] = 5
    isl: PositiveInt = 512
    osl: PositiveInt = 256
    duration_s: Annotated[StrictFloat, Field(gt=0)] = 300.0
    # Think time between a turn's answer and the next user message (AIPerf `delay`, ms): its
    # mean, and the lognormal spread of each pause around it, drawn from each conversation's
    # own seed (0: every pause exactly turnDelayMs, conversations can move in lockstep).
    turn_delay_ms: Annotated[StrictFloat, Field(ge=0, le=600_000)] = 2000.0
    turn_delay_sigma: Annotated[StrictFloat, Field(ge=0, le=3)] = 0.6
    # Quick: short answers and pauses, so a 20 s step holds ~300 requests (~130 with 64-token
    # answers and 400 ms pauses): the hit rate's standard error falls to ~1.5 points, below
    # the ~9-point gap the KV router makes over round-robin on 2 workers (README, "Multi-turn
    # load that cannot move in lockstep"). The history still grows by 512 + 16 tokens a turn.
    quick: dict[str, Any] = {"conversations": 5, "durationS": 20, "osl": 16,
                             "turnDelayMs": 250}

    @property
    def lockstep_prone(self) -> bool:
        """Every conversation runs the same schedule: equal lengths and fixed pauses."""
        return self.turn_delay_sigma == 0


class SequenceDistributions(Workload):
    distributions: Annotated[list[Literal["uniform", "zipf", "lognormal"]],
                             Field(min_length=1)] = ["uniform", "zipf", "lognormal"]
    isl_min: PositiveInt = 128
    isl_max: PositiveInt = 4096
    osl_min: PositiveInt = 64
    osl_max: PositiveInt = 2048
    concurrency: PositiveInt = 16
    requests: PositiveInt = 320
    zipf_exponent: Annotated[StrictFloat, Field(gt=1.0, le=5.0)] = 1.5
    lognormal_sigma: Annotated[StrictFloat, Field(gt=0.0, le=3.0)] = 0.8
    quick: dict[str, Any] = {"requests": 32, "islMax": 2048, "oslMax": 256}

    @model_validator(mode="after")
    def _ranges_ordered(self) -> Self:
        if self.isl_min > self.isl_max:
            raise field_error("islMin", message=f"islMin {self.isl_min} > islMax "
                              f"{self.isl_max}: swap them")
        if self.osl_min > self.osl_max:
            raise field_error("oslMin", message=f"oslMin {self.osl_min} > oslMax "
                              f"{self.osl_max}: swap them")
        return self


class PrefixCache(Workload):
    shares: Annotated[list[Share], Field(min_length=1)] = [0.0, 0.25, 0.5, 0.75, 1.0]
    isl: PositiveInt = 2048
    osl: PositiveInt = 512
    concurrency: PositiveInt = 16
    requests: PositiveInt = 160
    # Tokens per hash id in the Mooncake-style dataset; the share is exact in whole blocks.
    block_size: PositiveInt = 512
    cold_restart: ColdRestart = "every-step"
    # quick: three shares, the ends and the middle (each step costs ~7 s of AIPerf start-up and
    # export on the local engine whatever its requests; five took `make demo` past 10 minutes)
    quick: dict[str, Any] = {"requests": 32, "osl": 64, "shares": [0.0, 0.5, 1.0]}

    @model_validator(mode="after")
    def _isl_in_blocks(self) -> Self:
        if self.isl % self.block_size:
            raise field_error("isl", message=f"isl {self.isl} must be a multiple of blockSize "
                              f"{self.block_size} so every share is exact: round it")
        return self


# What a trace replay sends: the seeded generator, one of the public traces shipped in
# stacks/catalog/traces/ (by name, checksum-verified), or a user's own Mooncake-format file.
TraceSource = Literal["synthetic", "mooncake-conversation", "mooncake-synthetic", "file"]
# Fields only the seeded generator reads, and fields only a replayed trace reads: setting one
# for the other kind of source is a mistake, reported instead of silently ignored.
SYNTHETIC_ONLY = ("isl", "osl", "reuse", "requests", "block_size", "isl_sigma")
REPLAY_ONLY = ("file", "sha256", "window_start_s", "window_s", "max_requests", "speed_up")
# Quick scale of a replayed trace (unless the stack gives its own quick block): its first
# requests only.
REPLAY_QUICK: dict[str, Any] = {"maxRequests": 32}


class TraceReplay(Workload):
    enabled: StrictBool = False
    source: TraceSource = "synthetic"
    # --- source: synthetic (the seeded Mooncake-style generator) ---
    isl: PositiveInt = 8192
    osl: PositiveInt = 1024
    reuse: Share = 0.70
    requests: PositiveInt = 200
    block_size: PositiveInt = 512
    # Lognormal spread of input lengths around the median `isl` (0: every row exactly isl).
    # Chat traces have a long tail of accumulated context, part of it beyond maxModelLen; such
    # rows are dropped (or their output clipped) before the step and counted in the run record.
    isl_sigma: Annotated[StrictFloat, Field(ge=0.0, le=3.0)] = 0.0
    # --- a replayed trace (public or file): its own timestamps, lengths and block hashes ---
    # source: file: a Mooncake-format JSONL (.jsonl or .jsonl.gz), relative to the project
    # root (the folder holding Pulumi.yaml) or absolute; sha256 (of the uncompressed JSONL),
    # when given, is verified before anything runs.
    file: str | None = None
    sha256: Annotated[str | None, Field(pattern=r"^[0-9a-f]{64}$")] = None
    # The time window replayed, in seconds of trace time (None: to the trace's end), then at
    # most max_requests of its first requests (a request sample that keeps the arrival pattern
    # and the prefix structure of its stretch of trace).
    window_start_s: Annotated[StrictFloat, Field(ge=0)] = 0.0
    window_s: Annotated[StrictFloat | None, Field(gt=0)] = None
    max_requests: PositiveInt | None = None
    # Arrival timestamps divided by this (2: twice the trace's request rate).
    speed_up: Annotated[StrictFloat, Field(gt=0, le=1000)] = 1.0
    # One step per entry: the generator's concurrency, or for a replayed trace the cap on
    # requests in flight (AIPerf's --concurrency with its fixed schedule: a request due while
    # the cap is reached waits, and the report shows its lag).
    concurrencies: Annotated[list[PositiveInt], Field(min_length=1)] = [16]
    # After each step (cold: workers restarted), replay the same trace, same prompts, without a
    # restart: a warm-cache step beside every cold one.
    warm_pass: StrictBool = False
    # Fresh hash ids per concurrency and repeat: one restart before the first step suffices.
    cold_restart: ColdRestart = "first-step"
    quick: dict[str, Any] = {"requests": 24, "isl": 2048, "osl": 64}

    @model_validator(mode="before")
    @classmethod
    def _replay_quick_default(cls, data: Any) -> Any:
        # The generator's quick block (shorter lengths) means nothing to a replayed trace.
        if isinstance(data, dict) and "quick" not in data and \
                data.get("source", "synthetic") != "synthetic":
            data = {**data, "quick": REPLAY_QUICK}
        return data

    @property
    def replays_trace(self) -> bool:
        return self.source != "synthetic"

    @model_validator(mode="after")
    def _fields_match_the_source(self) -> Self:
        wrong, why = ((SYNTHETIC_ONLY, "shapes the seeded generator (source: synthetic) only; "
                       "a replayed trace brings its own lengths, reuse and block size")
                      if self.replays_trace else
                      (REPLAY_ONLY, "is read only when replaying a trace (source: "
                       "mooncake-conversation, mooncake-synthetic or file)"))
        # By value, not by what the file named: a run record stores every field, defaults too.
        for name in wrong:
            if getattr(self, name) != type(self).model_fields[name].default:
                raise field_error(to_camel(name), message=f"{to_camel(name)} {why}: remove it")
        if (self.source == "file") != (self.file is not None):
            raise field_error("file", message="source: file needs file (a Mooncake-format "
                              ".jsonl or .jsonl.gz), and file is read only with source: file")
        if self.file is not None and not self.file.endswith((".jsonl", ".jsonl.gz")):
            raise field_error("file", message=f"'{self.file}' is not a .jsonl or .jsonl.gz "
                              "file: point it at a Mooncake-format JSONL trace")
        if self.sha256 is not None and self.source != "file":
            raise field_error("sha256", message="the public traces are verified against "
                              "their published checksums: remove sha256")
        return self


class WorkloadsConfig(Schema):
    seed: StrictInt = 20261130
    warmup_requests: Annotated[StrictInt, Field(ge=0)] = 8
    # A step whose failed-request fraction is above this is marked failed in the manifest.
    error_rate_threshold: Annotated[StrictFloat, Field(ge=0.0, le=1.0)] = 0.01
    request_timeout_s: Annotated[StrictFloat, Field(gt=0)] = 600.0
    repeats: Annotated[StrictInt, Field(ge=1, le=20)] = 1
    concurrency_sweep: ConcurrencySweep = ConcurrencySweep()
    multi_turn: MultiTurn = MultiTurn()
    sequence_distributions: SequenceDistributions = SequenceDistributions()
    prefix_cache: PrefixCache = PrefixCache()
    trace_replay: TraceReplay = TraceReplay()

    @model_validator(mode="after")
    def _quick_is_valid(self) -> Self:
        for name in WORKLOAD_NAMES:
            try:
                getattr(self, name).at_scale("quick")
            except ValidationError as exc:  # report it at <workload>.quick.<field>
                raise relocated(exc, to_camel(name), "quick") from None
        return self

    def enabled(self) -> dict[str, Workload]:
        """Enabled workloads by their config name (snake_case), in plan order."""
        return {n: getattr(self, n) for n in WORKLOAD_NAMES if getattr(self, n).enabled}

    def restricted_to(self, only: list[str], stack: str) -> WorkloadsConfig:
        """These workloads with every enabled one not in `only` switched off (what a run
        limited to `only` runs, for the estimator); an unknown or disabled name is refused."""
        unknown = [w for w in only if w not in WORKLOAD_NAMES]
        if unknown:
            raise ValueError(f"unknown workload(s) {unknown}: use {', '.join(WORKLOAD_NAMES)}")
        enabled = self.enabled()
        disabled = [w for w in only if w not in enabled]
        if disabled:
            raise ValueError(f"workload(s) {disabled} are disabled in stack '{stack}': "
                             "set enabled: true under dynamo-bench:workloads")
        return self.model_copy(update={n: getattr(self, n).model_copy(update={"enabled": False})
                                       for n in enabled if n not in only})


WORKLOAD_NAMES = ("concurrency_sweep", "multi_turn", "sequence_distributions", "prefix_cache",
                  "trace_replay")
