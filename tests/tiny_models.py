"""Tiny random models in the real formats, built and saved locally by the tests (nothing is
downloaded). Each builder writes a directory that the real loading code then reads."""

from __future__ import annotations

from pathlib import Path

import torch


def byte_bpe_tokenizer(corpus, vocab_size=400, specials=("<unk>", "<s>", "</s>", "<pad>")):
    """A byte-level BPE tokenizer ("Ġ5"-style tokens) trained on ``corpus``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials),
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, tr)
    return tok


JUDGE_CORPUS = [
    "Score: 1 2 3 4 5. The response describes the image. Rate the response from 1 to 5.",
    "Instruction: Response: Rubric: Explain briefly, then finish with Score: N",
    "USER: ASSISTANT: there are 3 red circles and 2 blue squares; Score: 4",
] * 30


def tiny_llava(path: Path, seed: int = 0) -> Path:
    """A LLaVA-style model (CLIP vision tower + Llama text model) of ~60k parameters with
    its processor, saved with save_pretrained."""
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor,
                              PreTrainedTokenizerFast)

    torch.manual_seed(seed)
    tok = byte_bpe_tokenizer(JUDGE_CORPUS, specials=("<unk>", "<s>", "</s>", "<pad>",
                                                     "<image>"))
    ft = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                 eos_token="</s>", pad_token="<pad>",
                                 extra_special_tokens={"image_token": "<image>"})
    ip = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    proc = LlavaProcessor(image_processor=ip, tokenizer=ft, patch_size=8,
                          vision_feature_select_strategy="default",
                          num_additional_image_tokens=1)
    vc = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=2, image_size=32, patch_size=8, projection_dim=16)
    tc = LlamaConfig(vocab_size=len(ft), hidden_size=32, intermediate_size=64,
                     num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                     eos_token_id=ft.eos_token_id, bos_token_id=ft.bos_token_id,
                     pad_token_id=ft.pad_token_id)
    cfg = LlavaConfig(vision_config=vc, text_config=tc,
                      image_token_id=ft.convert_tokens_to_ids("<image>"),
                      vision_feature_select_strategy="default")
    model = LlavaForConditionalGeneration(cfg).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    proc.save_pretrained(path)
    return path
