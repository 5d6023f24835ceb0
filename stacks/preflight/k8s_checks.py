"""Pre-flight checks of every Kubernetes name a stack gives or derives (pure).

Kubernetes refuses a name that breaks its DNS rule or length, and the Dynamo operator builds
names and label values out of ours, so a name that is fine on its own can become too long
once prefixed. What the operator derives (ai-dynamo/dynamo, deploy/operator):
- labels on every DynamoComponentDeployment and pod: `nvidia.com/dynamo-graph-deployment-name`
  = the graph's name, `nvidia.com/dynamo-component` = the component's name,
  `nvidia.com/dynamo-namespace` = `<k8s namespace>-<graph name with '.' -> '-'>`
  (internal/controller_common/.. GetDCDKubeLabels; api/v1beta1 ComputeDynamoNamespace);
- the DynamoComponentDeployment (and its Deployment / Service) name `<graph>-<component>`, for
  worker components followed by `-<8 hex worker hash>` (internal/dynamo/graph.go
  GetDCDResourceName; the hash is sha256(...)[:8], api/v1alpha1 ComputeDGDWorkersSpecHash),
  also the value of the `nvidia.com/selector` label of its pods;
- with Grove (cluster.allowMultinode installs it): "the maximum allowed combined length for
  Grove resource names (PCS name + PCSG config name + PCLQ template name)" is 45
  (internal/consts/consts.go MaxCombinedGroveResourceNameLength); multinode roles add "ldr" /
  "wkr" clique names.
Label values: at most 63 characters, alphanumerics, '-', '_', '.', starting and ending with an
alphanumeric; Service names are DNS-1035 labels (start with a letter). Kubernetes docs,
"Object Names and IDs" and "Labels and Selectors".
"""

from __future__ import annotations

import re

from stacks.config.errors import Problem
from stacks.config.schema import StackConfig
from stacks.config.stack_file import PROJECT
from stacks.conventions.k8s_names import FRONTEND_COMPONENT, component_names, deployment_name

P = f"{PROJECT}:"
MAX_LABEL = 63
WORKER_HASH_SUFFIX = len("-") + 8
GROVE_MAX_COMBINED = 45
GROVE_ROLE_SUFFIX = len("ldr")
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS_1035_WORDS = "lowercase letters, digits and '-', starting with a letter, ending with a " \
                 "letter or digit"


def _graph_field(stack: StackConfig) -> str:
    assert stack.serving is not None
    if stack.serving.deployment_name:
        return f"{P}serving.deploymentName"
    return "stack (the stack name, from which the graph is named)"


def check_names(stack: StackConfig, out: list[Problem]) -> None:
    """The graph's name, its namespace and the component names, as the operator uses them."""
    s = stack.serving
    assert s is not None
    graph, gf = deployment_name(stack), _graph_field(stack)
    fix = "set serving.deploymentName to a shorter DNS label starting with a letter"
    if not DNS_1035.fullmatch(graph):
        out.append(Problem(gf, f"graph name '{graph}' names the frontend Service "
                           f"'{graph}-{FRONTEND_COMPONENT}', which must be {DNS_1035_WORDS}",
                           fix))
    label = f"{s.namespace}-{graph.replace('.', '-')}"
    if len(label) > MAX_LABEL:
        out.append(Problem(f"{P}serving.namespace", f"the operator labels every pod "
                           f"nvidia.com/dynamo-namespace={label} ({len(label)} characters, "
                           f"namespace + '-' + graph name); a label value has at most "
                           f"{MAX_LABEL}", f"shorten serving.namespace or {fix[4:]}"))
    grove = stack.cluster.allow_multinode
    names = [FRONTEND_COMPONENT, *component_names(s)]
    roles = [None, *s.workers]
    for i, (name, w) in enumerate(zip(names, roles, strict=True)):
        where = f"{P}serving.workers[{i - 1}].nodeGroup" if w is not None else gf
        derived = f"{graph}-{name}" + ("-<8 hex worker hash>" if w is not None else "")
        length = len(graph) + 1 + len(name) + (WORKER_HASH_SUFFIX if w is not None else 0)
        if length > MAX_LABEL:
            out.append(Problem(where, f"the operator names this component's deployment "
                               f"{derived} ({length} characters) and uses it as a label value "
                               f"(nvidia.com/selector), which has at most {MAX_LABEL}",
                               "use a shorter node group name or serving.deploymentName"))
        multinode = w is not None and w.node_count > 1
        combined = len(graph) + len(name) + (GROVE_ROLE_SUFFIX if multinode else 0)
        if grove and combined > GROVE_MAX_COMBINED:
            out.append(Problem(where, f"with Grove (cluster.allowMultinode) the graph name and "
                               f"component name '{name}' total {combined} characters; Grove "
                               f"allows {GROVE_MAX_COMBINED}", "use shorter names"))
