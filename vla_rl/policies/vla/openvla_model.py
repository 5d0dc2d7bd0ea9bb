"""The model class an OpenVLA folder brings, loaded from the folder alone.

``transformers``' remote-code machinery (``get_class_from_dynamic_module``, the code that
``trust_remote_code=True`` runs) imports the folder's ``modeling_*.py`` (and the files it imports),
local files only; the class then loads the folder's weights with ``from_pretrained(...,
local_files_only=True)``. Only call this for a folder the user chose to trust
(``policy.trust_remote_code``).

OpenVLA's code was written for ``transformers`` 4.40; under ``transformers`` 5 (this project's) three
things differ, and are met here without touching the folder's code:

* ``AutoModelForVision2Seq``, the auto class its ``auto_map`` names, is gone: the class is taken from
  the map by name;
* its ``tie_weights()`` takes no arguments, which ``transformers`` 5 now passes: a subclass accepts
  and drops them (the method then does what it always did);
* asking for SDPA attention makes ``transformers`` 5 read the model's ``_supports_sdpa`` before the
  language model exists: the model is loaded with eager attention (the same maths).

Its ``generate`` (and so its ``predict_action``) does not run under ``transformers`` 5 (the class
does not inherit ``GenerationMixin``); the policy decodes through ``forward`` only.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn
from transformers.dynamic_module_utils import get_class_from_dynamic_module

from vla_rl.config.structured import ConfigError
from vla_rl.policies.openvla_folder import INIT_FROM_KEY, OpenVLAFolder


def load_remote_model(folder: OpenVLAFolder) -> nn.Module:
    """The folder's model in eval mode, in float32 whatever the dtype of its weights (``policy.dtype``
    casts it afterwards); ``ConfigError`` when its code does not import or load here
    (a package it needs is missing, or it was written for another ``transformers``)."""
    try:
        model_class = get_class_from_dynamic_module(
            folder.model_class_ref, str(folder.path), local_files_only=True
        )
        model = compatible(model_class).from_pretrained(
            str(folder.path),
            local_files_only=True,
            trust_remote_code=True,
            attn_implementation="eager",
            dtype=torch.float32,
        )
    except (ImportError, NotImplementedError, AttributeError, TypeError) as error:
        raise ConfigError(
            f"config key '{INIT_FROM_KEY}': the modelling code of {folder.path} "
            f"({folder.model_class_ref}) does not run in this environment: {type(error).__name__}: {error}"
        ) from error
    return model.eval()


def compatible(model_class: type) -> type:
    """``model_class``, or a subclass whose ``tie_weights`` accepts the keywords ``transformers`` 5
    passes when the class's own takes none."""
    parameters = inspect.signature(model_class.tie_weights).parameters.values()
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        return model_class

    def tie_weights(self: nn.Module, *args: object, **kwargs: object) -> object:
        return model_class.tie_weights(self)

    return type(model_class.__name__, (model_class,), {"tie_weights": tie_weights})
