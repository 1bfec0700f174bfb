"""Local language models through transformers: `phi3` (text) and `phi3-vision` (chart input).

Any chat checkpoint with a chat template works (the names say what the paper rated). The
first ask decodes greedily; a retry after an unparsable answer samples (retry_temperature,
seeded per row and attempt), since greedy decoding would only repeat the same answer.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from causalrate.systems.base import SYSTEMS
from causalrate.systems.checkpoints import CheckpointSettings, CheckpointSystem
from causalrate.systems.llm import Answer, ChatSettings, ChatSystem, Request


class HFChatSettings(CheckpointSettings, ChatSettings):
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2"] | None = Field(
        None, description="eager: what Phi-3 needs on GPUs without flash attention"
    )
    trust_remote_code: bool = Field(False, description="run the checkpoint's own modelling code (Phi-3.5-vision)")
    retry_temperature: float = Field(0.7, gt=0)


class HFChat(CheckpointSystem, ChatSystem):
    """Shared loading and generation of the transformers chat systems."""

    Settings = HFChatSettings
    settings: HFChatSettings
    package = ("transformers", "hf")
    libraries = ("transformers", "torch", "tokenizers")

    def _options(self, dtype: Any) -> dict[str, Any]:
        s = self.settings
        options = {"dtype": dtype, "trust_remote_code": s.trust_remote_code}
        if s.attn_implementation:
            options["attn_implementation"] = s.attn_implementation
        return options

    def _generate(self, model: Any, inputs: dict, *, request: Request, attempt: int, eos: Any) -> tuple[Any, dict]:
        import torch

        s = self.settings
        sampling: dict[str, Any] = {"do_sample": False}
        if attempt:
            torch.manual_seed((request.seed + attempt) % 2**63)
            sampling = {"do_sample": True, "temperature": s.retry_temperature, "top_p": 1.0}
        inputs = {  # images arrive as float32: the model may run in bfloat16
            k: v.to(model.device, dtype=model.dtype) if v.is_floating_point() else v.to(model.device)
            for k, v in inputs.items()
        }
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=s.max_new_tokens, pad_token_id=eos, **sampling)
        new = out[:, inputs["input_ids"].shape[1] :]  # [rows, new tokens]
        return new, {"prompt_tokens": int(inputs["input_ids"].shape[1]), "output_tokens": int(new.shape[1])}


@SYSTEMS.register("phi3")
class Phi3(HFChat):
    """A causal chat LM reading the numeric prompt (AutoModelForCausalLM + the tokenizer's chat template)."""

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=self.settings.trust_remote_code)
        tokenizer.padding_side = "left"  # batched generation continues every row from its own last token
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(str(folder), **self._options(dtype))
        return tokenizer, model.to(device).eval()

    def ask(self, requests: list[Request], *, attempt: int) -> list[Answer]:
        """Greedy first asks go in left-padded batches of batch_size; sampled retries one by one, seeded per row."""
        tokenizer, model = self.loaded()
        size = self.batch_size if attempt == 0 else 1
        answers = []
        for start in range(0, len(requests), size):
            chunk = requests[start : start + size]
            texts = [
                tokenizer.apply_chat_template(
                    [{"role": "user", "content": r.prompt}], add_generation_prompt=True, tokenize=False
                )
                for r in chunk
            ]
            inputs = dict(tokenizer(texts, padding=True, return_tensors="pt", add_special_tokens=False))
            new, _ = self._generate(model, inputs, request=chunk[0], attempt=attempt, eos=tokenizer.eos_token_id)
            for row, tokens in enumerate(new):
                facts = {
                    "prompt_tokens": int(inputs["attention_mask"][row].sum()),
                    "output_tokens": int((tokens != tokenizer.pad_token_id).sum()),
                }
                answers.append(Answer(tokenizer.decode(tokens, skip_special_tokens=True), facts))
        return answers


class VisionSettings(HFChatSettings):
    image_placeholder: str | None = Field(
        None,
        description="text that marks the image in a string-only chat template (Phi-3.5-vision: '<|image_1|>\\n'); "
        "null: the processor's structured chat template places it",
    )


@SYSTEMS.register("phi3-vision")
class Phi3Vision(HFChat):
    """A vision-language chat model reading the chart (AutoProcessor + an image-text-to-text model)."""

    Settings = VisionSettings
    settings: VisionSettings
    modality = "plot"

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoProcessor

        processor = AutoProcessor.from_pretrained(str(folder), trust_remote_code=self.settings.trust_remote_code)
        try:
            model = AutoModelForImageTextToText.from_pretrained(str(folder), **self._options(dtype))
        except ValueError:  # remote-code checkpoints (Phi-3.5-vision) register as causal LMs
            model = AutoModelForCausalLM.from_pretrained(str(folder), **self._options(dtype))
        return processor, model.to(device).eval()

    def ask(self, requests: list[Request], *, attempt: int) -> list[Answer]:
        from PIL import Image

        processor, model = self.loaded()
        placeholder = self.settings.image_placeholder
        answers = []
        for request in requests:
            if placeholder is None:
                content = [{"type": "image"}, {"type": "text", "text": request.prompt}]
                text = processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)
            else:
                messages = [{"role": "user", "content": placeholder + request.prompt}]
                text = processor.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            assert request.image is not None  # a vision system is asked about the chart it is given
            image = Image.open(io.BytesIO(request.image)).convert("RGB")
            inputs = processor(text=text, images=[image], return_tensors="pt")
            eos = processor.tokenizer.eos_token_id
            new, facts = self._generate(model, dict(inputs), request=request, attempt=attempt, eos=eos)
            answers.append(Answer(processor.tokenizer.decode(new[0], skip_special_tokens=True), facts))
        return answers
