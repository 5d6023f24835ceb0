"""Planted leftovers for the teardown-audit tests: one resource of every kind the stacks (and
the controllers they install) create, with the tags a given owner would give them.

`plant` returns {key: id as the audit prints it}; `exists` says whether that id is still there,
asking each service directly (not through the audit under test).
"""

from __future__ import annotations

import json

from botocore.exceptions import ClientError

REGION = "us-east-1"
POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]})
TRUST = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "sts:AssumeRole",
     "Principal": {"Service": "ec2.amazonaws.com"}}]})


def stack_tags(stack: str | None, project: bool = True) -> dict[str, str]:
    """What a stack's resources carry (components/tags.py): project, stack, experiment."""
    tags = {"project": "dynamo-bench"} if project else {}
    if stack:
        tags |= {"stack": stack, "experiment": "audit-test"}
    return tags


def plant(c, label: str, tags: dict[str, str], cidr: str, cluster: str,
          region: str = REGION) -> dict[str, str]:
    """One of each kind, tagged `tags` (plus Name); EKS cluster named `cluster`."""
    ec2, efs, elb, elbv2, eks, iam = (c(s) for s in ("ec2", "efs", "elb", "elbv2", "eks", "iam"))
    tag_list = [{"Key": k, "Value": v} for k, v in {**tags, "Name": f"{label}-left"}.items()]

    def spec(rtype: str) -> list[dict]:
        return [{"ResourceType": rtype, "Tags": tag_list}]
    ids: dict[str, str] = {}
    vpc = ids["vpc"] = ec2.create_vpc(CidrBlock=cidr, TagSpecifications=spec("vpc"))["Vpc"][
        "VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=cidr.replace("0.0/16", f"{i}.0/24"),
                                 AvailabilityZone=f"{region}{az}",
                                 TagSpecifications=spec("subnet"))["Subnet"]["SubnetId"]
               for i, az in ((1, "a"), (2, "b"))]
    ids["subnet"], ids["subnet2"] = subnets
    ids["sg"] = ec2.create_security_group(GroupName=f"{label}-sg", Description="nodes",
                                          VpcId=vpc, TagSpecifications=spec("security-group"))[
        "GroupId"]
    ids["igw"] = ec2.create_internet_gateway(TagSpecifications=spec("internet-gateway"))[
        "InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=ids["igw"], VpcId=vpc)
    ids["rtb"] = ec2.create_route_table(VpcId=vpc, TagSpecifications=spec("route-table"))[
        "RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=ids["rtb"], SubnetId=subnets[0])
    ids["instance"] = ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m7i.4xlarge",
        SubnetId=subnets[0], TagSpecifications=spec("instance"))["Instances"][0]["InstanceId"]
    ids["volume"] = ec2.create_volume(AvailabilityZone=f"{region}a", Size=100,
                                      TagSpecifications=spec("volume"))["VolumeId"]
    ids["snapshot"] = ec2.create_snapshot(VolumeId=ids["volume"],
                                          TagSpecifications=spec("snapshot"))["SnapshotId"]
    ids["eni"] = ec2.create_network_interface(SubnetId=subnets[0],
                                              TagSpecifications=spec("network-interface"))[
        "NetworkInterface"]["NetworkInterfaceId"]
    ids["eip"] = ec2.allocate_address(Domain="vpc", TagSpecifications=spec("elastic-ip"))[
        "AllocationId"]
    ids["nat"] = ec2.create_nat_gateway(SubnetId=subnets[1], AllocationId=ids["eip"],
                                        TagSpecifications=spec("natgateway"))["NatGateway"][
        "NatGatewayId"]
    ids["lt"] = ec2.create_launch_template(
        LaunchTemplateName=f"{label}-gpu", TagSpecifications=spec("launch-template"),
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "p4d.24xlarge"})[
        "LaunchTemplate"]["LaunchTemplateId"]
    ids["pg"] = f"{label}-efa"
    ec2.create_placement_group(GroupName=ids["pg"], Strategy="cluster",
                               TagSpecifications=spec("placement-group"))
    ids["asg"] = f"eks-{label}-gpu"
    c("autoscaling").create_auto_scaling_group(
        AutoScalingGroupName=ids["asg"], MinSize=0, MaxSize=1, DesiredCapacity=0,
        LaunchTemplate={"LaunchTemplateId": ids["lt"]}, VPCZoneIdentifier=subnets[0],
        Tags=[{**t, "PropagateAtLaunch": True} for t in tag_list])
    ids["efs"] = efs.create_file_system(CreationToken=f"{label}-models", Tags=tag_list)[
        "FileSystemId"]
    efs.create_mount_target(FileSystemId=ids["efs"], SubnetId=subnets[0])
    ids["fsap"] = efs.create_access_point(FileSystemId=ids["efs"], Tags=tag_list)[
        "AccessPointId"]
    ids["clb"] = f"{label}-clb"
    elb.create_load_balancer(LoadBalancerName=ids["clb"], Subnets=[subnets[0]], Tags=tag_list,
                             Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80,
                                         "InstancePort": 80}])
    ids["nlb"] = elbv2.create_load_balancer(Name=f"{label}-nlb", Subnets=subnets,
                                            Type="network", Tags=tag_list)["LoadBalancers"][0][
        "LoadBalancerArn"]
    ids["tg"] = elbv2.create_target_group(Name=f"{label}-tg", Protocol="TCP", Port=80,
                                          VpcId=vpc, Tags=tag_list)["TargetGroups"][0][
        "TargetGroupArn"]
    ids["eks"] = cluster
    eks.create_cluster(name=cluster, roleArn="arn:aws:iam::123456789012:role/eks",
                       resourcesVpcConfig={"subnetIds": subnets}, tags=dict(tags))
    ids["nodegroup"] = f"{label}-gpu"
    eks.create_nodegroup(clusterName=cluster, nodegroupName=ids["nodegroup"], subnets=subnets,
                         nodeRole="arn:aws:iam::123456789012:role/node", tags=dict(tags))
    logs = c("logs")
    log_group = f"/aws/eks/{cluster}/cluster"   # EKS names it after the cluster, untagged
    logs.create_log_group(logGroupName=log_group)
    ids["log"] = f"arn:aws:logs:{region}:123456789012:log-group:{log_group}"
    ids.update(plant_iam(iam, label, tag_list))
    return ids


