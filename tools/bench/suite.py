"""The benchmark suite: every registered model, and choosing the ones a run asks for."""

from __future__ import annotations

from tools.bench import models_micro, models_zoo  # noqa: F401  (importing registers the models)
from tools.bench.registry import MODELS, ModelSpec


def select_models(device: str, names: tuple[str, ...] = (), quick: bool = False) -> list[ModelSpec]:
    """The models to run on `device`: those named (in that order), else the quick subset or all of them.

    Names may also be family names (`conv`, `transformer`, ...); a model name wins over a family's. Raises ValueError for a name that is
    neither, or for a model that does not run on `device`.
    """
    if not names:
        return [spec for spec in MODELS.values() if device in spec.devices and (not quick or device in spec.quick_on)]
    families = {spec.family for spec in MODELS.values()}
    chosen: list[ModelSpec] = []
    for name in names:
        if name not in MODELS and name in families:
            chosen += [s for s in MODELS.values() if s.family == name and device in s.devices and s not in chosen]
        elif name not in MODELS:
            raise ValueError(f"unknown model {name!r}: choose from {', '.join(MODELS)} or a family ({', '.join(sorted(families))})")
        elif device not in MODELS[name].devices:
            raise ValueError(f"model {name!r} runs only on {', '.join(MODELS[name].devices)}, not {device}")
        elif MODELS[name] not in chosen:
            chosen.append(MODELS[name])
    return chosen
