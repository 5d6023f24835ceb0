"""The aws target: attaches to a deployed stack through its kubeconfig and runs each AIPerf step
as a Kubernetes Job in the cluster.

    target.py          the Target (start, endpoints, cold restarts, attestation, stop)
    k8s_client.py      the Kubernetes API client, exec and the API-server proxy
    k8s_outputs.py     the stack's Pulumi outputs -> kubeconfig, endpoints
    k8s_cluster.py     readiness and restarts of the DynamoGraphDeployment's pods
    k8s_graph.py       pod states and placement read from the graph's pods
    k8s_jobs.py        the AIPerf Job spec (pure)
    k8s_scripts.py     the scripts the Jobs and pods run
    k8s_step.py        one step as a Job: submit, watch, collect
    k8s_transfer.py    results off the results volume
    attest_aws.py      evidence for the attestation from the real pods
    attest_scripts.py  the in-pod probes that evidence comes from
"""
