"""A tiny llama-architecture GGUF model (random weights, a 300-token SentencePiece-style
vocabulary, ~0.2 MB) for a real llama.cpp server in the tests and the endpoint benchmark.

Its layers barely touch the residual stream (small random weights), so the next token is
decided by the last one: the output matrix is solved so that, after

* ``▁JUDGE``  it writes ``Score``, then ``:``, then a score: " 4" most likely, with "4",
  " 3", " 5", "2", " 1" after it (both spellings of 4, so a reader must add them), then
  ends its answer;
* ``▁PAIR`` it writes the one token ``Verdict:`` (the pairwise prompt's delimiter,
  :class:`scoreband.pairwise.extract.PairPrompt`), then a verdict: " A" most likely, with
  "A", " B", "B", " tie" after it (both spellings of A and B), then ends its answer; it
  always prefers the response shown first, whichever it is (a pure position bias);
* ``▁SILENT`` it ends its answer at once (an empty answer);
* ``▁RAMBLE`` it writes ``▁la`` until ``max_tokens`` (an answer cut by its length).

Its chat template shows the text parts of a message only (a text-only model: an image in
the message is dropped, as llama.cpp's own text models do).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["write_tiny_llama", "CHAT_TEMPLATE", "SCORE_LOGITS", "VERDICT_LOGITS"]

CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% endfor %}")

#: the logits after "Score:" (every other token 0)
SCORE_LOGITS = {"\u25814": 6.0, "4": 5.2, "\u25813": 4.8, "\u25815": 4.0, "2": 3.0,
                "\u25811": 2.5}

#: the logits after "Verdict:" (every other token 0)
VERDICT_LOGITS = {"\u2581A": 6.0, "A": 5.0, "\u2581B": 4.2, "B": 3.5, "\u2581tie": 3.0}

_WORDS = ["JUDGE", "SILENT", "RAMBLE", "PAIR"]


def _vocab() -> tuple[list[str], list[int]]:
    import gguf

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + \
        [gguf.TokenType.BYTE] * 256
    normal = ["Score", ":", "\u2581la", "\u2581l"]
    normal += [f"\u2581{d}" for d in range(10)] + [str(d) for d in range(10)]
    normal += ["Verdict:"] + list(VERDICT_LOGITS)
    for w in _WORDS:  # the merge chain SentencePiece needs: ▁J, ▁JU, ..., ▁JUDGE
        normal += ["\u2581" + w[:i] for i in range(1, len(w) + 1)]
    normal = list(dict.fromkeys(normal))
    tokens += normal
    types += [gguf.TokenType.NORMAL] * len(normal)
    return tokens, [int(t) for t in types]


def write_tiny_llama(path, *, seed: int = 0, n_embd: int = 64, n_layer: int = 2) -> Path:
    """Write the model (see the module docstring) to ``path``; returns it."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens, types = _vocab()
    ids = {t: i for i, t in enumerate(tokens)}
    v, d, n_head, n_ff = len(tokens), n_embd, 4, 2 * n_embd
    eos = ids["</s>"]

    emb = rng.normal(0, 1, (v, d)).astype(np.float32)
    targets: dict[str, dict[int, float]] = {
        "\u2581JUDGE": {ids["Score"]: 12.0}, "Score": {ids[":"]: 12.0},
        ":": {ids[t]: x for t, x in SCORE_LOGITS.items()},
        "\u2581SILENT": {eos: 12.0}, "\u2581RAMBLE": {ids["\u2581la"]: 12.0},
        "\u2581la": {ids["\u2581la"]: 12.0},
        "\u2581PAIR": {ids["Verdict:"]: 12.0},
        "Verdict:": {ids[t]: x for t, x in VERDICT_LOGITS.items()},
    }
    for t in list(SCORE_LOGITS) + list(VERDICT_LOGITS):
        targets[t] = {eos: 12.0}
    ctx = list(targets)
    # the final RMS norm (weight 1) of each context token's embedding: the residual stream
    h = np.stack([emb[ids[t]] / np.sqrt(np.mean(emb[ids[t]] ** 2) + 1e-5) for t in ctx], 1)
    want = np.zeros((v, len(ctx)), dtype=np.float64)
    for j, t in enumerate(ctx):
        for tok, x in targets[t].items():
            want[tok, j] = x
    out = (want @ np.linalg.pinv(h)).astype(np.float32)  # logits = out @ norm(x)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-judge")
    w.add_context_length(2048)
    w.add_embedding_length(d)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(d // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 3 + [0.0] * 256 + [float(-i) for i in range(v - 259)])
    w.add_token_types(types)
    w.add_bos_token_id(ids["<s>"])
    w.add_eos_token_id(eos)
    w.add_unk_token_id(ids["<unk>"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def small(*shape):
        return rng.normal(0, 0.02, shape).astype(np.float32)

    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    w.add_tensor("output.weight", out)
    for b in range(n_layer):
        p = f"blk.{b}."
        w.add_tensor(p + "attn_norm.weight", np.ones(d, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v"):
            w.add_tensor(p + name + ".weight", small(d, d))
        w.add_tensor(p + "attn_output.weight", small(d, d) * 0.1)
        w.add_tensor(p + "ffn_norm.weight", np.ones(d, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", small(n_ff, d))
        w.add_tensor(p + "ffn_up.weight", small(n_ff, d))
        w.add_tensor(p + "ffn_down.weight", small(d, n_ff) * 0.1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)
