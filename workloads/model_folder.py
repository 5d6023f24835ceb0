"""The offline model folder the local engine and AIPerf share: a tokenizer and a config.json.

There is no model hub here. The project builds its own folder:
- a byte-level BPE tokenizer trained with `tokenizers` on text generated below (seeded, so the
  same bytes every time); byte-level means any prompt AIPerf sends can be encoded;
- tokenizer_config.json with a Qwen-style chat template (the frontend renders chat requests);
- config.json with the real model's geometry from the catalogue (layers, KV heads, head_dim,
  experts), so the mocker's KV bytes per token are those of the real model.

AIPerf with HF_HUB_OFFLINE=1 rejects a plain folder path as a tokenizer name, so the folder is
laid out as a Hugging Face cache entry: `$HF_HOME/hub/models--<org>--<name>/snapshots/<sha>/`
plus `refs/main`, and AIPerf gets `--tokenizer <org>/<name>`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

from stacks.catalog.model_arch import ModelArchitecture

REPO = Path(__file__).resolve().parents[1]
VOCAB_SIZE = 8192
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
TRAINING_SEED = 1130


def default_hf_home() -> Path:
    """Where model folders are built: $DYNAMO_BENCH_HF_HOME, else the checkout's .cache/hf."""
    return Path(os.environ.get("DYNAMO_BENCH_HF_HOME", REPO / ".cache" / "hf"))


# Words the training text is made of; with the byte-level alphabet any other text still encodes.
_WORD_TEXT = """
the of and to in is that for it as with was on be by at this are from or an have not which
but they his had you were their one all we can her has there been if more when will would
who so no time out up into other than them could only its new some these two may first then
do any like my now over such our man me even most made after also did many off before must
through back years where much your way well down should because each just those people how
too little state good very make world still own see men work long get here between both life
being under never day same another know while last might us great old year come since against
go came right used take three states himself few house use during without again place around
however home small found thought went say part once general high upon school every does got
united left number course war until always away something fact though water less public put
think almost hand enough far took head yet government system better set told nothing night
end why called didn find look going asked later point knew city next program business give
group toward young days let room president side social present given several order national
possible rather second face per among form important often things looked early white case
john become large big need four within felt along children saw best church ever least power
development light thus knowledge model token cache prefix decode prefill router worker latency
throughput request stream sequence batch memory tensor expert layer attention head block
"""
_WORDS = tuple(_WORD_TEXT.split())
_PUNCT = (".", ",", ";", ":", "?", "!")


def training_text(seed: int = TRAINING_SEED, lines: int = 4000) -> list[str]:
    """Seeded lines of words, numbers and punctuation: the tokenizer's training corpus."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        words = []
        for _ in range(rng.randint(6, 24)):
            w = rng.choice(_WORDS)
            r = rng.random()
            if r < 0.08:
                w = w.capitalize()
            elif r < 0.12:
                w = str(rng.randint(0, 9999))
            words.append(w)
        line = " ".join(words)
        out.append(line[0].upper() + line[1:] + rng.choice(_PUNCT))
    return out


def build_tokenizer_json(seed: int = TRAINING_SEED) -> str:
    """Train the byte-level BPE tokenizer and return its tokenizer.json text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(training_text(seed), trainer=trainer)
    return tok.to_str()


def config_json(model_id: str, arch: ModelArchitecture, vocab_size: int, eos_id: int) -> dict:
    """A Qwen3-MoE style config.json with the catalogue's geometry (KV sizes are real)."""
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "_name_or_path": model_id,
        "hidden_size": arch.hidden_size,
        "num_hidden_layers": arch.layers,
        "num_attention_heads": arch.attention_heads,
        "num_key_value_heads": arch.kv_heads,
        "head_dim": arch.head_dim,
        "num_experts": arch.experts,
        "num_experts_per_tok": arch.experts_per_token,
        "max_position_embeddings": arch.max_context,
        # The tokenizer is the project's own, so ids beyond its vocabulary would not decode.
        "vocab_size": vocab_size,
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-06,
        "hidden_act": "silu",
    }


@dataclass(frozen=True)
class ModelFolder:
    hf_home: Path
    repo_id: str
    snapshot: Path

    @property
    def env(self) -> dict[str, str]:
        """Environment for AIPerf and the engine: read this cache, never the network."""
        return {"HF_HOME": str(self.hf_home), "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1"}


def folder_files(model_id: str, arch: ModelArchitecture) -> dict[str, str]:
    """Every file of the snapshot, name -> text (pure apart from training the tokenizer)."""
    tokenizer_json = build_tokenizer_json()
    vocab = json.loads(tokenizer_json)["model"]["vocab"]
    added = {t["content"]: t["id"] for t in json.loads(tokenizer_json)["added_tokens"]}
    eos_id = added["<|im_end|>"]
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": arch.max_context,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    return {
        "tokenizer.json": tokenizer_json,
        "tokenizer_config.json": json.dumps(tok_config, indent=2),
        "special_tokens_map.json": json.dumps({"eos_token": "<|im_end|>",
                                               "pad_token": "<|endoftext|>"}, indent=2),
        "config.json": json.dumps(config_json(model_id, arch, len(vocab) + len(
            [t for t in added if t not in vocab]), eos_id), indent=2),
        "generation_config.json": json.dumps({"eos_token_id": eos_id,
                                              "pad_token_id": added["<|endoftext|>"]}, indent=2),
    }


def snapshot_id(files: dict[str, str]) -> str:
    """A 40-hex revision derived from the content (same files, same revision)."""
    h = hashlib.sha1()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return h.hexdigest()


def build_model_folder(hf_home: Path, model_id: str, arch: ModelArchitecture) -> ModelFolder:
    """Write (or reuse) the HF-cache entry for `model_id` under `hf_home`."""
    org, _, name = model_id.partition("/")
    if not org or not name:
        raise ValueError(f"model id '{model_id}' must look like <org>/<name>")
    repo = hf_home / "hub" / f"models--{org}--{name}"
    ref = repo / "refs" / "main"
    if ref.exists():
        snap = repo / "snapshots" / ref.read_text().strip()
        if (snap / "config.json").exists() and (snap / "tokenizer.json").exists():
            return ModelFolder(hf_home, model_id, snap)
    files = folder_files(model_id, arch)
    rev = snapshot_id(files)
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True, exist_ok=True)
    for fname, text in files.items():
        (snap / fname).write_text(text)
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(rev)
    return ModelFolder(hf_home, model_id, snap)
