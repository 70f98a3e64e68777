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
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

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


WORLD_WORDS = ["a", "the", "there", "is", "of", "number", "picture", "shows", "with", "and",
               "red", "green", "blue", "yellow", "purple", "orange", "circle", "square",
               "triangle", "star", "circles", "squares", "triangles", "stars", "small", "large",
               "left", "right", "above", "below", "one", "two", "three", "four", "alone", "in",
               "middle", "simple", "on", "plain", "background"]


def clip_tokenizer_files(path: Path, max_len: int = 32):
    """vocab.json + merges.txt of a CLIP BPE tokenizer over the world's words (whole-word
    tokens plus single letters, so any text tokenizes)."""
    import json

    from transformers import CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in "abcdefghijklmnopqrstuvwxyz,.":
        vocab[ch] = len(vocab)
        vocab[ch + "</w>"] = len(vocab)
    merges = []
    for w in WORLD_WORDS:
        # merge the word left to right: a b -> ab, ab c -> abc ... ending in </w>
        parts = list(w[:-1]) + [w[-1] + "</w>"]
        while len(parts) > 1:
            a, b = parts[0], parts[1]
            if f"{a} {b}" not in merges:
                merges.append(f"{a} {b}")
            vocab.setdefault(a + b, len(vocab))
            parts = [a + b] + parts[2:]
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    return CLIPTokenizer(str(path / "vocab.json"), str(path / "merges.txt"),
                         model_max_length=max_len)


def tiny_clip(path: Path, seed: int = 0, image_size: int = 32) -> Path:
    """A CLIPModel (text + vision towers, projection 8) with its tokenizer and image
    processor, saved with save_pretrained: loadable by AutoModel / AutoProcessor."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    torch.manual_seed(seed)
    tok = clip_tokenizer_files(path / "_tok")
    cfg = CLIPConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=32,
                         bos_token_id=0, eos_token_id=1, pad_token_id=1),
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                           num_attention_heads=2, image_size=image_size, patch_size=8),
        projection_dim=8)
    model = CLIPModel(cfg).eval()
    ip = CLIPImageProcessor(size={"shortest_edge": image_size},
                            crop_size={"height": image_size, "width": image_size})
    model.save_pretrained(path)
    CLIPProcessor(image_processor=ip, tokenizer=tok).save_pretrained(path)
    return path


def tiny_vit(path: Path, seed: int = 0) -> Path:
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    torch.manual_seed(seed)
    ViTModel(ViTConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, image_size=32, patch_size=8)).eval(
    ).save_pretrained(path)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(path)
    return path


def tiny_stable_diffusion(path: Path, seed: int = 0) -> Path:
    """A Stable Diffusion pipeline of a few thousand parameters (UNet, VAE, CLIP text model
    and tokenizer, DDIM scheduler), saved with save_pretrained; 2 steps at 32x32 take ~0.1 s."""
    from diffusers import (
        AutoencoderKL,
        DDIMScheduler,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(8, 16), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=16,
        attention_head_dim=2, norm_num_groups=4)
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, block_out_channels=(8, 16), latent_channels=4,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"), layers_per_block=1,
        norm_num_groups=4, sample_size=32)
    tok = clip_tokenizer_files(path / "_tok")
    te = CLIPTextModel(CLIPTextConfig(vocab_size=len(tok), hidden_size=16,
                                      intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, max_position_embeddings=32,
                                      bos_token_id=0, eos_token_id=1, pad_token_id=1))
    sched = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                          clip_sample=False, set_alpha_to_one=False, steps_offset=1)
    pipe = StableDiffusionPipeline(unet=unet, vae=vae, text_encoder=te, tokenizer=tok,
                                   scheduler=sched, safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False)
    pipe.save_pretrained(path)
    return path


def tiny_blip(path: Path, seed: int = 0) -> Path:
    """A BLIP captioner (BlipForConditionalGeneration) with a BERT word-piece tokenizer built
    from a local vocab file."""
    from transformers import (
        BertTokenizerFast,
        BlipConfig,
        BlipForConditionalGeneration,
        BlipImageProcessor,
        BlipProcessor,
    )

    torch.manual_seed(seed)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORLD_WORDS
    path.mkdir(parents=True, exist_ok=True)
    (path / "_vocab.txt").write_text("\n".join(words) + "\n")
    tok = BertTokenizerFast(str(path / "_vocab.txt"), model_max_length=32)
    proc = BlipProcessor(image_processor=BlipImageProcessor(size={"height": 32, "width": 32}),
                         tokenizer=tok)
    cfg = BlipConfig(
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                           num_attention_heads=2, image_size=32, patch_size=8),
        text_config=dict(vocab_size=len(words), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, encoder_hidden_size=16,
                         bos_token_id=2, sep_token_id=3, pad_token_id=0,
                         max_position_embeddings=32),
        projection_dim=16)
    BlipForConditionalGeneration(cfg).eval().save_pretrained(path)
    proc.save_pretrained(path)
    return path


def tiny_sentencepiece(path: Path) -> Path:
    """A unigram SentencePiece model over the world's words, written as ``beit3.spm``."""
    import sentencepiece as spm

    path.mkdir(parents=True, exist_ok=True)
    corpus = path / "_corpus.txt"
    corpus.write_text("\n".join([" ".join(WORLD_WORDS[i:i + 6])
                                 for i in range(0, len(WORLD_WORDS), 3)] * 20))
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(path / "_spm"),
                                   vocab_size=80, model_type="unigram", hard_vocab_limit=False,
                                   character_coverage=1.0, minloglevel=2)
    (path / "_spm.model").replace(path / "beit3.spm")
    return path / "beit3.spm"


