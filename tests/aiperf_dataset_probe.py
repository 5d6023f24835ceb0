"""Run AIPerf 0.13.0's own dataset loading on a command line, print what it made (test helper).

Usage: python tests/aiperf_dataset_probe.py '<json list of profile args>'. Runs in its own
process with HF_HOME set by the caller (huggingface_hub reads it at import). Prints one JSON
object: per conversation its session id, first turn's timestamp and max_tokens, the prompt's
token count under the run's tokenizer, and the length of the token prefix AIPerf's own token
sequence shares with the previous row's (dataset/generator/prompt.py _build_token_sequence).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(args: list[str]) -> dict:
    from aiperf.cli_commands.profile import app
    from aiperf.common.tokenizer import Tokenizer
    from aiperf.config import BenchmarkRun
    from aiperf.config.flags.resolver import resolve_config
    from aiperf.config.loader import build_benchmark_plan
    from aiperf.dataset.composer.custom import CustomDatasetComposer

    _, bound, _ = app.parse_args(args[1:], exit_on_error=False, print_error=False)
    cli = bound.kwargs["cli_config"]
    cfg = build_benchmark_plan(resolve_config(cli, None)).configs[0]
    dataset = cfg.get_default_dataset()
    run = BenchmarkRun(benchmark_id="probe", cfg=cfg, artifact_dir=cfg.artifacts.dir,
                       random_seed=dataset.random_seed)
    tokenizer = Tokenizer.from_pretrained(cfg.tokenizer.name, trust_remote_code=True)
    composer = CustomDatasetComposer(run=run, tokenizer=tokenizer)
    conversations = composer.create_dataset()
    rows = [json.loads(x) for x in Path(dataset.path).read_text().splitlines() if x.strip()]
    generator = composer.loader.prompt_generator
    block = dataset.block_size
    tokens = [generator._build_token_sequence(r["input_length"], r["hash_ids"], block)
              for r in rows]
    out = []
    for i, conv in enumerate(conversations):
        (turn,) = conv.turns
        shared = 0
        if i:
            pairs = zip(tokens[i], tokens[i - 1], strict=False)
            shared = next((k for k, (a, b) in enumerate(pairs) if a != b),
                          min(len(tokens[i]), len(tokens[i - 1])))
        out.append({"session_id": conv.session_id, "timestamp": turn.timestamp,
                    "max_tokens": turn.max_tokens,
                    "prompt_tokens": len(tokenizer.encode(turn.texts[0].contents[0])),
                    "sequence_tokens": len(tokens[i]), "shared_with_previous": shared})
    return {"block_size": block, "conversations": out}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
