"""The dynamo-bench policy pack: `pulumi preview --policy-pack components/policy_pack`.

Building a PolicyPack starts the policy server and blocks, so it happens only here; the
policies live in components/policies.py where the tests call them directly.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pulumi_policy import PolicyPack  # noqa: E402

from components.policies import POLICIES  # noqa: E402

# a list of its own: PolicyPack takes a List[Policy], which a list of the resource policies
# is not to the type checker (list is invariant)
PolicyPack(name="dynamo-bench", policies=list(POLICIES))