def tiny_beit3(path: Path, seed: int = 0, img_size: int = 32) -> Path:
    """A BEiT-3 checkpoint in the official layout (``{"model": {"beit3.*": ...}}`` in a .pth,
    plus a task head that loaders must ignore), ``beit3.spm`` and a config.json giving the
    head count of this unpublished width."""
    import json

    from scoreband.backbones.beit3 import BEiT3, BEiT3Config, BEiT3Tokenizer

    path.mkdir(parents=True, exist_ok=True)
    spm_file = tiny_sentencepiece(path)
    vocab = len(BEiT3Tokenizer(spm_file))
    torch.manual_seed(seed)
    cfg = BEiT3Config(dim=32, depth=2, heads=2, mlp_ratio=2.0, img_size=img_size,
                      patch_size=16, vocab_size=vocab, max_source_positions=70)
    model = BEiT3(cfg)
    with torch.no_grad():  # non-trivial norms and positions, so a mix-up would show
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.1)
            if "embed_positions" in name or name.endswith("cls_token"):
                p.normal_(0, 0.5)
    state = {f"beit3.{k}": v for k, v in model.state_dict().items()}
    state["head.weight"] = torch.randn(2, 32)
    torch.save({"model": state, "args": {"note": "tiny"}}, path / "tiny_beit3.pth")
    (path / "config.json").write_text(json.dumps({"heads": 2}))
    return path


def tiny_resnet(path: Path, seed: int = 0) -> Path:
    from transformers import ConvNextImageProcessor, ResNetConfig, ResNetModel

    torch.manual_seed(seed)
    ResNetModel(ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                             layer_type="basic")).eval().save_pretrained(path)
    ConvNextImageProcessor(size={"shortest_edge": 32}, crop_pct=1.0).save_pretrained(path)
    return path


def tiny_dinov2(path: Path, seed: int = 0) -> Path:
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    torch.manual_seed(seed)
    Dinov2Model(Dinov2Config(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=32, image_size=32, patch_size=8)
                ).eval().save_pretrained(path)
    BitImageProcessor(size={"shortest_edge": 32},
                      crop_size={"height": 32, "width": 32}).save_pretrained(path)
    return path
