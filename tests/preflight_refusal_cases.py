"""The one-mistake stacks of tests/test_preflight_refusals.py: each case a shipped stack with
ONE change (through its config, its text or its bytes), the field and message pre-flight must
name, and the fix its sibling passes with; across the seven classes of issue 12."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import stack_variants as sv
from stack_variants import F, Mutation, append, both, drop, edit

KINDS = ("file", "aws", "k8s", "layout", "program", "recipe", "message")
Text = Callable[[str], str]
Raw = Callable[[str], bytes]


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    source: str
    field: str
    says: str
    change: Mutation | None = None      # on the parsed config
    text: Text | None = None            # on the file's text (mistakes YAML hides)
    raw: Raw | None = None              # on the file's bytes (encodings)
    fix: Mutation | None = None         # sibling = change + fix (default: the unchanged stack)
    setup: Callable[[Path], None] | None = None
    name: str = "variant"


def after(anchor: str, *lines: str) -> Text:
    """Insert `lines` after the first line equal to `anchor` (indentation included)."""
    def mutate(text: str) -> str:
        rows = text.splitlines()
        i = rows.index(anchor)
        return "\n".join([*rows[:i + 1], *lines, *rows[i + 1:]]) + "\n"
    return mutate


def replace(old: str, new: str) -> Text:
    def mutate(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return mutate


def encode(prefix: bytes = b"", codec: str = "utf-8") -> Raw:
    return lambda text: prefix + text.encode(codec)


def latin1_comment(text: str) -> bytes:
    return ("# café au lait\n" + text).encode("latin-1")


def base_copy(name: str, changes: dict[str, object]) -> Callable[[Path], None]:
    """Write base-a100 with `changes` (dotted paths) as stack `name`."""
    def setup(stacks_dir: Path) -> None:
        config = sv.read_config(stacks_dir, "base-a100")
        for dotted, value in changes.items():
            edit(dotted, value)(config)
        sv.write_stack(stacks_dir, name, config)
    return setup


W0, W1 = "serving.workers.0", "serving.workers.1"


def extra_tag(case_id: str, key: str, value: str, says: str) -> Case:
    """One extra tag AWS (or the EBS CSI driver, or Auto Mode) would refuse."""
    return Case(case_id, "aws", "agg-a100", F + f"tags.extra.{key}", says,
                change=edit("tags", {"experiment": "a100-campaign", "extra": {key: value}}))


def worker_flags(case_id: str, args: list[str], says: str, index: int = 0,
                 source: str = "agg-a100") -> Case:
    """A worker's extraArgs that override a typed field (the flag at `index` is named)."""
    return Case(case_id, "layout", source, F + f"serving.workers[0].extraArgs[{index}]", says,
                change=edit(f"{W0}.extraArgs", args))
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"
LONG = "x" * 40

