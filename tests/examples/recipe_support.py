"""Shared by the recipe tests (examples/recipes): the recipes' import path,
stand-in modules for frameworks that are not installable here, and a notice
file written as spotguard writes it."""
import json
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPES = os.path.join(ROOT, "examples", "recipes")
sys.path.insert(0, RECIPES)


def install_module(name, **attributes):
    """Puts a stand-in module `name` (and its parents) into sys.modules."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    module = sys.modules[name]
    for key, value in attributes.items():
        setattr(module, key, value)
    return module


def post_notice(path):
    """Writes the notice JSON the way the agent does: a temp name renamed in."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"action": "terminate", "time": "2026-01-01T00:02:00Z"}, f)
    os.rename(tmp, path)

