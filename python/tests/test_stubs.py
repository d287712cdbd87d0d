"""The type stubs (python/tfm/_tfm.pyi) describe the compiled module as it is: every public class,
function and attribute, and every function's parameters by name and in order, so that an editor's
completion is never out of date."""

import ast
import re
from pathlib import Path

import tfm
from tfm import _tfm

STUBS = Path(tfm.__file__).with_name("_tfm.pyi")


def stub_tree():
    return ast.parse(STUBS.read_text(encoding="utf-8"))


def parameters(function):
    """Parameter names of a stub function, self and `*` excluded."""
    args = function.args
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg != "self"]


def bound_parameters(function):
    """Parameter names of a pybind11 function, from the signature its docstring starts with."""
    signature = function.__doc__.splitlines()[0]
    inside = signature[signature.index("(") + 1: signature.rindex(")")]
    names = []
    for part in re.split(r",\s*(?![^\[\]]*\])", inside):
        name = part.split(":")[0].strip()
        if name and name not in ("self", "*"):
            names.append(name)
    return names


def public(names):
    return {n for n in names if not n.startswith("_")}


def test_the_stubs_name_every_public_member():
    tree = stub_tree()
    stubbed = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            stubbed[node.name] = node
        elif isinstance(node, ast.FunctionDef):
            stubbed[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            stubbed[node.target.id] = node
    module_names = public(dir(_tfm)) | {"__version__"}
    assert public(stubbed) | {"__version__"} == module_names
    for name, node in stubbed.items():
        if not isinstance(node, ast.ClassDef):
            continue
        members = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
        cls = getattr(_tfm, name)
        assert public(members) == public(vars(cls)) - {"__init__"}, name
        for member, stub in members.items():
            if member.startswith("_") and member != "__init__":
                continue
            bound = getattr(cls, member)
            if isinstance(bound, property):
                continue
            assert parameters(stub) == bound_parameters(bound), f"{name}.{member}"


def test_the_stubs_functions_take_the_modules_parameters():
    for node in stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            assert parameters(node) == bound_parameters(getattr(_tfm, node.name)), node.name
