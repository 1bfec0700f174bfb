"""Build a tiny, randomly initialised MOMENT checkpoint and forecasting head (for bench/gpu.py).

Run by MOMENT's own interpreter (momentfm pins numpy 1.25 and transformers 4.33, so it is not
installed beside the engine): `python tiny_moment.py FOLDER HORIZON T5_CONFIG_JSON`. Imports only
momentfm, torch and safetensors. Prints the head file's path.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def build(folder: Path, horizon: int, t5_config: dict) -> Path:
    from momentfm import MOMENTPipeline
    from safetensors.torch import save_file

    config = {
        "task_name": "reconstruction",
        "model_name": "MOMENT",
        "transformer_type": "encoder_only",
        "d_model": None,
        "seq_len": 512,
        "patch_len": 8,
        "patch_stride_len": 8,
        "transformer_backbone": "google/flan-t5-small",
        "t5_config": t5_config,
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
    head = folder.parent / "moment-head.safetensors"
    save_file({k: v.contiguous() for k, v in forecaster.head.state_dict().items()}, str(head))
    return head


if __name__ == "__main__":
    print(build(Path(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])))
