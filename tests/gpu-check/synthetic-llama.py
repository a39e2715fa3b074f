#!/usr/bin/env python3
"""Writes a llama-architecture GGUF with random F16 weights and a made-up
SentencePiece vocabulary, for the GPU admission check (tests/gpu-check/run).

Its answers are noise, and that is all it needs to be: llama.cpp loads it,
offloads its layers and generates tokens, so the governor's estimate, its
admission against the GPU's free memory and the confinement of a
GPU-offloading llama-server meet a real CUDA (or ROCm) runtime. It is made
on the machine that runs the check, so no weights travel or are downloaded
(SPEC M11). Needs numpy and llama.cpp's own gguf-py (in its sources).

usage: synthetic-llama.py GGUF_PY_DIR OUT.gguf [N_EMBD N_LAYER N_FF N_VOCAB]
"""
import sys

sys.path.insert(0, sys.argv[1])
import numpy as np  # noqa: E402
import gguf  # noqa: E402

out = sys.argv[2]
n_embd, n_layer, n_ff, n_vocab = (int(v) for v in (sys.argv[3:7] or (2048, 16, 5632, 32000)))
n_head, n_head_kv = n_embd // 64, max(1, n_embd // 256)
head_dim = n_embd // n_head
rng = np.random.default_rng(7)


def weight(rows, cols):
    # numpy (rows, cols) is GGUF ne [cols, rows]: llama.cpp's [in, out].
    return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)


w = gguf.GGUFWriter(out, "llama")
w.add_name("labfy-synthetic-llama")
w.add_context_length(4096)
w.add_embedding_length(n_embd)
w.add_block_count(n_layer)
w.add_feed_forward_length(n_ff)
w.add_head_count(n_head)
w.add_head_count_kv(n_head_kv)
w.add_rope_dimension_count(head_dim)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

# SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, then
# filler pieces (llama.cpp needs the byte tokens for byte fallback).
tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
tokens += [f"\u2581t{i}" for i in range(n_vocab - len(tokens))]
types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
types += [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * (n_vocab - 259)
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores([0.0] * 259 + [-float(i) for i in range(n_vocab - 259)])
w.add_token_types(types)
w.add_unk_token_id(0)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_chat_template(
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)

n_kv = n_head_kv * head_dim
w.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
w.add_tensor("output.weight", weight(n_vocab, n_embd))
for i in range(n_layer):
    w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor(f"blk.{i}.attn_q.weight", weight(n_embd, n_embd))
    w.add_tensor(f"blk.{i}.attn_k.weight", weight(n_kv, n_embd))
    w.add_tensor(f"blk.{i}.attn_v.weight", weight(n_kv, n_embd))
    w.add_tensor(f"blk.{i}.attn_output.weight", weight(n_embd, n_embd))
    w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor(f"blk.{i}.ffn_gate.weight", weight(n_ff, n_embd))
    w.add_tensor(f"blk.{i}.ffn_up.weight", weight(n_ff, n_embd))
    w.add_tensor(f"blk.{i}.ffn_down.weight", weight(n_embd, n_ff))

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(out)
