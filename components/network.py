"""The stack's network: a new VPC (private subnets across AZs behind one NAT gateway) or an
existing VPC given by id with its private subnets."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.node_specs import choose_zones, eks_usable_zones, pinned_zone, subnet_plan
from stacks.catalog.eks_zones import SOURCE as EKS_ZONES_SOURCE
from stacks.catalog.eks_zones import refused_zone_ids
from stacks.config.api_access import ApiAccess
from stacks.config.schema import StackConfig


@dataclass(frozen=True)
class StackOnAws:
    """The args of the cluster and its network: the stack, its cost tags, the AWS provider and
    who may reach the Kubernetes API endpoint."""

    stack: StackConfig
    tags: dict[str, str]
    provider: aws.Provider
    api_access: ApiAccess = ApiAccess(())
    # Nodes each own group runs now (dynamo-bench:nodeGroupSizes, set by a campaign); a group
    # not named runs its count.
    node_group_sizes: dict[str, int] | None = None


class Network(pulumi.ComponentResource):
    """VPC, subnets, routing. `subnets_by_zone` maps each AZ to its private subnet id."""

    vpc_id: pulumi.Output[str]
    vpc_cidr: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Output[str]]
    public_subnet_ids: list[pulumi.Output[str]]
    subnets_by_zone: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: StackOnAws, opts: pulumi.ResourceOptions | None = None):
        super().__init__("dynamo-bench:infra:Network", name, None, opts)
        self._args = args
        self._invoke = pulumi.InvokeOptions(provider=args.provider)
        self._child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        vpc = args.stack.cluster.vpc
        if vpc.id:
            self._existing(vpc.id, vpc.private_subnet_ids)
        else:
            self._create(name)
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids})

    def _tags(self, name: str, **extra: str) -> dict[str, str]:
        return {**self._args.tags, "Name": name, **extra}

    def _existing(self, vpc_id: str, subnet_ids: list[str]) -> None:
        found = aws.ec2.get_vpc(id=vpc_id, opts=self._invoke)
        self.vpc_id = pulumi.Output.from_input(vpc_id)
        self.vpc_cidr = pulumi.Output.from_input(found.cidr_block)
        self.subnets_by_zone = {}
        refused = refused_zone_ids(self._args.stack.cluster.region)
        for sid in subnet_ids:
            subnet = aws.ec2.get_subnet(id=sid, opts=self._invoke)
            if subnet.availability_zone_id in refused:
                raise ValueError(f"subnet {sid} is in zone ID {subnet.availability_zone_id}, "
                                 f"where EKS refuses cluster subnets ({EKS_ZONES_SOURCE}): "
                                 "fix cluster.vpc.privateSubnetIds (subnets of other zones)")
            self.subnets_by_zone.setdefault(subnet.availability_zone, pulumi.Output.from_input(sid))
        self.private_subnet_ids = [pulumi.Output.from_input(s) for s in subnet_ids]
        self.public_subnet_ids = []

    def _create(self, name: str) -> None:
        stack = self._args.stack
        found = aws.get_availability_zones(state="available", opts=self._invoke)
        asked = [g.availability_zone for g in stack.cluster.node_groups if g.availability_zone]
        # every subnet goes to the EKS control plane: none in a zone ID EKS refuses
        available = eks_usable_zones(found.names, found.zone_ids, stack.cluster.region, asked)
        pinned = [z for g in stack.cluster.node_groups
                  if (z := pinned_zone(g, stack, available))]
        zones = choose_zones(available, stack.cluster.vpc.availability_zones, pinned)
        plan = subnet_plan(stack.cluster.vpc.cidr, zones)
        opts = self._child
        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=stack.cluster.vpc.cidr,
                          enable_dns_hostnames=True, enable_dns_support=True,
                          tags=self._tags(f"{name}-vpc"), opts=opts)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=self._tags(f"{name}-igw"),
                                      opts=opts)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public", vpc_id=vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags=self._tags(f"{name}-public"), opts=opts)
        self.public_subnet_ids, self.private_subnet_ids, self.subnets_by_zone = [], [], {}
        for p in plan:
            public = aws.ec2.Subnet(
                f"{name}-public-{p.zone}", vpc_id=vpc.id, cidr_block=p.public_cidr,
                availability_zone=p.zone, map_public_ip_on_launch=False,
                tags=self._tags(f"{name}-public-{p.zone}", **{"kubernetes.io/role/elb": "1"}),
                opts=opts)
            aws.ec2.RouteTableAssociation(f"{name}-public-{p.zone}", subnet_id=public.id,
                                          route_table_id=public_rt.id, opts=opts)
            private = aws.ec2.Subnet(
                f"{name}-private-{p.zone}", vpc_id=vpc.id, cidr_block=p.private_cidr,
                availability_zone=p.zone,
                tags=self._tags(f"{name}-private-{p.zone}",
                                **{"kubernetes.io/role/internal-elb": "1"}),
                opts=opts)
            self.public_subnet_ids.append(public.id)
            self.private_subnet_ids.append(private.id)
            self.subnets_by_zone[p.zone] = private.id
        # One NAT gateway: image and model pulls leave through it; a second would double the
        # fixed cost of every stack for an availability the benchmark does not need.
        eip = aws.ec2.Eip(f"{name}-nat", domain="vpc", tags=self._tags(f"{name}-nat"), opts=opts)
        nat = aws.ec2.NatGateway(f"{name}-nat", allocation_id=eip.id,
                                 subnet_id=self.public_subnet_ids[0],
                                 tags=self._tags(f"{name}-nat"),
                                 opts=pulumi.ResourceOptions.merge(
                                     opts, pulumi.ResourceOptions(depends_on=[igw])))
        private_rt = aws.ec2.RouteTable(
            f"{name}-private", vpc_id=vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
            tags=self._tags(f"{name}-private"), opts=opts)
        for zone, subnet_id in self.subnets_by_zone.items():
            aws.ec2.RouteTableAssociation(f"{name}-private-{zone}", subnet_id=subnet_id,
                                          route_table_id=private_rt.id, opts=opts)
        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block