def plant_iam(iam, label: str, tag_list: list[dict]) -> dict[str, str]:
    """A node role (managed + inline policy, in an instance profile), a customer policy
    attached to it, an OIDC provider."""
    role = iam.create_role(RoleName=f"{label}-node-role", AssumeRolePolicyDocument=TRUST,
                           Tags=tag_list)["Role"]
    policy = iam.create_policy(PolicyName=f"{label}-policy", PolicyDocument=POLICY,
                               Tags=tag_list)["Policy"]
    iam.attach_role_policy(RoleName=role["RoleName"], PolicyArn=policy["Arn"])
    iam.put_role_policy(RoleName=role["RoleName"], PolicyName="inline", PolicyDocument=POLICY)
    profile = iam.create_instance_profile(InstanceProfileName=f"{label}-profile",
                                          Tags=tag_list)["InstanceProfile"]
    iam.add_role_to_instance_profile(InstanceProfileName=profile["InstanceProfileName"],
                                     RoleName=role["RoleName"])
    oidc = iam.create_open_id_connect_provider(
        Url=f"https://oidc.eks.{REGION}.amazonaws.com/id/{label.upper()}",
        ThumbprintList=["a" * 40], Tags=tag_list)["OpenIDConnectProviderArn"]
    return {"role": role["Arn"], "policy": policy["Arn"], "profile": profile["Arn"],
            "oidc": oidc}


def plant_controller_made(c, cluster: str, file_system: str, region: str = REGION
                          ) -> dict[str, str]:
    """What controllers make for a cluster without the stack's tags: a CSI volume tagged only
    kubernetes.io/cluster/<cluster>=owned, the EKS cluster security group (aws:eks:cluster-name),
    a managed node group's instance (eks:cluster-name), a CSI access point on the stack's file
    system with only the driver's own tag."""
    ec2 = c("ec2")

    def spec(rtype: str, tags: dict[str, str]) -> list[dict]:
        return [{"ResourceType": rtype, "Tags": [{"Key": k, "Value": v}
                                                 for k, v in tags.items()]}]
    ids = {"csi-volume": ec2.create_volume(
        AvailabilityZone=f"{region}a", Size=50, TagSpecifications=spec("volume", {
            f"kubernetes.io/cluster/{cluster}": "owned", "ebs.csi.aws.com/cluster": "true"}))[
        "VolumeId"]}
    vpc = ec2.describe_vpcs(Filters=[{"Name": "tag:project", "Values": ["dynamo-bench"]}])[
        "Vpcs"][0]["VpcId"]
    ids["cluster-sg"] = ec2.create_security_group(
        GroupName=f"eks-cluster-sg-{cluster}", Description="EKS created security group",
        VpcId=vpc, TagSpecifications=spec("security-group", {
            "aws:eks:cluster-name": cluster, f"kubernetes.io/cluster/{cluster}": "owned"}))[
        "GroupId"]
    ids["node"] = ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="p4d.24xlarge",
        TagSpecifications=spec("instance", {"eks:cluster-name": cluster,
                                            "eks:nodegroup-name": "gpu"}))["Instances"][0][
        "InstanceId"]
    ids["csi-ap"] = c("efs").create_access_point(
        FileSystemId=file_system, Tags=[{"Key": "efs.csi.aws.com/cluster", "Value": "true"}])[
        "AccessPointId"]
    return ids


