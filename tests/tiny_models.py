"""Tiny randomly initialised checkpoints, built from configs and saved like real ones.

Every adapter test loads these through the same ``from_pretrained`` path a user's real
checkpoint takes. The chat models are additionally trained for a few seconds to answer one
fixed forecast in the prompt's format, so the success path (generate → decode → parse) runs
too; an untrained copy exercises the failure path (unparsable answer kept on the row).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>\n{% else %}{{ c['text'] }}{% endif %}{% endfor %}"
    "{% endif %}<|end|>\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


TINY_T5 = {"d_model": 16, "d_ff": 32, "num_layers": 1, "num_decoder_layers": 1, "num_heads": 2, "d_kv": 8}


def t5_config(sizes: dict | None = None, **extra):
    """A T5 config of `sizes` (default: tiny); bench/gpu.py passes the real models' sizes."""
    from transformers import T5Config

    return T5Config(**(sizes or TINY_T5), **extra)


def build_chronos(
    folder: Path, *, sizes: dict | None = None, bins: int = 64, context_length: int = 64, prediction_length: int = 16
) -> Path:
    """A sampling Chronos (T5 seq2seq over `bins` value bins)."""
    import torch
    from transformers import T5ForConditionalGeneration

    torch.manual_seed(0)
    config = t5_config(sizes, vocab_size=bins + 2, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    config.chronos_config = {
        "tokenizer_class": "MeanScaleUniformBins",
        "tokenizer_kwargs": {"low_limit": -15.0, "high_limit": 15.0},
        "context_length": context_length,
        "prediction_length": prediction_length,
        "n_tokens": bins + 2,
        "n_special_tokens": 2,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "use_eos_token": True,
        "model_type": "seq2seq",
        "num_samples": 8,
        "temperature": 1.0,
        "top_k": 50,
        "top_p": 1.0,
    }
    T5ForConditionalGeneration(config).save_pretrained(folder)
    return folder


def build_chronos_bolt(
    folder: Path, *, sizes: dict | None = None, context_length: int = 64, prediction_length: int = 16, patch: int = 8
) -> Path:
    """A Chronos-Bolt (patch-based T5 predicting a quantile grid)."""
    import torch
    from chronos.chronos_bolt import ChronosBoltModelForForecasting

    torch.manual_seed(0)
    config = t5_config(sizes, vocab_size=2, decoder_start_token_id=0, pad_token_id=0)
    config.chronos_config = {
        "context_length": context_length,
        "prediction_length": prediction_length,
        "input_patch_size": patch,
        "input_patch_stride": patch,
        "quantiles": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
        "use_reg_token": True,
    }
    config.chronos_pipeline_class = "ChronosBoltPipeline"
    config.architectures = ["ChronosBoltModelForForecasting"]
    ChronosBoltModelForForecasting(config).save_pretrained(folder)
    return folder


def build_moment(folder: Path, *, horizon: int, seq_len: int = 64, t5: dict | None = None) -> tuple[Path, Path]:
    """A MOMENT checkpoint (T5 encoder over patches of 8) and a forecasting-head weights file for `horizon`.

    `t5` overrides the tiny T5 sizes (bench/gpu.py builds the real ones); imports only momentfm,
    torch and safetensors, so MOMENT's own environment runs it (build_moment_in).
    """
    import torch
    from momentfm import MOMENTPipeline
    from safetensors.torch import save_file

    torch.manual_seed(0)
    tiny = {
        "d_model": 16,
        "d_ff": 32,
        "num_layers": 1,
        "num_heads": 2,
        "d_kv": 8,
        "vocab_size": 32,
        "feed_forward_proj": "gated-gelu",
        "model_type": "t5",
        "dropout_rate": 0.1,
        "layer_norm_epsilon": 1e-6,
        "relative_attention_num_buckets": 32,
        "relative_attention_max_distance": 128,
    }
    config = {
        "task_name": "reconstruction",
        "model_name": "MOMENT",
        "transformer_type": "encoder_only",
        "d_model": None,
        "seq_len": seq_len,
        "patch_len": 8,
        "patch_stride_len": 8,
        "transformer_backbone": "google/flan-t5-small",
        "t5_config": {**tiny, **(t5 or {})},
        "revin_affine": False,
        "add_positional_embedding": True,
        "value_embedding_bias": False,
        "orth_gain": 1.41,
        "mask_ratio": 0.0,
        "enable_gradient_checkpointing": False,
        "randomly_initialize_backbone": False,
        "device": "cpu",
    }
    model = MOMENTPipeline(config=config, model_kwargs={"task_name": "reconstruction"})
    model.init()
    model.save_pretrained(folder)
    forecaster = MOMENTPipeline(config=config, model_kwargs={"task_name": "forecasting", "forecast_horizon": horizon})
    forecaster.init()
    head = folder.parent / f"{folder.name}-head.safetensors"
    save_file({k: v.contiguous() for k, v in forecaster.head.state_dict().items()}, str(head))
    return folder, head


def build_in(python: Path, builder: Callable[..., Any], folder: Path, **kwargs: Any) -> Any:
    """builder(folder, **kwargs) run by `python`, another environment's interpreter (the model's package lives
    there, not beside the engine); returns its result through JSON (paths as strings)."""
    import json
    import subprocess

    root = Path(__file__).resolve().parent.parent
    code = (
        "import json, sys; from pathlib import Path; "
        f"from {builder.__module__} import {builder.__name__} as build; "
        "kwargs = json.loads(sys.argv[2]); "
        "print(json.dumps(build(Path(sys.argv[1]), **kwargs), default=str))"
    )
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONNOUSERSITE": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONHOME", None)
    done = subprocess.run(
        [str(python), "-c", code, str(folder), json.dumps(kwargs)], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        raise RuntimeError(f"{builder.__name__} in {python} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_moment_in(python: Path, folder: Path, *, horizon: int, **sizes: Any) -> tuple[Path, Path]:
    """build_moment run by MOMENT's own environment's `python` (momentfm is not installed beside the engine)."""
    checkpoint, head = build_in(python, build_moment, folder, horizon=horizon, **sizes)
    return Path(checkpoint), Path(head)


def build_tokenizer(corpus: list[str]):
    """A byte-level BPE tokenizer with Phi-3's chat markers and an <image> token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    special = ["<unk>", "<s>", "<|end|>", "<|user|>", "<|assistant|>", "<image>"]
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="<|end|>", unk_token="<unk>", pad_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def phi3_config(tokenizer):
    from transformers import Phi3Config

    return Phi3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=tokenizer.eos_token_id,
    )


def _teach(model, examples: list[dict], answer_ids, *, steps: int) -> None:
    """Train on prompt → answer pairs (loss on the answer only) until greedy decoding reproduces it."""
    import torch

    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for step in range(steps):
        inputs = examples[step % len(examples)]
        ids = torch.cat([inputs["input_ids"], answer_ids], dim=1)
        labels = ids.clone()
        labels[:, : inputs["input_ids"].shape[1]] = -100
        extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
        loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels, **extra).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()


def build_chat_models(
    root: Path, *, prompts: list[str], vision_prompts: list[str], images: list[bytes], answer: str
) -> dict[str, Path]:
    """phi3 (trained + untrained) and a LLaVA-style vision model (trained) answering `answer` to any prompt."""
    import torch
    from PIL import Image
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        Phi3ForCausalLM,
    )

    tokenizer = build_tokenizer([*prompts, *vision_prompts, answer] * 3)
    answer_ids = tokenizer(answer + "<|end|>", return_tensors="pt", add_special_tokens=False)["input_ids"]
    folders = {}

    torch.manual_seed(0)
    untrained = Phi3ForCausalLM(phi3_config(tokenizer))
    folders["phi3-untrained"] = root / "phi3-untrained"
    tokenizer.save_pretrained(folders["phi3-untrained"])
    untrained.save_pretrained(folders["phi3-untrained"])

    text_model = Phi3ForCausalLM(phi3_config(tokenizer))
    examples = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        for p in prompts
    ]
    _teach(text_model, [dict(e) for e in examples], answer_ids, steps=200)
    folders["phi3"] = root / "phi3"
    tokenizer.save_pretrained(folders["phi3"])
    text_model.save_pretrained(folders["phi3"])

    vision = CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=8
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=phi3_config(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
    )
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="full",
        chat_template=CHAT_TEMPLATE,
        num_additional_image_tokens=1,
    )
    vlm = LlavaForConditionalGeneration(config)
    examples = []
    for p, png in zip(vision_prompts, images, strict=True):
        text = processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": p}]}], add_generation_prompt=True
        )
        image = Image.open(io.BytesIO(png)).convert("RGB")
        examples.append(dict(processor(text=text, images=[image], return_tensors="pt")))
    _teach(vlm, examples, answer_ids, steps=200)
    folders["vlm"] = root / "vlm"
    processor.save_pretrained(folders["vlm"])
    vlm.save_pretrained(folders["vlm"])
    return folders


def constant_answer(targets: np.ndarray, value: float) -> str:
    lines = "\n".join(f"({t}, {value})" for t in targets)
    return f"<forecast>\n{lines}\n</forecast>"
