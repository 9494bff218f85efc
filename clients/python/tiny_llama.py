"""A small Llama checkpoint built from a fixed seed, for running a real vLLM engine where nothing can be downloaded.

``build(directory, seed=..., layers=..., hidden=...)`` writes what vLLM loads as a model: ``config.json``,
``model.safetensors`` with real random weights (normal, scaled like a trained model's, so attention is sharp and
wrong KV changes the output; vLLM's dummy loader fills tiny uniform values that make attention nearly uniform), a
word-level tokenizer (``tokenizer.json`` from ``tokenizers``) over a fixed vocabulary, and a chat template.
Two calls with the same arguments write the same bytes; another seed gives other weights and the same tokenizer.

``prompt(words, seed)`` gives a text of that many words from the vocabulary, so that prompts of a known token
count can be built (one word is one token; the tokenizer adds a BOS token in front).

Run as a script: ``python tiny_llama.py DIR [--seed N] [--layers N] [--hidden N]``.
"""

import argparse
import json
import os
import random

VOCAB_WORDS = 2000
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]
# Words separated by spaces, as the word-level tokenizer splits them (it adds the BOS token itself).
CHAT_TEMPLATE = ("{% for message in messages %}{{ message['role'] }} : {{ message['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}assistant : {% endif %}")


def words():
    """The tokenizer's words: ``w0`` .. ``w1999`` and the chat template's few."""
    return [f"w{i}" for i in range(VOCAB_WORDS)] + ["system", "user", "assistant", ":"]


def prompt(count: int, seed: int) -> str:
    """``count`` words drawn from the vocabulary with ``seed``: ``count`` tokens once tokenized (plus BOS)."""
    rng = random.Random(seed)
    return " ".join(f"w{rng.randrange(VOCAB_WORDS)}" for _ in range(count))


def build(directory: str, seed: int = 0, layers: int = 4, hidden: int = 256, heads: int = 4, kv_heads: int = 2,
          max_len: int = 8192) -> str:
    """Writes the checkpoint into ``directory`` (created) and returns it."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM

    os.makedirs(directory, exist_ok=True)
    vocab = {token: i for i, token in enumerate(SPECIAL + words())}
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         head_dim=hidden // heads, max_position_embeddings=max_len, rms_norm_eps=1e-5,
                         bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"], pad_token_id=vocab["<pad>"],
                         tie_word_embeddings=False, torch_dtype="bfloat16")
    config.architectures = ["LlamaForCausalLM"]
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, tensor in model.state_dict().items():
        if name.endswith("norm.weight"):
            value = torch.ones_like(tensor)
        else:
            fan_in = tensor.shape[-1]
            # Scaled up from a trained model's 1/sqrt(fan_in) so that the attention logits spread: with weights this
            # size a token attends to a few others, and KV from other weights or positions changes what it predicts.
            value = torch.randn(tensor.shape, generator=generator) * (2.0 / fan_in ** 0.5)
        state[name] = value.to(torch.bfloat16).contiguous()
    save_file(state, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(directory)

    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", vocab["<s>"])])
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as out:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                   "unk_token": "<unk>", "pad_token": "<pad>", "add_bos_token": True,
                   "model_max_length": max_len, "chat_template": CHAT_TEMPLATE}, out)
    with open(os.path.join(directory, "special_tokens_map.json"), "w") as out:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}, out)
    return directory


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    args = parser.parse_args()
    print(build(args.directory, args.seed, args.layers, args.hidden, args.heads, args.kv_heads))


if __name__ == "__main__":
    main()
