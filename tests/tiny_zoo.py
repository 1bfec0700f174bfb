"""Tiny randomly initialised checkpoints of the zoo's models, saved in each package's own format.

Each loads through the same loader a downloaded checkpoint takes (from_pretrained /
the package's checkpoint reader), so the adapters' loading and forecasting paths run offline.
"""

from __future__ import annotations

from pathlib import Path

SUNDIAL_CONFIG = """
from transformers import PretrainedConfig


class SundialConfig(PretrainedConfig):
    model_type = "sundial"

    def __init__(self, hidden_size=8, **kwargs):
        self.hidden_size = hidden_size
        super().__init__(**kwargs)
"""

SUNDIAL_MODEL = '''
import torch
from transformers import PreTrainedModel

from .configuration_sundial import SundialConfig


class SundialForPrediction(PreTrainedModel):
    """A stand-in with Sundial's documented interface: generate(x, max_new_tokens, num_samples)."""

    config_class = SundialConfig

    def __init__(self, config):
        super().__init__(config)
        self.scale = torch.nn.Linear(1, 1)
        self.post_init()

    def generate(self, inputs, max_new_tokens, num_samples):
        last = inputs[:, -1:, None]  # [b, 1, 1]
        noise = torch.randn(inputs.shape[0], num_samples, max_new_tokens, dtype=inputs.dtype)
        return last + self.scale(noise[..., None])[..., 0] * inputs.std(dim=1)[:, None, None]
'''


def build_chronos2(folder: Path) -> Path:
    import torch
    from chronos.chronos2 import Chronos2CoreConfig, Chronos2Model

    torch.manual_seed(0)
    config = Chronos2CoreConfig(d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, vocab_size=2)
    config.chronos_config = {
        "context_length": 64,
        "output_patch_size": 8,
        "input_patch_size": 8,
        "input_patch_stride": 8,
        "quantiles": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
        "use_reg_token": True,
        "max_output_patches": 4,
    }
    config.architectures = ["Chronos2Model"]
    Chronos2Model(config).save_pretrained(folder)
    return folder


def build_timesfm25(folder: Path) -> Path:
    import torch
    from transformers import TimesFm2_5Config, TimesFm2_5ModelForPrediction

    torch.manual_seed(0)
    config = TimesFm2_5Config(
        patch_length=8,
        context_length=64,
        horizon_length=16,
        num_hidden_layers=1,
        hidden_size=16,
        intermediate_size=16,
        head_dim=8,
        num_attention_heads=2,
        num_key_value_heads=2,
        output_quantile_len=16,
        max_position_embeddings=64,
    )
    TimesFm2_5ModelForPrediction(config).save_pretrained(folder)
    return folder


def build_tirex(folder: Path) -> Path:
    """A TiRex Lightning-style checkpoint (hyper_parameters + state_dict) in folder/model.ckpt."""
    import torch
    from tirex import TiRexZero

    torch.manual_seed(0)
    hyper = {
        "model_config": {
            "input_patch_size": 8,
            "output_patch_size": 8,
            "quantiles": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
            "block_kwargs": {"embedding_dim": 16, "num_heads": 2, "num_blocks": 1},
            "input_ff_dim": 32,
        },
        "train_ctx_len": 64,
    }
    model = TiRexZero(backend="torch", **hyper)
    for parameter in model.parameters():  # sLSTM weights start uninitialised (torch.empty)
        torch.nn.init.normal_(parameter, std=0.1)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"hyper_parameters": hyper, "state_dict": model.state_dict()}, folder / "model.ckpt")
    return folder


def build_sundial(folder: Path) -> Path:
    """A remote-code checkpoint with Sundial's interface (its real code is only on the Hub)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "configuration_sundial.py").write_text(SUNDIAL_CONFIG)
    (folder / "modeling_sundial.py").write_text(SUNDIAL_MODEL)
    import json

    import torch
    from safetensors.torch import save_file

    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "sundial",
                "hidden_size": 8,
                "architectures": ["SundialForPrediction"],
                "auto_map": {
                    "AutoConfig": "configuration_sundial.SundialConfig",
                    "AutoModelForCausalLM": "modeling_sundial.SundialForPrediction",
                },
            }
        )
    )
    save_file(
        {"scale.weight": torch.full((1, 1), 0.5), "scale.bias": torch.zeros(1)}, str(folder / "model.safetensors")
    )
    return folder
