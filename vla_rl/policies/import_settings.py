"""The ``policy`` settings that load a checkpoint made elsewhere (a LeRobot folder, an openpi export,
an OpenVLA folder) and fit it to the env: shared by the RL and SFT configs."""

from __future__ import annotations

from dataclasses import dataclass

from vla_rl.policies.env_maps import EnvMapSettings


@dataclass
class ImportSettings(EnvMapSettings):
    """How an ``init_from`` folder of another toolkit is read, beside the maps that fit it to the env
    (``EnvMapSettings``); each setting is ignored by folders of the other kinds."""

    tokenizer_dir: str | None = None
    """A local tokenizer for an ``init_from`` LeRobot ``pi0`` / ``pi05`` folder that carries none
    (LeRobot's processors name the hub's PaliGemma tokenizer instead of saving it) and for an openpi
    export (which never carries one); None: the folder's."""
    openpi_asset_id: str | None = None
    """For an ``init_from`` openpi PyTorch export whose ``assets/`` holds the statistics of several
    robots: the asset id to use (e.g. ``physical-intelligence/libero``); None: the only one there."""
    openpi_delta_action_mask: list[bool] | None = None
    """For an ``init_from`` openpi export trained on actions relative to the state (its training
    config's ``DeltaActions`` / ``AbsoluteActions``, e.g. ``[true, true, true, true, true, true, false]``
    for openpi's LIBERO pi0 configs with ``extra_delta_transform``): true for each leading action
    dimension to which the raw state's dimension of the same index is added. None: absolute actions."""
    unnorm_key: str | None = None
    """An ``init_from`` OpenVLA folder (``name: openvla``): the dataset key of its ``norm_stats`` whose
    action statistics (un-)normalise the actions; None: the folder's only key (or the one it was saved
    with), a ``ConfigError`` listing the keys when it has several."""
    trust_remote_code: bool = False
    """Run the modelling code an ``init_from`` OpenVLA folder brings (its ``modeling_*.py``; local
    files only). Without it such a folder is refused."""
