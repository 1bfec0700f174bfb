"""The causal model of RQ1–RQ3 with dowhy: Z → P, Z → R, P → R; identify the backdoor adjustment set."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from causalrate.logs import quieter

if TYPE_CHECKING:
    import networkx as nx

TREATMENT, OUTCOME = "P", "R"


@dataclass(frozen=True)
class Identification:
    adjustment_set: tuple[str, ...]  # the backdoor variables dowhy found
    estimand: str  # the backdoor estimand, e.g. "d/dP E[R | company, industry]"


def causal_graph(confounders: list[str]) -> nx.DiGraph:
    import networkx as nx  # with dowhy, only where a graph is built: a re-rate reads identification from its memo

    graph = nx.DiGraph([(TREATMENT, OUTCOME)])
    for z in confounders:
        graph.add_edges_from([(z, TREATMENT), (z, OUTCOME)])
    return graph


def identify(confounders: list[str]) -> Identification:
    """Build dowhy's CausalModel on the graph and identify the backdoor estimand of P on R."""
    from dowhy import CausalModel

    # identification only reads the graph; dowhy still wants a frame with the graph's columns
    frame = pd.DataFrame({c: np.zeros(2) for c in [TREATMENT, OUTCOME, *confounders]})
    frame[TREATMENT] = [False, True]
    with warnings.catch_warnings(), quieter("dowhy", logging.WARNING):
        warnings.simplefilter("ignore")
        model = CausalModel(data=frame, treatment=TREATMENT, outcome=OUTCOME, graph=causal_graph(confounders))
        estimand = model.identify_effect(proceed_when_unidentifiable=True)
    backdoor = tuple(sorted(estimand.get_backdoor_variables() or []))
    # dowhy prints the estimand with its variables in set order, which changes between processes:
    # write it ourselves from the sorted adjustment set so ratings.json stays byte-identical
    expression = f"d/dP E[R | {', '.join(backdoor)}]" if backdoor else "d/dP E[R]"
    return Identification(adjustment_set=backdoor, estimand=expression)
