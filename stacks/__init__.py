"""What to test: stack files, their typed config, the facts they are checked against, pre-flight
and the campaign plan.

Rooms, each importing only rooms listed before it (tests/test_import_graph.py holds this):
- `catalog/`     the world's facts with their provenance: GPUs and instance types with prices,
                 models, service prices, EKS versions, node images, public traces, metric names.
                 Imports nothing of the project's.
- `config/`      the stack file and its typed config: reading, the schema, the loader, errors.
- `conventions/` what the infrastructure and the runner must agree on, derived from config:
                 Kubernetes names, the frontend's request trace, worker identity.
- `sizing/`      the arithmetic of what a stack needs and costs: GPU memory per worker, the
                 hourly cost and wall-time estimate.
- `preflight/`   every rule that refuses a stack before anything is created, with the pod
                 packing the memory fit is checked on.
- `plan/`        a base's campaign: schedule, forecast, campaign cost and the plan view.
- `render/`      the Pulumi program run offline under mocks, and what `stacks render` writes.
The CLI sits on top: `__main__.py` (`python -m stacks`) and `cli.py` (how every CLI of the
project meets bad input).
"""
