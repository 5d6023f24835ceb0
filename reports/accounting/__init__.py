"""What a stack cost and what it left behind: node-hours and the cost of a period (node_hours),
on-demand prices from the AWS Price List API (pricing), the computed cost's split (cost_split),
what AWS billed per stack from Cost Explorer (cost_explorer), the teardown audit (audit, its
listings, deletions and CLI) and the boto3 session they share (aws_session); `aws_cli` mounts
`reports cost` and `reports audit` on the reports CLI.

Accounting imports nothing of the result tables (reports/ top level may import it: the
$/1M table prices its periods from node_hours); it reads only stacks/ and workloads/.
"""