CASES = [
    # --- 1. stack files that cannot lie ------------------------------------------------------
    Case("duplicate_budget_key", "file", "agg-a100", F + "cost.budgetUsd",
         "appears twice (lines", text=after("    budgetUsd: 200", "    budgetUsd: 100000")),
    Case("duplicate_config_section", "file", "agg-a100", F + "tags", "appears twice",
         text=after("    experiment: a100-campaign", "  dynamo-bench:tags:",
                    "    experiment: other")),
    Case("duplicate_key_in_a_worker", "file", "agg-a100", F + "serving.workers[0].replicas",
         "YAML keeps only the last one", text=after("        replicas: 4",
                                                    "        replicas: 2")),
    Case("misspelled_project_namespace", "file", "agg-a100", "dynamo-bnech:cost",
         "namespace 'dynamo-bnech' is not the project's",
         text=replace("  dynamo-bench:cost:", "  dynamo-bnech:cost:")),
    Case("unknown_namespace", "file", "agg-a100", "acme:owner",
         "neither this project's (dynamo-bench) nor a provider's",
         text=after("config:", "  acme:owner: me")),
    Case("key_without_namespace", "file", "agg-a100", "cost", "config key without a namespace",
         text=replace("  dynamo-bench:cost:", "  cost:")),
    Case("unknown_project_key", "file", "agg-a100", F + "budget", "unknown config key",
         text=after("config:", "  dynamo-bench:budget: 100")),
    Case("empty_file", "file", "agg-a100", "Pulumi.variant.yaml", "is empty",
         text=lambda t: "# nothing here yet\n"),
    Case("no_config_block", "file", "agg-a100", "Pulumi.variant.yaml",
         "has no `config:` block", text=lambda t: "encryptionsalt: v1:abc\n"),
    Case("misspelled_config_block", "file", "agg-a100", "Pulumi.variant.yaml: confg",
         "'confg' is not a key of a Pulumi stack file", text=replace("config:", "confg:")),
    Case("empty_config_block", "file", "agg-a100", "Pulumi.variant.yaml: config",
         "`config:` is empty", text=lambda t: "config: {}\n"),
    Case("null_section", "file", "agg-a100", F + "cost", "is empty (null)",
         text=replace("  dynamo-bench:cost:\n    budgetUsd: 200\n    setupHours: 0.25\n",
                      "  dynamo-bench:cost:\n")),
    Case("key_read_as_boolean", "file", "disagg-b200-kexaone",
         F + "serving.workers[0].env.on", "read by YAML as a non-string",
         text=replace('env: {VLLM_NIXL_SIDE_CHANNEL_PORT: "5560"}',
                      'env: {VLLM_NIXL_SIDE_CHANNEL_PORT: "5560", on: "1"}')),
    Case("byte_order_mark", "file", "agg-a100", "Pulumi.variant.yaml",
         "starts with a UTF-8 byte-order mark", raw=encode(b"\xef\xbb\xbf")),
    Case("utf16_file", "file", "agg-a100", "Pulumi.variant.yaml", "is UTF-16 or UTF-32",
         raw=encode(codec="utf-16")),
    Case("stray_latin1_byte", "file", "agg-a100", "Pulumi.variant.yaml:1",
         "byte 0xE9 at line 1, column 6 is not UTF-8", raw=latin1_comment),
    Case("yaml_syntax_error", "file", "agg-a100", "Pulumi.variant.yaml:4",
         "is not valid YAML (line 4, column 20): while parsing a flow mapping",
         text=lambda t: "config:\n  dynamo-bench:target: aws\n  dynamo-bench:cost: {budgetUsd: "
         "200\n  dynamo-bench:tags: {experiment: x}\n"),
    Case("aws_region_contradicts_cluster", "file", "agg-a100-standalone", "aws:region",
         "says us-west-2, but the stack builds in us-east-1",
         text=after("config:", "  aws:region: us-west-2")),
    # --- 2. AWS values AWS would refuse ------------------------------------------------------
    extra_tag("tag_key_with_reserved_prefix_in_capitals", "AWS:team", "infra",
              "starts with 'AWS:', a prefix AWS reserves in any letter case"),
    extra_tag("tag_value_with_reserved_prefix", "team", "aws:infra",
              "the value starts with 'aws:'"),
    extra_tag("tag_key_with_forbidden_character", "team#1", "infra",
              "the key contains '#'; AWS allows letters, digits, spaces and _ . : / = + - @"),
    extra_tag("tag_value_too_long", "team", "v" * 257,
              "the value is 257 characters; AWS allows at most 256"),
    extra_tag("tag_key_the_ebs_driver_would_split", "cost=center", "ml",
              "EBS CSI tag parameters split on the first '='"),
    extra_tag("tag_key_auto_mode_reserves", "karpenter.sh/pool", "x",
              "starts with 'karpenter.sh/', a prefix Kubernetes / EKS Auto Mode reserve"),
    Case("experiment_tag_with_forbidden_character", "aws", "agg-a100", F + "tags.experiment",
         "contains '*'", change=edit("tags.experiment", "a100*campaign")),
    Case("more_than_50_tags", "aws", "agg-a100", F + "tags.extra",
         "51 tags per resource; AWS allows 50",
         change=edit("tags", {"experiment": "a100-campaign",
                              "extra": {f"k{i}": "v" for i in range(48)}})),
    Case("region_that_does_not_exist", "aws", "agg-a100-standalone", F + "cluster.region",
         "'us-east-7' is not an AWS region where EKS and EFS are offered",
         change=edit("cluster.region", "us-east-7")),
    Case("zone_of_another_region", "aws", "agg-a100-standalone",
         F + "cluster.nodeGroups[0].availabilityZone",
         "'us-west-2a' is not a zone of region us-east-1",
         change=edit("cluster.nodeGroups.0.availabilityZone", "us-west-2a")),
    Case("zone_of_another_region_on_a_variant_group", "aws", "agg-a100",
         F + "cluster.nodeGroups[0].availabilityZone", "is not a zone of region us-east-1",
         change=edit("cluster.nodeGroups", [{"name": "g6e-2", "instanceType": "g6e.12xlarge",
                                             "count": 1, "availabilityZone": "eu-west-1a"}]),
         fix=edit("cluster.nodeGroups.0.availabilityZone", "us-east-1b")),
    Case("cidr_with_host_bits", "aws", "agg-a100-standalone", F + "cluster.vpc.cidr",
         "'10.42.0.1/16' is not an IPv4 network: 10.42.0.1/16 has host bits set",
         change=edit("cluster.vpc", {"cidr": "10.42.0.1/16"})),
    Case("cidr_too_small_for_the_subnet_plan", "aws", "agg-a100-standalone",
         F + "cluster.vpc.cidr", "/24 is outside /16../22",
         change=edit("cluster.vpc", {"cidr": "10.42.0.0/24"})),
    Case("cidr_public_range", "aws", "agg-a100-standalone", F + "cluster.vpc.cidr",
         "is a public (internet-routable) range",
         change=edit("cluster.vpc", {"cidr": "8.8.0.0/16"})),
    Case("cidr_ignored_with_an_existing_vpc", "aws", "agg-a100-standalone",
         F + "cluster.vpc.cidr", "is ignored with vpc.id",
         change=edit("cluster.vpc", {"id": "vpc-0123456789abcdef0", "cidr": "10.9.0.0/16",
                                     "privateSubnetIds": ["subnet-0123456789abcdef0",
                                                          "subnet-0123456789abcdef1"]}),
         fix=drop("cluster.vpc.cidr")),
    Case("eks_version_past_extended_support", "aws", "agg-a100-standalone",
         F + "cluster.eksVersion", "EKS no longer offers 1.29: its extended support ended "
         "2026-03-23", change=edit("cluster.eksVersion", "1.29")),
    Case("eks_version_not_in_the_catalogue", "aws", "base-a100", F + "cluster.eksVersion",
         "'1.36' is not an EKS version of the catalogue",
         change=edit("cluster.eksVersion", "1.36")),
    Case("stack_name_eks_refuses", "aws", "agg-a100-standalone", "stack (the stack name)",
         "the EKS cluster name 'dynamo-bench-agg.a100' breaks EKS's rule", change=lambda c: None,
         name="agg.a100"),
    # --- 3. Kubernetes names -----------------------------------------------------------------
    Case("namespace_too_long_for_the_operator_label", "k8s", "agg-a100-standalone",
         F + "serving.namespace", "nvidia.com/dynamo-namespace=",
         change=edit("serving.namespace", "n" * 56)),
    Case("graph_name_starting_with_a_digit", "k8s", "agg-a100", F + "serving.deploymentName",
         "graph name '1agg' names the frontend Service '1agg-frontend', which must be lowercase "
         "letters, digits and '-', starting with a letter",
         change=edit("serving.deploymentName", "1agg")),
    Case("graph_name_too_long_for_worker_deployments", "k8s", "agg-a100",
         F + "serving.workers[0].nodeGroup", "-worker-p4d-<8 hex worker hash> (67 characters)",
         change=edit("serving.deploymentName", "d" * 47)),
    Case("derived_graph_name_starting_with_a_digit", "k8s", "agg-a100-standalone",
         "stack (the stack name, from which the graph is named)", "graph name '1-agg' names",
         change=lambda c: None, name="1-agg"),
    Case("grove_combined_name_limit", "k8s", "agg-a100-standalone", F + "serving.deploymentName",
         "Grove allows 45", change=both(edit("cluster.allowMultinode", True),
                                        edit("serving.deploymentName", "g" * 40)),
         fix=edit("serving.deploymentName", "agg")),
    Case("namespace_not_a_dns_label", "k8s", "agg-a100-standalone", F + "serving.namespace",
         "'Dynamo_NS' breaks the rule: lowercase letters, digits and '-', starting and ending "
         "with a letter or digit (a DNS label)", change=edit("serving.namespace", "Dynamo_NS")),
    # --- 4. one layout, one truth ------------------------------------------------------------
    worker_flags("extra_args_tensor_parallel", ["--tensor-parallel-size", "2"],
                 "--tensor-parallel-size 2 contradicts serving.workers[0].tensorParallelSize "
                 "(4)"),
    worker_flags("extra_args_short_tp_with_equals", ["--enforce-eager", "-tp=8"],
                 "-tp=8 contradicts", index=1),
    worker_flags("extra_args_underscore_max_model_len", ["--max_model_len=16k"],
                 "--max_model_len=16k contradicts serving.workers[0].maxModelLen (32768)"),
    worker_flags("extra_args_abbreviated_gpu_memory_utilization",
                 ["--gpu-memory-util", "0.95"], "--gpu-memory-util 0.95 contradicts"),
    worker_flags("extra_args_quantization_on_bf16", ["--quantization", "fp8"],
                 "--quantization fp8 contradicts model.precision (bf16)"),
    worker_flags("extra_args_kv_cache_dtype", ["--kv-cache-dtype", "fp8"],
                 "--kv-cache-dtype fp8 contradicts serving.kvCacheDtype (auto)"),
    worker_flags("extra_args_block_size_not_typed", ["--block-size", "32"],
                 "--block-size 32 contradicts serving.blockSize (unset)"),
    worker_flags("extra_args_speculative_config", ["--speculative-config.method", "ngram"],
                 "would override what serving.speculative sets"),
    worker_flags("extra_args_data_parallel", ["--data-parallel-size", "2"],
                 "--data-parallel-size 2 contradicts serving.workers[0].replicas"),
    worker_flags("extra_args_pipeline_parallel", ["-pp", "2"], "-pp 2 contradicts the layout"),
    worker_flags("extra_args_turn_off_prefix_caching_under_kv_router",
                 ["--no-enable-prefix-caching"], "--no-enable-prefix-caching contradicts "
                 "serving.prefixCaching (True)", source="agg-a100-kv"),
    worker_flags("extra_args_yaml_config_file", ["--config", "/etc/vllm.yaml"],
                 "--config /etc/vllm.yaml would override"),
    Case("env_cuda_visible_devices", "layout", "agg-a100",
         F + "serving.workers[0].env.CUDA_VISIBLE_DEVICES", "the stack's env would silently "
         "replace it", change=edit(f"{W0}.env", {"CUDA_VISIBLE_DEVICES": "0,1"})),
    Case("env_attention_backend", "layout", "agg-a100", F + "serving.env.VLLM_ATTENTION_BACKEND",
         "set by the project from serving.kernels.attentionBackend",
         change=edit("serving.env", {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"})),
    Case("frontend_router_mode_flag", "layout", "agg-a100",
         F + "serving.frontend.extraArgs[0]", "--router-mode kv contradicts serving.router "
         "(round-robin)", change=edit("serving.frontend", {"extraArgs": ["--router-mode", "kv"]})),
    Case("frontend_block_size_flag", "layout", "agg-b200-axk2",
         F + "serving.frontend.extraArgs[1]", "--kv-cache-block-size=32 contradicts "
         "serving.blockSize (64)",
         change=append("serving.frontend.extraArgs", "--kv-cache-block-size=32")),
    Case("fp8_label_on_a_bf16_checkpoint", "layout", "agg-l40s-fp8", F + "model.precision",
         "Qwen/Qwen3-30B-A3B is a bf16 checkpoint: a run labelled fp8 would load bf16 weights",
         change=edit("model.id", "Qwen/Qwen3-30B-A3B")),
    Case("host_memory_of_all_roles_on_one_node", "layout", "local-disagg",
         F + "serving.workers[0].hostMemoryGib", "the worker pods that share a node ask more "
         "memory than one p4d.24xlarge allows (90% of 1152 GiB",
         change=edit(f"{W0}.hostMemoryGib", 1000), fix=edit(f"{W0}.hostMemoryGib", 900)),
    Case("gpus_of_all_roles_over_the_nodes", "layout", "disagg-a100",
         F + "serving.workers[1].replicas", "take 20 GPUs in whole TP groups",
         change=edit(f"{W1}.replicas", 3)),
    Case("duplicate_concurrencies", "layout", "agg-a100",
         F + "workloads.concurrencySweep.concurrencies[2]", "2 repeats 2 (both are step c2)",
         change=edit("workloads", {"concurrencySweep": {"concurrencies": [1, 2, 2, 4]}})),
    Case("duplicate_quick_concurrencies", "layout", "agg-a100",
         F + "workloads.concurrencySweep.quick.concurrencies[1]", "repeats",
         change=edit("workloads", {"concurrencySweep": {"quick": {"concurrencies": [4, 4]}}})),
    Case("prefix_share_not_whole_blocks", "layout", "agg-a100",
         F + "workloads.prefixCache.shares[1]", "0.3 of 4 blocks (2048/512 tokens) is 1.2 blocks",
         change=edit("workloads", {"prefixCache": {"shares": [0.0, 0.3]}})),
    Case("prefix_shares_with_one_step_id", "layout", "agg-a100",
         F + "workloads.prefixCache.shares[1]", "(both are step share050)",
         change=edit("workloads", {"prefixCache": {"shares": [0.5, 0.5]}})),
    Case("duplicate_distributions", "layout", "agg-a100",
         F + "workloads.sequenceDistributions.distributions[1]", "repeats zipf",
         change=edit("workloads", {"sequenceDistributions": {"distributions": ["zipf",
                                                                              "zipf"]}})),
    Case("model_cache_below_the_checkpoint", "layout", "agg-a100-standalone",
         F + "storage.modelCacheGib", "model cache 50 GiB is smaller than the checkpoints it "
         "holds (Qwen/Qwen3-30B-A3B 57 GiB) need (57 GiB)",
         change=edit("storage.modelCacheGib", 50)),
    Case("shared_model_cache_below_base_plus_variant", "layout", "agg-l40s-fp8",
         F + "storage.modelCacheGib", "base 'base-small' model cache 60 GiB is smaller than the "
         "checkpoints it holds (Qwen/Qwen3-30B-A3B 57 GiB, Qwen/Qwen3-30B-A3B-FP8 29 GiB)",
         change=edit("cluster.attachTo", "base-small"),
         setup=base_copy("base-small", {"storage.modelCacheGib": 60})),
    Case("speculative_method_qwen_lacks", "layout", "agg-a100", F + "serving.speculative.method",
         "Qwen/Qwen3-30B-A3B does not support mtp speculative decoding (supported: none)",
         change=edit("serving.speculative", {"method": "mtp", "numTokens": 2})),
    Case("image_without_tag_or_digest", "layout", "agg-a100", F + "serving.image",
         "has neither a tag nor a digest", change=edit("serving.image", IMAGE)),
    Case("image_with_latest", "layout", "agg-a100", F + "serving.image",
         "uses the moving tag `latest`", change=edit("serving.image", f"{IMAGE}:latest")),
    Case("frontend_image_without_tag", "layout", "agg-b200-kexaone", F + "serving.frontend.image",
         "has neither a tag nor a digest",
         change=edit("serving.frontend.image", "nvcr.io/nvidia/ai-dynamo/dynamo-frontend")),
    # --- 5. what the Pulumi program checks, `stacks check` checks -----------------------------
    Case("variant_namespace_is_not_its_bases", "program", "agg-a100", F + "serving.namespace",
         "'bench' is not the namespace of base 'base-a100' ('dynamo')",
         change=edit("serving.namespace", "bench")),
    Case("hf_token_in_plain_text", "program", "base-a100", F + "hfToken",
         "the Hugging Face token is stored in plain text",
         change=edit("hfToken", "hf_plaintexttoken"),
         fix=edit("hfToken", {"secure": "v1:Zm9vYmFy"})),
    Case("api_endpoint_open_to_the_internet", "program", "base-a100", F + "apiAccessCidrs",
         "opens the Kubernetes API endpoint to the whole internet",
         change=edit("apiAccessCidrs", ["0.0.0.0/0"]),
         fix=edit("apiAccessCidrs", ["203.0.113.7/32"])),
    Case("api_endpoint_access_not_a_cidr", "program", "agg-a100-standalone",
         F + "apiAccessCidrs", "'10.0.0.300/32' is not a CIDR",
         change=edit("apiAccessCidrs", ["10.0.0.300/32"]),
         fix=edit("apiAccessCidrs", ["10.0.0.30/32"])),
    # aws.md R4: a private-only endpoint on a VPC the same `pulumi up` creates is unreachable
    Case("private_endpoint_on_a_vpc_this_stack_creates", "program", "agg-a100-standalone",
         F + "apiAccessCidrs", "and this stack creates that VPC",
         change=edit("apiAccessCidrs", "private"),
         fix=edit("cluster.vpc", {"id": "vpc-0123456789abcdef0",
                                  "privateSubnetIds": ["subnet-0123456789abcdef0",
                                                       "subnet-0123456789abcdef1"]})),
    Case("disk_offload_dynamo_1_6_has_no_disk_tier", "program", "disagg-a100-kv-offload",
         F + "serving.kvOffload.kind", "disk offload needs KVBM",
         change=edit("serving.kvOffload", {"kind": "disk", "cpuGb": 50, "diskGb": 100}),
         fix=both(edit("serving.dynamoVersion", "1.5.1"),
                  edit("serving.image", f"{IMAGE}:1.5.1"))),
    Case("tp_not_split_over_node_count", "program", "agg-a100-standalone",
         F + "serving.workers[0].nodeCount", "TP 4 does not split evenly over 3 nodes",
         change=both(edit("cluster.allowMultinode", True), edit(f"{W0}.nodeCount", 3)),
         fix=edit(f"{W0}.nodeCount", 1)),
    Case("efa_workers_in_two_zones", "program", "disagg-l40s-decode", F + "serving.transfer",
         "nixl-libfabric workers sit in node groups pinned to different zones",
         # decode on a second A100 group (GPUDirect RDMA, so LIBFABRIC is allowed there) in
         # another zone: EFA traffic does not cross zones
         change=both(edit("cluster.attachTo", "base-two-zones"),
                     edit("serving.transfer", "nixl-libfabric")),
         setup=base_copy("base-two-zones", {"cluster.nodeGroups.1.instanceType": "p4de.24xlarge",
                                            "cluster.nodeGroups.1.availabilityZone":
                                            "us-east-1b"})),
    # --- 6. the B200 seed recipes ------------------------------------------------------------
    Case("ax_k2_worker_below_400_gib", "recipe", "agg-b200-axk2",
         F + "serving.workers[0].hostMemoryGib", "400 GiB for this 4-GPU pod; it asks 200 GiB",
         change=edit(f"{W0}.hostMemoryGib", 200)),
    Case("ax_k2_decode_without_host_memory", "recipe", "disagg-b200-axk2",
         F + "serving.workers[1].hostMemoryGib", "it asks unset",
         change=drop(f"{W1}.hostMemoryGib")),
    Case("ax_k2_attention_backend_unpinned", "recipe", "agg-b200-axk2",
         F + "serving.kernels.attentionBackend", "needs its attention backend pinned to "
         "FLASHINFER_MLA_SPARSE or FLASHMLA_SPARSE, not unset",
         change=drop("serving.kernels.attentionBackend")),
    Case("recipe_build_libfabric_without_efa_userspace", "recipe", "disagg-b200-kexaone",
         F + "serving.efaUserspaceImage", "is not a Dynamo -efa build: it carries neither",
         change=drop("serving.efaUserspaceImage")),
    Case("efa_userspace_donor_not_an_efa_runtime", "recipe", "disagg-b200-motif3",
         F + "serving.efaUserspaceImage", "is not a Dynamo -efa runtime (a tag ending in -efa)",
         change=edit("serving.efaUserspaceImage", f"{IMAGE}:1.5.0")),
    Case("k_exaone_disagg_block_size_unpinned", "recipe", "disagg-b200-kexaone",
         F + "serving.blockSize", "prefill and decode must run one block size",
         change=drop("serving.blockSize")),
    Case("k_exaone_decode_speculative_tokens_differ", "recipe", "disagg-b200-kexaone",
         F + "serving.workers[1].extraArgs[4]", "--spec-tokens 3 would override what "
         "serving.speculative sets",
         change=edit(f"{W1}.extraArgs", ["--max-num-seqs", "256", "--max-num-batched-tokens",
                                         "8192", "--spec-tokens", "3"])),
    Case("k_exaone_prefill_block_size_differs", "recipe", "disagg-b200-kexaone",
         F + "serving.workers[0].extraArgs[4]", "--block-size=32 contradicts serving.blockSize "
         "(64)", change=append(f"{W0}.extraArgs", "--block-size=32")),
    Case("k_exaone_vllm_parsers", "recipe", "agg-b200-kexaone",
         F + "serving.parsers.chatProcessor", "needs its own parsers (chatProcessor: dynamo, "
         "toolCall: qwen3_coder, reasoning: qwen3)",
         change=edit("serving.parsers", {"chatProcessor": "vllm", "toolCall": "qwen3_coder",
                                         "reasoning": "qwen3"})),
    Case("k_exaone_other_tool_parser", "recipe", "disagg-b200-kexaone",
         F + "serving.parsers.toolCall", "toolCall is hermes",
         change=edit("serving.parsers.toolCall", "hermes")),
    Case("solar_fp8_kv_on_triton", "recipe", "agg-b200-solar2",
         F + "serving.kernels.attentionBackend", "runs its FP8 KV cache on the FLASHINFER "
         "attention path, not TRITON_ATTN",
         change=edit("serving.kernels.attentionBackend", "TRITON_ATTN")),
    Case("solar_attention_backend_by_env", "recipe", "disagg-b200-solar2",
         F + "serving.env.VLLM_ATTENTION_BACKEND", "set by the project from "
         "serving.kernels.attentionBackend",
         change=edit("serving.env.VLLM_ATTENTION_BACKEND", "FLASH_ATTN")),
    # --- 7. how problems are said ------------------------------------------------------------
    Case("nan_gpu_memory_utilization", "message", "agg-a100",
         F + "serving.workers[0].gpuMemoryUtilization", "nan is not a finite number",
         change=edit(f"{W0}.gpuMemoryUtilization", float("nan"))),
    Case("infinite_budget", "message", "agg-a100", F + "cost.budgetUsd",
         "inf is not a finite number", change=edit("cost.budgetUsd", float("inf"))),
    Case("nan_written_as_text", "message", "agg-a100", F + "cost.setupHours",
         "is not a finite number", text=replace("setupHours: 0.25", "setupHours: .NaN")),
    Case("pattern_said_in_words", "message", "base-a100", F + "cluster.nodeGroups[0].name",
         "'P4D' breaks the rule: 1-39 lowercase letters, digits and '-'",
         change=edit("cluster.nodeGroups.0.name", "P4D")),
    Case("version_error_lists_what_eks_offers", "message", "base-a100",
         F + "cluster.eksVersion", "EKS offers 1.32, 1.33, 1.34, 1.35 on 2026-12-01",
         change=edit("cluster.eksVersion", "1.28")),
    Case("missing_base_lists_only_bases", "message", "agg-a100", F + "cluster.attachTo",
         "there is no base stack 'base-h100' (no file Pulumi.base-h100.yaml",
         change=edit("cluster.attachTo", "base-h100")),
    Case("cpu_cache_in_one_unit", "message", "disagg-a100-kv-offload",
         F + "serving.kvOffload.cpuGb", "hold 80% of 1152 GiB each for CPU cache",
         change=edit("serving.kvOffload.cpuGb", 1000)),
]
