"""A campaign before `pulumi up` (pure, but the plan view's printing): the schedule of a base's
variants (schedule), every dollar of it (campaign_cost), the forecast of hours, dollars and
GPU-hours (forecast) and what `python -m stacks plan` prints (plan_view). Per-stack cost and
time arithmetic is stacks.sizing.estimate.

Imports catalog, config, conventions, sizing and pre-flight (a stack is planned only once it
passes); nothing in stacks/ below it imports the plan.
"""
