"""The GPUs and instance types dynamo-bench knows, with their prices, as data.

The GPU/instance catalogue feeds pre-flight (memory, GPU counts, FP8 support) and the cost
estimates. Prices are on-demand, Linux, us-east-1, each with the date and source it came from;
the runner prefers the AWS pricing API at run time and the report says which one was used.
The models served are in stacks.catalog.models.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class Gpu(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    # Usable device memory as the driver reports it (nvidia-smi "Total"), in MiB: marketing
    # "48 GB" of an L40S is 46,068 MiB, and pre-flight must not promise memory that is not there.
    memory_mib: int
    fp8_tensor_cores: bool
    # CUDA compute capability (major, minor): what vLLM's kernel selection asks the device
    # (`current_platform.get_device_capability()`), so pre-flight judges a kernel choice at the
    # stack's GPU, not at the CPU it runs on (NVIDIA's CUDA GPU list,
    # developer.nvidia.com/cuda-gpus: A100 8.0, L40S 8.9, H100 9.0, B200 10.0).
    compute_capability: tuple[int, int]
    fp4_tensor_cores: bool = False

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024


class Fabric(str, Enum):
    """The node-to-node network a KV transfer between disaggregated workers can use.

    - tcp: ENA only; NIXL stages KV through host memory over TCP.
    - efa: AWS Elastic Fabric Adapter. Reached through libfabric (NIXL's LIBFABRIC backend and
      the `vpc.amazonaws.com/efa` device plugin). EFA devices are verbs devices without MAD
      support, so the kernel creates no umad device: the Mellanox RDMA shared device plugin
      advertises 0 `rdma/*` units on them, and UCX's InfiniBand (rc) transports do not run.
    - infiniband: ConnectX HCAs (InfiniBand or RoCE), the B200 recipes' home clusters: NIXL over
      UCX with an `rdma/ib` / `rdma/shared_ib` device. No AWS instance type has it; it is kept
      for catalogue entries of such clusters.
    """

    TCP = "tcp"
    EFA = "efa"
    INFINIBAND = "infiniband"


class InstanceType(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    gpu: Gpu | None
    gpus_per_node: int
    vcpus: int
    memory_gib: int
    on_demand_usd_per_hour: float
    price_date: str
    price_source: str
    efa_interfaces: int = 0
    # Unset: efa when the type has EFA interfaces, else tcp (true of every AWS type).
    fabric: Fabric = Fabric.TCP

    @model_validator(mode="before")
    @classmethod
    def _default_fabric(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("fabric") is None:
            efa = (data.get("efa_interfaces") or 0) > 0
            data = {**data, "fabric": Fabric.EFA if efa else Fabric.TCP}
        return data

    @model_validator(mode="after")
    def _fabric_matches_interfaces(self) -> InstanceType:
        if (self.fabric == Fabric.EFA) != (self.efa_interfaces > 0):
            raise ValueError(f"{self.name}: fabric {self.fabric.value} with "
                             f"{self.efa_interfaces} EFA interfaces; EFA types have interfaces "
                             "and only they do")
        return self

    @property
    def family(self) -> str:
        return self.name.split(".")[0]

    @property
    def price_verified(self) -> bool:
        """False for list prices nobody confirmed (stacks.catalog.service_prices says what
        counts)."""
        return self.price_source != _UNVERIFIED


A100_40GB = Gpu(name="A100-SXM4-40GB", memory_mib=40960, fp8_tensor_cores=False,
                compute_capability=(8, 0))
A100_80GB = Gpu(name="A100-SXM4-80GB", memory_mib=81920, fp8_tensor_cores=False,
                compute_capability=(8, 0))
L40S = Gpu(name="L40S", memory_mib=46068, fp8_tensor_cores=True, compute_capability=(8, 9))
H100 = Gpu(name="H100-SXM5-80GB", memory_mib=81559, fp8_tensor_cores=True,
           compute_capability=(9, 0))
B200 = Gpu(name="B200", memory_mib=183359, fp8_tensor_cores=True, fp4_tensor_cores=True,
           compute_capability=(10, 0))

_BRIEF = "AWS price list published 2026-07-28 (design brief)"
_UNVERIFIED = "unverified list price; set cost.priceOverrides or let the pricing API confirm it"

INSTANCE_TYPES: dict[str, InstanceType] = {
    it.name: it
    for it in [
        InstanceType(name="p4d.24xlarge", gpu=A100_40GB, gpus_per_node=8, vcpus=96,
                     memory_gib=1152, on_demand_usd_per_hour=21.957642,
                     price_date="2026-07-28", price_source=_BRIEF, efa_interfaces=4),
        InstanceType(name="p4de.24xlarge", gpu=A100_80GB, gpus_per_node=8, vcpus=96,
                     memory_gib=1152, on_demand_usd_per_hour=27.44705,
                     price_date="2026-07-28", price_source=_BRIEF, efa_interfaces=4),
        InstanceType(name="g6e.12xlarge", gpu=L40S, gpus_per_node=4, vcpus=48,
                     memory_gib=384, on_demand_usd_per_hour=10.49264,
                     price_date="2026-07-28", price_source=_BRIEF, efa_interfaces=1),
        # One L40S and no EFA (EFA starts at g6e.8xlarge): single-GPU trials, TCP-only transfer.
        InstanceType(name="g6e.4xlarge", gpu=L40S, gpus_per_node=1, vcpus=16, memory_gib=128,
                     on_demand_usd_per_hour=3.00424, price_date="2025-01-01",
                     price_source=_UNVERIFIED, efa_interfaces=0),
        InstanceType(name="g6e.48xlarge", gpu=L40S, gpus_per_node=8, vcpus=192,
                     memory_gib=1536, on_demand_usd_per_hour=30.13118,
                     price_date="2025-01-01", price_source=_UNVERIFIED, efa_interfaces=4),
        InstanceType(name="p5.48xlarge", gpu=H100, gpus_per_node=8, vcpus=192,
                     memory_gib=2048, on_demand_usd_per_hour=55.04,
                     price_date="2026-07-28", price_source=_BRIEF, efa_interfaces=32),
        InstanceType(name="p6-b200.48xlarge", gpu=B200, gpus_per_node=8, vcpus=192,
                     memory_gib=2048, on_demand_usd_per_hour=113.9328,
                     price_date="2025-06-01", price_source=_UNVERIFIED, efa_interfaces=8),
        # CPU nodes: system pods, monitoring, the load generator.
        InstanceType(name="m7i.2xlarge", gpu=None, gpus_per_node=0, vcpus=8, memory_gib=32,
                     on_demand_usd_per_hour=0.4032, price_date="2025-01-01",
                     price_source=_UNVERIFIED),
        InstanceType(name="m7i.4xlarge", gpu=None, gpus_per_node=0, vcpus=16, memory_gib=64,
                     on_demand_usd_per_hour=0.8064, price_date="2025-01-01",
                     price_source=_UNVERIFIED),
        InstanceType(name="c7i.8xlarge", gpu=None, gpus_per_node=0, vcpus=32, memory_gib=64,
                     on_demand_usd_per_hour=1.428, price_date="2025-01-01",
                     price_source=_UNVERIFIED),
    ]
}

# Fixed fees, per hour (us-east-1). Auto Mode adds a management fee per instance-hour that AWS
# prices per instance type; 12 % of on-demand is an approximation NOT confirmed against the
# price list (why: stacks/service_prices.AUTO_MODE_FEE); reports mark it unverified.
EKS_CONTROL_PLANE_USD_PER_HOUR = 0.10
EKS_AUTO_MODE_FEE_FRACTION = 0.12
EFS_STANDARD_USD_PER_GB_MONTH = 0.30
HOURS_PER_MONTH = 730.0
