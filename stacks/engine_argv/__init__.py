"""The exact command lines of a stack's Dynamo workers and frontend, derived from the typed
config (pure): each flag carries the stack field it came from (`serving.workers[1].extraArgs[3]`).

components.graph puts these argv in the DynamoGraphDeployment's containers, and pre-flight
(stacks.preflight.engine_parse) runs the same argv through the engine's own parsers, so what is
checked is what the pods start with. kv: the KV flags (prefix caching, KV events, the KV
connector, the offload rule by Dynamo version); recipe: the model-specific flags (block size,
kernel pins, speculative decoding, parsers); argv: the whole worker and frontend command lines.

Imports catalog, config, conventions and sizing; pre-flight and components/ import it, never
the reverse.
"""
