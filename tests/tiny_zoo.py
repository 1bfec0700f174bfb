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


def build_timesfm3(folder: Path) -> Path:
    """A TimesFM3Torch of one small layer, saved by its huggingface_hub mixin (config.json + model.safetensors)."""
    import torch
    from timesfm3 import ResidualBlockConfig, StackedTransformersConfig, TimesFM3Torch, TransformerConfig

    torch.manual_seed(0)
    transformer = TransformerConfig(
        model_dims=16,
        hidden_dims=16,
        num_heads=2,
        attention_norm="rms",
        feedforward_norm="rms",
        qk_norm="rms",
        use_bias=False,
        use_rope_seq=True,
        use_rope_var=False,
        ff_activation="relu",
        deterministic=True,
    )
    TimesFM3Torch(
        input_patch_len=8,
        output_patch_len=16,
        residual_block_config=ResidualBlockConfig(hidden_dims=16, output_dims=16, use_bias=False, activation="relu"),
        transformer_config=StackedTransformersConfig(num_layers=1, transformer=transformer),
    ).save_pretrained(folder)
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


TABPFN_SIZES = {  # a few thousand parameters of each architecture
    "tabpfn_v2": {
        "emsize": 16,
        "nlayers": 1,
        "nhead": 2,
        "features_per_group": 2,
        "max_num_classes": 0,
        "num_buckets": 32,
    },
    "tabpfn_v3": {
        "embed_dim": 16,
        "dist_embed_num_blocks": 1,
        "dist_embed_num_heads": 2,
        "dist_embed_num_inducing_points": 8,
        "feat_agg_num_blocks": 1,
        "feat_agg_num_heads": 2,
        "nlayers": 1,
        "icl_num_heads": 2,
        "decoder_head_dim": 8,
        "decoder_num_heads": 2,
        "softmax_scaling_mlp_hidden_dim": 8,
        "max_num_classes": 0,
        "num_buckets": 32,
    },
}

# The builders below run in each model's own environment (its package is not beside the engine's):
# tests.tiny_models.build_in(python, "tests.tiny_zoo:build_moirai2", folder) calls them there.


def build_moirai2(folder: Path) -> Path:
    """A Moirai-2 module saved by huggingface_hub's mixin (config.json + model.safetensors), as on the Hub."""
    import torch
    from uni2ts.model.moirai2 import Moirai2Module

    torch.manual_seed(0)
    module = Moirai2Module(
        d_model=64, d_ff=32, num_layers=1, patch_size=8, max_seq_len=64, attn_dropout_p=0.0, dropout_p=0.0
    )
    module.save_pretrained(folder)
    return folder


def build_toto(folder: Path) -> Path:
    """A Toto backbone saved as Datadog/Toto-Open-Base-1.0 lays it out: config.json + model.safetensors."""
    import json

    import torch
    from safetensors.torch import save_file
    from toto.model.toto import Toto

    torch.manual_seed(0)
    config = {
        "patch_size": 4,
        "stride": 4,
        "embed_dim": 16,
        "num_layers": 2,
        "num_heads": 2,
        "mlp_hidden_dim": 32,
        "dropout": 0.0,
        "spacewise_every_n_layers": 2,
        "scaler_cls": "<class 'model.scaler.CausalPatchStdMeanScaler'>",
        "output_distribution_classes": ["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
        "output_distribution_kwargs": {"k_components": 2},
        "spacewise_first": True,
        "use_memory_efficient_attention": False,
    }
    model = Toto(**config)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "model.safetensors"))
    return folder


def build_granite_ttm(folder: Path) -> Path:
    """A TinyTimeMixer of context 16 and prediction length 4, saved with save_pretrained (as a TTM-r2 revision)."""
    import torch
    from tsfm_public import TinyTimeMixerConfig, TinyTimeMixerForPrediction

    torch.manual_seed(0)
    config = TinyTimeMixerConfig(
        context_length=16,
        patch_length=4,
        patch_stride=4,
        prediction_length=4,
        d_model=16,
        num_layers=1,
        decoder_d_model=8,
        decoder_num_layers=1,
        dropout=0.0,
        head_dropout=0.0,
    )
    TinyTimeMixerForPrediction(config).save_pretrained(folder)
    return folder


