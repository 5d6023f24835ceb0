"""The cluster side of a stack's schema: `cluster` (compute mode, node groups, network),
`storage` and `monitoring`. Re-exported by stacks.config.schema, which most code imports."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictInt, model_validator

from stacks.config.errors import field_error
from stacks.config.recipe_config import RdmaDevicePlugin
from stacks.config.schema_base import Schema

# --- cluster -------------------------------------------------------------------------------

class ComputeMode(str, Enum):
    AUTO = "auto"
    NODEGROUPS = "nodegroups"


class CapacityType(str, Enum):
    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVATION = "reservation"          # an On-Demand Capacity Reservation (cr-...)
    CAPACITY_BLOCK = "capacity-block"    # an EC2 Capacity Block for ML (also cr-...)


class Provisioning(str, Enum):
    """EKS Auto Mode NodePool mode (stacks.preflight.auto_mode): `count` nodes kept, or up to
    `count`."""
    STATIC = "static"
    DYNAMIC = "dynamic"


class NodeGroup(Schema):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,38}$")]
    instance_type: str
    count: Annotated[StrictInt, Field(ge=0, le=64)]
    capacity_type: CapacityType = CapacityType.ON_DEMAND
    capacity_reservation_id: Annotated[str | None, Field(pattern=r"^cr-[0-9a-f]{8,17}$")] = None
    # Pin the group to one AZ (EFA and capacity reservations live in one AZ).
    availability_zone: str | None = None
    disk_gib: Annotated[StrictInt, Field(ge=20, le=16384)] = 200
    # computeMode auto only; unset: static for CPU groups, dynamic for GPU groups.
    provisioning: Provisioning | None = None

    @model_validator(mode="after")
    def _reservation_needs_id(self) -> NodeGroup:
        reserved = self.capacity_type in (CapacityType.RESERVATION, CapacityType.CAPACITY_BLOCK)
        if reserved and not self.capacity_reservation_id:
            raise field_error("capacityReservationId", message="capacityType "
                              f"{self.capacity_type.value} needs capacityReservationId "
                              "(cr-...): set it or use capacityType: on-demand")
        if self.capacity_reservation_id and not reserved:
            raise field_error("capacityType", message="capacityReservationId is set but "
                              f"capacityType is {self.capacity_type.value}: set capacityType: "
                              "reservation (or capacity-block)")
        return self


class VpcConfig(Schema):
    id: Annotated[str | None, Field(pattern=r"^vpc-[0-9a-f]{8,17}$")] = None
    private_subnet_ids: list[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = []
    cidr: str = "10.42.0.0/16"
    availability_zones: Annotated[StrictInt, Field(ge=2, le=6)] = 3

    @model_validator(mode="after")
    def _existing_vpc_needs_subnets(self) -> VpcConfig:
        if self.id and len(self.private_subnet_ids) < 2:
            raise field_error("privateSubnetIds", message="an existing vpc.id needs two or more "
                              "privateSubnetIds in different AZs: list them or drop vpc.id")
        return self


class ClusterConfig(Schema):
    # A variant stack names its base stack here and builds only its serving deployment.
    attach_to: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9_.-]+$")] = None
    # Checked by pre-flight against botocore's region data (stacks.preflight.aws_checks).
    region: str = "us-east-1"
    # Checked by pre-flight against the EKS version lifecycle catalogue
    # (stacks.catalog.eks_versions).
    eks_version: str = "1.35"
    compute_mode: ComputeMode = ComputeMode.NODEGROUPS
    node_groups: list[NodeGroup] = []
    vpc: VpcConfig = VpcConfig()
    # Multinode workers (one TP group across nodes) are off unless asked for.
    allow_multinode: StrictBool = False
    # RDMA device plugin (InfiniBand for NIXL/UCX); its resource name is what workers request.
    rdma: RdmaDevicePlugin | None = None
    # A base whose variants also run on this base (same group names), as `<variant>.<this>`.
    variants_of: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9_-]+$")] = None

    @model_validator(mode="after")
    def _unique_groups(self) -> ClusterConfig:
        names = [g.name for g in self.node_groups]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise field_error("nodeGroups", i, "name", message=f"node group name '{name}' "
                                  "is repeated: give each group its own name")
        return self

    def group(self, name: str) -> NodeGroup | None:
        return next((g for g in self.node_groups if g.name == name), None)


# --- storage / monitoring ------------------------------------------------------------------

class StorageConfig(Schema):
    efs_throughput_mode: Literal["elastic", "bursting"] = "elastic"
    model_cache_gib: Annotated[StrictInt, Field(ge=10, le=10000)] = 200
    results_gib: Annotated[StrictInt, Field(ge=1, le=1000)] = 20
    # The model download Job's deadline; large checkpoints take long on first start.
    download_timeout_minutes: Annotated[StrictInt, Field(ge=5, le=600)] = 90


class MonitoringConfig(Schema):
    enabled: StrictBool = True
    kube_prometheus_stack_version: str = "79.5.0"
    retention: Annotated[str, Field(pattern=r"^\d+[hdw]$")] = "15d"
    scrape_interval_s: Annotated[StrictInt, Field(ge=1, le=300)] = 15
    grafana: StrictBool = True
    # Install DCGM exporter; Auto Mode nodes and the GPU AMI do not ship one.
    dcgm_exporter: StrictBool = True
