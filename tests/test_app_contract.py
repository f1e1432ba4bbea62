"""The app contract: addressing, loading, and errors located in user code."""
from pathlib import Path

import pytest
import torch

import torchport
from torchport.app import builtin_names, is_user_file, load_app, parse_spec, preflight
from torchport.errors import UserError

APPS = Path(__file__).parent / "apps"


def test_spec_forms():
    assert parse_spec(None).module == "torchport.builtin.classifier"
    assert parse_spec("builtin:gpt").module == "torchport.builtin.gpt"
    file_spec = parse_spec("some/dir/app.py")
    assert file_spec.file == Path("some/dir/app.py") and file_spec.function == "app"
    named = parse_spec("some/dir/app.py:make")
    assert named.file == Path("some/dir/app.py") and named.function == "make"
    module = parse_spec("package.module:factory")
    assert module.file is None and module.module == "package.module" and module.function == "factory"


def test_builtins_are_listed_and_load():
    assert builtin_names() == ["classifier", "cnn", "gpt"]
    for name in builtin_names():
        app = load_app(f"builtin:{name}")
        assert isinstance(app, torchport.App) and app.name == name
        model = app.model()
        batch = next(iter(app.data()))
        loss = app.loss(model, batch)
        assert loss.dim() == 0 and torch.isfinite(loss)


def test_file_and_function_addresses():
    assert load_app(str(APPS / "spine_tiny.py")).name == "tiny"
    assert load_app(f"{APPS / 'spine_tiny.py'}:other_entry").name == "other"
    assert load_app("torchport.builtin.cnn:app").name == "cnn"


def test_missing_file():
    with pytest.raises(UserError, match="app file not found"):
        preflight(parse_spec("no/such/app.py"))


def test_syntax_error_is_located():
    with pytest.raises(UserError) as caught:
        load_app(str(APPS / "spine_syntax_error.py"))
    assert caught.value.location == f"{APPS / 'spine_syntax_error.py'}:4"
    assert "syntax error" in caught.value.message


def test_missing_function_names_the_candidates():
    with pytest.raises(UserError, match="defines no function 'nope'.*app, other_entry"):
        load_app(f"{APPS / 'spine_tiny.py'}:nope")


def test_factory_exception_is_located_in_user_code():
    with pytest.raises(UserError) as caught:
        load_app(str(APPS / "spine_factory_raises.py"))
    assert caught.value.location == f"{APPS / 'spine_factory_raises.py'}:3"
    assert "KeyError" in caught.value.message


def test_factory_must_return_an_app():
    with pytest.raises(UserError, match="returned dict, expected torchport.App"):
        load_app(str(APPS / "spine_not_an_app.py"))


def test_unknown_builtin_and_module():
    with pytest.raises(UserError, match="unknown built-in app 'resnet'"):
        load_app("builtin:resnet")
    with pytest.raises(UserError, match="app module not found"):
        load_app("no_such_package.app:app")


def test_app_fields_must_be_callable():
    with pytest.raises(TypeError, match="App.loss must be callable"):
        torchport.App(model=lambda: None, data=list, loss=3, optimizer=lambda m: None)


def test_user_files_exclude_torch_and_torchport():
    assert is_user_file(str(APPS / "spine_tiny.py"))
    assert not is_user_file(torch.__file__)
    assert not is_user_file(torchport.app.__file__)
    assert is_user_file(str(Path(torchport.__file__).parent / "builtin" / "gpt.py"))
