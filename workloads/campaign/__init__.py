"""`python -m workloads campaign <base> [variants...]`: a base's variants as one schedule.

Pure planning is stacks/plan/schedule.py (also what `python -m stacks plan` prices). Here:
identity.py (the kept workers' rendered specs compared byte for byte), state.py (the campaign
record, resumable), automation.py (Pulumi's Automation API: select, set config, up, destroy),
platform_aws.py / platform_local.py (deploy, run, tear down, scale, on a cluster or the local
engine), engine.py (the loop: order, concurrency, scaling ahead of need, Ctrl-C, resume) and
timeline.py (billed vs loaded GPU-hours measured after the fact).
"""
