"""Fixtures of the conformance suite: one env per backend case, skipped with the backend's reason."""

from __future__ import annotations

import pytest
from backend_cases import CASES, BackendCase

from vla_rl.envs.registry import backend_unavailable_reason, make_env


@pytest.fixture(scope="module", params=CASES, ids=[case.id for case in CASES])
def case(request) -> BackendCase:
    reason = backend_unavailable_reason(request.param.backend)
    if reason is not None:
        pytest.skip(f"{request.param.backend}: {reason}")
    return request.param


@pytest.fixture(scope="module")
def env(case: BackendCase):
    environment = make_env(case.config())
    yield environment
    environment.close()