def build_tabpfn(folder: Path, *, architecture_name: str = "tabpfn_v2", file: str = "tabpfn-tiny.ckpt") -> Path:
    """A TabPFN regressor checkpoint (state_dict + config + bar-distribution borders) in folder/`file`.

    The layout tabpfn's own save_tabpfn_model writes and its load_model_criterion_config reads.
    """
    import dataclasses

    import torch
    from tabpfn.architectures import ARCHITECTURES
    from tabpfn.model_loading import get_loss_criterion

    torch.manual_seed(0)
    architecture = ARCHITECTURES[architecture_name]
    config, _ = architecture.parse_config(TABPFN_SIZES[architecture_name])
    model = architecture.get_architecture(config)
    criterion = get_loss_criterion(config, estimator_type="regressor", regression_borders=torch.linspace(-4, 4, 33))
    state = {**model.state_dict(), **{f"criterion.{k}": v for k, v in criterion.state_dict().items()}}
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = {"state_dict": state, "config": dataclasses.asdict(config), "architecture_name": architecture_name}
    torch.save(checkpoint, folder / file)
    return folder


def build_tabpfn3(folder: Path) -> Path:
    """A TabPFN v3 regressor checkpoint (the architecture of TabPFN-TS 3) in folder/tabpfn3-tiny.ckpt."""
    return build_tabpfn(folder, architecture_name="tabpfn_v3", file="tabpfn3-tiny.ckpt")


def build_tirex2(folder: Path) -> Path:
    """A one-block TiRex-2 (bidirectional sLSTM time mixer) saved as NX-AI/TiRex-2 lays it out: config.json +
    model.safetensors, the tensors its cells share stored once (safetensors' save_model), as its loader expects."""
    import json

    import torch
    from safetensors.torch import save_model
    from tirex2 import TiRex2

    torch.manual_seed(0)
    mixer = {"embedding_dim": 16, "num_heads": 2}
    config = {
        "stack_config": {
            "templates": {
                "recurrent": {
                    "time_mixer": {"model_type": "bi-slstm", **mixer},
                    "variate_mixer": mixer,
                    "dropout": 0.0,
                    "eps": 1e-6,
                }
            },
            "recipe": ["recurrent"],
        },
        "num_blocks": 1,
        "embedding_dim": 16,
        "input_patch_size": 8,
        "output_patch_size": 8,
        "quantiles": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
        "tokenizer_cfg": {"output_patch_size": 8, "input_patch_size": 8, "input_patch_stride": 8},
        "scaler_cfg": {},
        "h_expand": 1.0,
        "context_len": 64,
        "future_len": 16,
        "input_ff_dim": 32,
        "act_func": "GELU",
        "dropout": 0.0,
    }
    model = TiRex2(**config, device="cpu")
    for parameter in model.parameters():  # recurrent kernels start at zero: random weights make a forecast move
        torch.nn.init.normal_(parameter, std=0.1)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_model(model, str(folder / "model.safetensors"))
    return folder


def build_flowstate(folder: Path) -> Path:
    """A one-layer FlowState (S5 encoder, functional basis decoder), saved with save_pretrained as on the Hub."""
    import torch
    from tsfm_public import FlowStateConfig, FlowStateForPrediction

    torch.manual_seed(0)
    config = FlowStateConfig(
        context_length=64,
        embedding_feature_dim=16,
        encoder_num_layers=1,
        encoder_state_dim=16,
        encoder_num_hippo_blocks=2,
        decoder_patch_len=24,
        decoder_dim=16,
    )
    FlowStateForPrediction(config).save_pretrained(folder)
    return folder


def tabpfn3_forecasts_without_nan_rows(folder: Path) -> dict[str, list[float]]:
    """TabPFN-TS 3 through its adapter on a window with a gap, and the package's pipeline on the same context
    with that row left out: the two agree when the package drops NaN rows (its stated policy). Run in its env."""
    import numpy as np
    import pandas as pd

    from causalrate.systems import SYSTEMS
    from causalrate.systems.base import Batch

    build_tabpfn3(folder)
    cls = SYSTEMS.get("tabpfn-ts3")
    system = cls(cls.Settings(model=str(folder), checkpoint_file="tabpfn3-tiny.ckpt"), base_dir=folder)
    x = 100 + np.cumsum(np.random.default_rng(1).normal(size=(1, 30)), axis=1)
    x[0, 12] = np.nan
    days = np.arange(np.datetime64("2022-01-03"), np.datetime64("2022-02-06"))[None]
    batch = Batch(x, 4, np.zeros(1, np.uint64), ({},), days[:, :30], days[:, 30:34])
    adapter = system.forecast(batch).point[0]
    keep = ~np.isnan(x[0])
    context = pd.DataFrame({"item_id": 0, "timestamp": pd.to_datetime(days[0, :30][keep]), "target": x[0][keep]})
    future = pd.DataFrame({"item_id": 0, "timestamp": pd.to_datetime(days[0, 30:34])})
    frame = system.loaded().predict_df(context, future_df=future, quantiles=[0.5])
    direct = frame.reset_index().sort_values("timestamp")[next(c for c in frame.columns if str(c) == "0.5")]
    return {"adapter": [float(v) for v in adapter], "without_the_row": [float(v) for v in direct]}
