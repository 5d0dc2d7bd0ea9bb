import pytest

from vla_rl.envs.extras import MissingExtraError, import_optional, missing_modules_reason
from vla_rl.envs.registry import backend_unavailable_reason, registered_backends


def test_missing_module_reason_names_the_extra():
    assert missing_modules_reason(["json"], extra="warp") is None
    reason = missing_modules_reason(["json", "no_such_simulator_xyz"], extra="warp")
    assert reason == 'needs no_such_simulator_xyz: pip install -e ".[warp]"'


def test_import_optional_raises_an_error_that_names_the_extra():
    with pytest.raises(MissingExtraError, match=r'pip install -e "\.\[maniskill\]"'):
        import_optional("no_such_simulator_xyz", extra="maniskill", backend="maniskill")
    assert import_optional("json", extra="x", backend="y").__name__ == "json"


def test_every_backend_answers_whether_it_can_run():
    for name in registered_backends():
        reason = backend_unavailable_reason(name)
        assert reason is None or (isinstance(reason, str) and reason)
    with pytest.raises(KeyError, match="unknown environment backend"):
        backend_unavailable_reason("no_such_backend")
