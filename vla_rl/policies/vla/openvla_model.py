"""The model class an OpenVLA folder brings, loaded from the folder alone.

``transformers``' remote-code machinery (``get_class_from_dynamic_module``, the same code
``trust_remote_code=True`` runs) imports the folder's ``modeling_*.py`` (and the files it imports),
local files only; the class then loads the folder's weights with ``from_pretrained(...,
local_files_only=True)``. ``transformers`` 5 dropped ``AutoModelForVision2Seq``, the auto class
OpenVLA's ``auto_map`` names, so the class is taken from the map by name instead of through it.
Only call this for a folder the user chose to trust (``policy.trust_remote_code``).
"""

from __future__ import annotations

from torch import nn
from transformers.dynamic_module_utils import get_class_from_dynamic_module

from vla_rl.config.structured import ConfigError
from vla_rl.policies.vla.openvla_folder import INIT_FROM_KEY, OpenVLAFolder


def load_remote_model(folder: OpenVLAFolder) -> nn.Module:
    """The folder's model in eval mode; ``ConfigError`` when its code does not import or load here
    (a package it needs is missing, or it was written for another ``transformers``)."""
    try:
        model_class = get_class_from_dynamic_module(
            folder.model_class_ref, str(folder.path), local_files_only=True
        )
        model = model_class.from_pretrained(str(folder.path), local_files_only=True, trust_remote_code=True)
    except (ImportError, NotImplementedError, AttributeError, TypeError) as error:
        raise ConfigError(
            f"config key '{INIT_FROM_KEY}': the modelling code of {folder.path} "
            f"({folder.model_class_ref}) does not run in this environment: {type(error).__name__}: {error}"
        ) from error
    return model.eval()
