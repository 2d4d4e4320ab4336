#!/usr/bin/env python3
"""Write a random-weight stand-in for Qwen3-Coder-30B-A3B-Instruct (the seed's model).

Usage: make_standin_model.py DIR [--layers N]

DIR gets the model's real architecture configuration (launch/models/qwen3-coder-30b-a3b/
config.json, optionally with num_hidden_layers overridden for quick tests) and a tokenizer with
the same vocabulary size (151936). No weights: vLLM fills random ones with --load-format dummy.

The tokenizer is word-level: token i (3 <= i < vocab) is the word "w<i>", split on whitespace,
so a prompt of N such words is exactly N tokens. The Qwen special tokens sit at their real ids
(<|endoftext|> 151643, <|im_start|> 151644, <|im_end|> 151645 = eos), so the config's
eos_token_id is honoured. Deterministic: same arguments -> byte-identical files.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "launch", "models", "qwen3-coder-30b-a3b", "config.json")
SPECIALS = {"<unk>": 0, "<s>": 1, "</s>": 2,
            "<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--layers", type=int, default=None, help="override num_hidden_layers (default 48)")
    a = ap.parse_args()
    with open(CONFIG) as f:
        cfg = json.load(f)
    if a.layers is not None:
        if a.layers < 1:
            ap.error("--layers must be >= 1")
        cfg["num_hidden_layers"] = a.layers
        cfg["max_window_layers"] = min(cfg["max_window_layers"], a.layers)
    vocab_size = cfg["vocab_size"]
    os.makedirs(a.dir, exist_ok=True)
    with open(os.path.join(a.dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(a.dir, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": cfg["eos_token_id"], "pad_token_id": 151643,
                   "do_sample": False}, f, indent=2)
        f.write("\n")

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    by_id = {v: k for k, v in SPECIALS.items()}
    vocab = {by_id.get(i, f"w{i}"): i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.add_special_tokens(list(SPECIALS))
    tok.save(os.path.join(a.dir, "tokenizer.json"))
    with open(os.path.join(a.dir, "tokenizer_config.json"), "w") as f:
        json.dump({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
            "unk_token": "<unk>", "add_bos_token": False, "add_eos_token": False,
            "model_max_length": cfg["max_position_embeddings"],
            "clean_up_tokenization_spaces": False,
            "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}",
        }, f, indent=2)
        f.write("\n")
    print(f"stand-in Qwen3-Coder-30B-A3B ({cfg['num_hidden_layers']} layers, vocab "
          f"{tok.get_vocab_size()}) written to {a.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
