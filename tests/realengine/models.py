"""Make the real-engine tier's tiny models in a folder: a Llama target and drafts, seeded.

Runs under the engine's own Python (torch, transformers, tokenizers and safetensors come with
vLLM; the operator's venv has none of them), e.g. from the repository's root:

    .cache/vllm/0.32.0/venv/bin/python tests/realengine/models.py DIR

Nothing is downloaded: the tokenizer is trained here on a generated corpus (byte-level BPE,
512 entries) and the weights are random (seeded), so the same inputs give the same bytes. The
CPU attention backend takes head sizes 32, 64, 80, 96, 112, 128, ... only: 128 hidden over 4
heads gives 32. What each folder is for (docs/testing.md, "The real engine"):

- ``target``: 2 layers, the served model; also its own ``draft_model`` draft (the draft always
  agrees: 100 % acceptance, mean acceptance length 1 + k);
- ``draft-zero``: 1 layer with an all-zero output head, so its greedy draft is always token 0,
  which the target never emits (its head row 0 is zero and rows 4 and 5 are opposite, so one of
  them always scores above 0): 0 % acceptance, exactly;
- ``eagle``, ``eagle3``: one-layer EAGLE and EAGLE-3 heads for the target (random: they draft,
  the target rejects nearly everything). EAGLE-3 on a 2-layer target needs
  ``eagle_aux_hidden_state_layer_ids`` [0, 1, 2], or the first request crashes the engine;
- ``mimo``: a 2-layer MiMo target (Qwen2 layers) with one multi-token-prediction layer, the
  smallest model vLLM's CPU build runs ``mtp`` on (vllm mimo_mtp.py: k = 1 only).

ngram needs no model. Random weights say nothing through their text: judge by the engine's
metrics and scheduling.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

SEED = 21
VOCAB = 512
HIDDEN = 128
HEADS = 4
KV_HEADS = 2
INTERMEDIATE = 256
MAX_POSITIONS = 2048
PAD, BOS, EOS = "<pad>", "<s>", "</s>"
# A chat template, so /v1/chat/completions works too (the tokenizer has no upstream one).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
WORDS = [
    "gate",
    "warm",
    "shape",
    "bucket",
    "graph",
    "engine",
    "draft",
    "token",
    "step",
    "batch",
    "prompt",
    "decode",
    "block",
    "cache",
    "plan",
    "proof",
    "sweep",
    "probe",
    "serve",
    "ready",
    "verdict",
    "runner",
    "model",
    "layer",
    "head",
    "queue",
    "budget",
]


def corpus(lines: int = 4000) -> list[str]:
    """A fixed text to train the tokenizer on: seeded sentences of the words above, digits."""
    rng = random.Random(SEED)
    out = []
    for i in range(lines):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 12))]
        out.append(f"{' '.join(words)} {i % 97}.")
    return out


def make_tokenizer(dest: Path) -> Any:
    """Train a byte-level BPE of VOCAB entries and save it as a PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(dest)
    return fast


def tiny_fields(layers: int) -> dict[str, Any]:
    """The sizes every tiny model shares (a transformers config's fields; ids of the special
    tokens as the tokenizer has them)."""
    return {
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": layers,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
    }


def llama_config(layers: int, **extra: Any) -> Any:
    """The tiny Llama's configuration."""
    from transformers import LlamaConfig

    return LlamaConfig(**tiny_fields(layers), **extra)


def make_llama(dest: Path, layers: int, seed: int, head: str = "random") -> None:
    """A LlamaForCausalLM with seeded random weights; ``head`` shapes its output layer:
    ``never-zero`` (the target: token 0 never wins) or ``zero`` (always drafts token 0)."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config(layers)).to(torch.bfloat16)
    with torch.no_grad():
        weight = model.lm_head.weight
        if head == "zero":
            weight.zero_()
        elif head == "never-zero":
            weight[0].zero_()
            weight[5].copy_(-weight[4])
    model.save_pretrained(dest, safe_serialization=True)


def _random(shape: tuple[int, ...], gen: Any) -> Any:
    import torch

    return (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)


def _ones(size: int) -> Any:
    import torch

    return torch.ones(size, dtype=torch.bfloat16)


def _layer(prefix: str, qkv_in: int, gen: Any) -> dict[str, Any]:
    """One decoder layer's tensors under ``prefix`` (checkpoint names, q/k/v separate)."""
    head_dim = HIDDEN // HEADS
    kv = KV_HEADS * head_dim
    return {
        f"{prefix}.self_attn.q_proj.weight": _random((HIDDEN, qkv_in), gen),
        f"{prefix}.self_attn.k_proj.weight": _random((kv, qkv_in), gen),
        f"{prefix}.self_attn.v_proj.weight": _random((kv, qkv_in), gen),
        f"{prefix}.self_attn.o_proj.weight": _random((HIDDEN, HIDDEN), gen),
        f"{prefix}.mlp.gate_proj.weight": _random((INTERMEDIATE, HIDDEN), gen),
        f"{prefix}.mlp.up_proj.weight": _random((INTERMEDIATE, HIDDEN), gen),
        f"{prefix}.mlp.down_proj.weight": _random((HIDDEN, INTERMEDIATE), gen),
        f"{prefix}.post_attention_layernorm.weight": _ones(HIDDEN),
    }


