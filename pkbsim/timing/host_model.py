"""Host launch overhead and compute efficiencies (data/host.toml), optionally overridden by a calibration
file with the same tables, such as one hwbackend writes from measurements."""
from __future__ import annotations

import tomllib
from importlib import resources


def host_model(calibration: str | None = None) -> dict:
    with resources.files("pkbsim.timing").joinpath("data/host.toml").open("rb") as f:
        model = tomllib.load(f)
    if calibration:
        try:
            with open(calibration, "rb") as f:
                extra = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ValueError(f"cannot read calibration file {calibration!r} ({e}); give a TOML file with "
                             f"[launch] and/or [compute] tables") from None
        for table, values in extra.items():
            if table not in ("launch", "compute") or not isinstance(values, dict):
                raise ValueError(f"{calibration}: unknown table [{table}]; a calibration file has [launch] and [compute]")
            for key, value in values.items():
                if key not in model[table]:
                    raise ValueError(f"{calibration}: [{table}] has no field {key!r}; known: {', '.join(model[table])}")
                model[table][key] = value
    return model


def launch_overhead_us(model: dict, harness: str) -> float:
    """What the launcher adds per kernel: nothing for nccl-tests (NCCL's model includes its own launch)."""
    return {"nccl-tests": 0.0, "torch": model["launch"]["torch_eager_us"],
            "cuda-graph": model["launch"]["cuda_graph_us"]}[harness]
