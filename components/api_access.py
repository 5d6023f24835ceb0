"""The EKS endpoint arguments for the access the deployer asked for
(stacks/config/api_access.py)."""

from __future__ import annotations

from stacks.config.api_access import ApiAccess


def eks_endpoint_args(access: ApiAccess) -> dict:
    """pulumi-eks Cluster arguments for the endpoint."""
    if not access.public_cidrs:
        return {"endpoint_private_access": True, "endpoint_public_access": False}
    return {"endpoint_private_access": True, "endpoint_public_access": True,
            "public_access_cidrs": list(access.public_cidrs)}