def _save(dest: Path, tensors: dict[str, Any], config: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    dest.mkdir(parents=True, exist_ok=True)
    save_file(dict(sorted(tensors.items())), str(dest / "model.safetensors"))
    (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def make_eagle(dest: Path, seed: int) -> None:
    """An EAGLE-1 head in the published checkpoints' layout (vllm llama_eagle.py): ``fc`` over
    [embedding, target hidden], one layer without input norm; embedding and lm_head shared
    with the target."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    tensors = {"fc.weight": _random((HIDDEN, 2 * HIDDEN), gen), **_layer("layers.0", HIDDEN, gen)}
    config = llama_config(1).to_dict()
    config["architectures"] = ["LlamaForCausalLM"]  # vLLM wraps it: EagleLlamaForCausalLM
    _save(dest, tensors, config)


def make_eagle3(dest: Path, seed: int, target_layers: int) -> None:
    """An EAGLE-3 head in the published checkpoints' layout (vllm llama_eagle3.py): ``fc`` over
    three target hidden states, one ``midlayer`` whose attention reads [embedding, hidden],
    its own norm and lm_head over the full vocabulary (no d2t/t2d)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    tensors = {
        "fc.weight": _random((HIDDEN, 3 * HIDDEN), gen),
        **_layer("midlayer", 2 * HIDDEN, gen),
        "midlayer.input_layernorm.weight": _ones(HIDDEN),
        "midlayer.hidden_norm.weight": _ones(HIDDEN),
        "norm.weight": _ones(HIDDEN),
        "lm_head.weight": _random((VOCAB, HIDDEN), gen),
    }
    config = llama_config(1, draft_vocab_size=VOCAB, target_hidden_size=HIDDEN).to_dict()
    config["architectures"] = ["LlamaForCausalLMEagle3"]
    config["eagle_config"] = {
        "eagle_aux_hidden_state_layer_ids": list(range(target_layers + 1)),
        "use_aux_hidden_state": True,
    }
    _save(dest, tensors, config)


def make_mimo(dest: Path, seed: int, layers: int) -> None:
    """A MiMo target (vllm mimo.py: Qwen2 with q/k/v biases) carrying one multi-token-prediction
    layer (``model.mtp_layers.0``, vllm mimo_mtp.py: token and hidden norms, ``input_proj`` over
    [embedding, hidden], a Qwen2 decoder layer, a final norm): ``--speculative-config
    {"method": "mtp", "num_speculative_tokens": 1}`` on it runs the mtp drafter (one step only,
    mimo_mtp predicts one token)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**tiny_fields(layers))
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
    gen = torch.Generator().manual_seed(seed + 1)
    kv = KV_HEADS * (HIDDEN // HEADS)
    mtp = "model.mtp_layers.0"
    tensors.update(_layer(mtp, HIDDEN, gen))
    tensors.update(
        {
            f"{mtp}.self_attn.q_proj.bias": _random((HIDDEN,), gen),
            f"{mtp}.self_attn.k_proj.bias": _random((kv,), gen),
            f"{mtp}.self_attn.v_proj.bias": _random((kv,), gen),
            f"{mtp}.input_layernorm.weight": _ones(HIDDEN),
            f"{mtp}.token_layernorm.weight": _ones(HIDDEN),
            f"{mtp}.hidden_layernorm.weight": _ones(HIDDEN),
            f"{mtp}.input_proj.weight": _random((HIDDEN, 2 * HIDDEN), gen),
            f"{mtp}.final_layernorm.weight": _ones(HIDDEN),
        }
    )
    doc = config.to_dict()
    doc["architectures"] = ["MiMoForCausalLM"]
    doc["num_nextn_predict_layers"] = 1
    _save(dest, tensors, doc)


TARGET_LAYERS = 2
FOLDERS = ("target", "draft-zero", "eagle", "eagle3", "mimo")


def make_all(root: Path) -> dict[str, Path]:
    """Every model into ``root``; returns folder name -> path. Each gets the tokenizer."""
    paths = {name: root / name for name in FOLDERS}
    for path in paths.values():
        make_tokenizer(path)
    make_llama(paths["target"], TARGET_LAYERS, SEED, head="never-zero")
    make_llama(paths["draft-zero"], 1, SEED + 1, head="zero")
    make_eagle(paths["eagle"], SEED + 2)
    make_eagle3(paths["eagle3"], SEED + 3, TARGET_LAYERS)
    make_mimo(paths["mimo"], SEED + 4, TARGET_LAYERS)
    return paths


def main(argv: list[str]) -> int:
    """``models.py DIR``: make every model under DIR (created if missing)."""
    if len(argv) != 1:
        print("usage: models.py DIR", file=sys.stderr)
        return 2
    root = Path(argv[0])
    root.mkdir(parents=True, exist_ok=True)
    for name, path in make_all(root).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
