"""TabPFN-TS 3 (Prior Labs, 2026): TabPFN-TS's pipeline with the TabPFN v3 time-series regressor.

The same package and pipeline as `tabpfn-ts` (tabpfn-time-series 1.3.0 on tabpfn ≥ 9, local mode),
so it runs in that type's environment; what differs is the checkpoint (Prior-Labs/tabpfn_3, whose
weights are gated behind a licence accepted on the Hub) and so the facts on the card.
"""

from __future__ import annotations

from pydantic import Field

from causalrate.systems.base import SYSTEMS
from causalrate.systems.zoo.tabpfn_ts import TabPFNTS, TabPFNTSSettings


class TabPFNTS3Settings(TabPFNTSSettings):
    checkpoint_file: str = Field(
        "tabpfn-v3-regressor-v3_20260506_timeseries.ckpt",
        description="the TabPFN v3 regressor .ckpt inside the model folder (Prior-Labs/tabpfn_3)",
    )


@SYSTEMS.register("tabpfn-ts3")
class TabPFNTS3(TabPFNTS):
    """TabPFN-TS 3: TabPFN v3 regressing each value on calendar and seasonal features of its date.

    Loaded as `tabpfn-ts` is (TabPFNTSPipeline in LOCAL mode, model_path = the v3 checkpoint);
    context rows whose target is NaN are dropped by the package.
    """

    Settings = TabPFNTS3Settings
    settings: TabPFNTS3Settings
    environment_name = "tabpfn-ts"
    licence = "weights gated on the Hugging Face Hub (Prior-Labs/tabpfn_3: its licence is accepted before download)"
