"""The 2026 model zoo: one module per model, each registering its system type when imported.

A new model is a new module here; nothing else lists it. Models whose package conflicts with
the core pins declare `environment_requirements` (what their own Python environment needs).
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
