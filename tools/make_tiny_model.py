#!/usr/bin/env python3
"""Write a tiny 2-layer Llama model directory for vLLM's --load-format dummy (CPU tests).

Usage: make_tiny_model.py DIR [--vocab N]   (default vocab 4096)

Files: config.json (LlamaForCausalLM, 2 layers, hidden 256, 4 heads / 2 KV heads of dim 64,
bf16, 4096 positions), generation_config.json, tokenizer.json (byte-level BPE trained locally),
tokenizer_config.json (with a trivial chat template), special_tokens_map.json. No weights.

Deterministic and offline: the BPE is trained on a synthetic corpus generated from a fixed seed
(not on files of the running Python), so the same arguments and `tokenizers` version give
byte-identical files on any machine.
"""
import argparse
import json
import os
import random
import sys

SPECIALS = ["<|pad|>", "<|bos|>", "<|eos|>"]
WORDS = ("def class return import from self None True False for while if elif else try except "
         "with as yield lambda print range len dict list set tuple str int float value key "
         "item data result index count total name path file line text token model layer cache "
         "block request batch step time connector scheduler worker engine prefill decode").split()


def corpus(n_lines: int = 20000, seed: int = 20261129):
    rng = random.Random(seed)
    syll = ["ka", "to", "ri", "en", "mo", "sa", "lu", "pe", "di", "no", "xa", "qu", "zo", "fi"]
    for _ in range(n_lines):
        parts = []
        for _ in range(rng.randint(4, 16)):
            r = rng.random()
            if r < 0.6:
                parts.append(rng.choice(WORDS))
            elif r < 0.85:
                parts.append("".join(rng.choice(syll) for _ in range(rng.randint(1, 4))))
            else:
                parts.append(str(rng.randint(0, 99999)))
        sep = rng.choice([" ", " = ", "(", ", ", ".", "_"])
        yield sep.join(parts) + rng.choice([":", ")", "", ";", " # note"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--vocab", type=int, default=4096)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=a.vocab, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(list(corpus()), trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.save(os.path.join(a.dir, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    pad_id, bos_id, eos_id = (tok.token_to_id(s) for s in SPECIALS)

    def dump(name, obj):
        with open(os.path.join(a.dir, name), "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")

    dump("tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|bos|>", "eos_token": "<|eos|>", "pad_token": "<|pad|>",
        "add_bos_token": False, "add_eos_token": False,
        "model_max_length": 4096, "clean_up_tokenization_spaces": False,
        "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}assistant: {% endif %}",
    })
    dump("special_tokens_map.json", {"bos_token": "<|bos|>", "eos_token": "<|eos|>",
                                     "pad_token": "<|pad|>"})
    dump("config.json", {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "attention_bias": False, "mlp_bias": False,
        "tie_word_embeddings": False, "vocab_size": vocab,
        "bos_token_id": bos_id, "eos_token_id": eos_id, "pad_token_id": pad_id,
        "torch_dtype": "bfloat16", "initializer_range": 0.02, "transformers_version": "4.51.0",
    })
    dump("generation_config.json", {"bos_token_id": bos_id, "eos_token_id": eos_id,
                                    "pad_token_id": pad_id})
    print(f"tiny llama written to {a.dir} (vocab {vocab}, bos/eos/pad {bos_id}/{eos_id}/{pad_id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
