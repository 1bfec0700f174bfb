"""The user's causalrate cache folder, shared by the stages that keep files between runs."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """$CAUSALRATE_CACHE_DIR, else $XDG_CACHE_HOME/causalrate, else ~/.cache/causalrate.

    The forecast cache, the systems' own environments, downloaded prices and the compiled card templates live
    under it.
    """
    folder = os.environ.get("CAUSALRATE_CACHE_DIR")
    if folder:
        return Path(folder).expanduser()
    return (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "causalrate").expanduser()