def exists(c, key: str, rid: str) -> bool:
    """Whether a planted resource is still there, asked of its own service by id."""
    ec2 = c("ec2")
    try:
        if key in ("instance", "node"):
            state = ec2.describe_instances(InstanceIds=[rid])["Reservations"][0]["Instances"][0][
                "State"]["Name"]
            return state != "terminated"
        checks = {
            "volume": lambda: ec2.describe_volumes(VolumeIds=[rid])["Volumes"],
            "csi-volume": lambda: ec2.describe_volumes(VolumeIds=[rid])["Volumes"],
            "snapshot": lambda: ec2.describe_snapshots(SnapshotIds=[rid])["Snapshots"],
            "eni": lambda: ec2.describe_network_interfaces(NetworkInterfaceIds=[rid])[
                "NetworkInterfaces"],
            "sg": lambda: ec2.describe_security_groups(GroupIds=[rid])["SecurityGroups"],
            "cluster-sg": lambda: ec2.describe_security_groups(GroupIds=[rid])["SecurityGroups"],
            "eip": lambda: ec2.describe_addresses(AllocationIds=[rid])["Addresses"],
            "nat": lambda: [n for n in ec2.describe_nat_gateways(NatGatewayIds=[rid])[
                "NatGateways"] if n["State"] != "deleted"],
            "lt": lambda: ec2.describe_launch_templates(LaunchTemplateIds=[rid])[
                "LaunchTemplates"],
            "pg": lambda: ec2.describe_placement_groups(GroupNames=[rid])["PlacementGroups"],
            "igw": lambda: ec2.describe_internet_gateways(InternetGatewayIds=[rid])[
                "InternetGateways"],
            "rtb": lambda: ec2.describe_route_tables(RouteTableIds=[rid])["RouteTables"],
            "subnet": lambda: ec2.describe_subnets(SubnetIds=[rid])["Subnets"],
            "subnet2": lambda: ec2.describe_subnets(SubnetIds=[rid])["Subnets"],
            "vpc": lambda: ec2.describe_vpcs(VpcIds=[rid])["Vpcs"],
            "asg": lambda: c("autoscaling").describe_auto_scaling_groups(
                AutoScalingGroupNames=[rid])["AutoScalingGroups"],
            "efs": lambda: [f for f in c("efs").describe_file_systems()["FileSystems"]
                            if f["FileSystemId"] == rid],
            "fsap": lambda: [a for a in c("efs").describe_access_points()["AccessPoints"]
                             if a["AccessPointId"] == rid],
            "csi-ap": lambda: [a for a in c("efs").describe_access_points()["AccessPoints"]
                               if a["AccessPointId"] == rid],
            "clb": lambda: [d for d in c("elb").describe_load_balancers()[
                "LoadBalancerDescriptions"] if d["LoadBalancerName"] == rid],
            "nlb": lambda: [d for d in c("elbv2").describe_load_balancers()["LoadBalancers"]
                            if d["LoadBalancerArn"] == rid],
            "tg": lambda: [t for t in c("elbv2").describe_target_groups()["TargetGroups"]
                           if t["TargetGroupArn"] == rid],
            "eks": lambda: rid in c("eks").list_clusters()["clusters"],
            "nodegroup": lambda: any(rid in c("eks").list_nodegroups(clusterName=cl)[
                "nodegroups"] for cl in c("eks").list_clusters()["clusters"]),
            "log": lambda: c("logs").describe_log_groups(
                logGroupNamePrefix=rid.split(":log-group:")[1])["logGroups"],
            "role": lambda: c("iam").get_role(RoleName=rid.rsplit("/", 1)[1]),
            "policy": lambda: c("iam").get_policy(PolicyArn=rid),
            "profile": lambda: c("iam").get_instance_profile(
                InstanceProfileName=rid.rsplit("/", 1)[1]),
            "oidc": lambda: c("iam").get_open_id_connect_provider(OpenIDConnectProviderArn=rid),
        }
        return bool(checks[key]())
    except ClientError as exc:
        code = exc.response["Error"]["Code"]
        if "NotFound" in code or code.startswith(("NoSuch", "Invalid")) or "Unknown" in code:
            return False
        raise
