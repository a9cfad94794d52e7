"""The HTML views' Jinja2 templates: shipped in the package, every value autoescaped."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

__all__ = ["render", "template_text"]


@cache
def _environment(package: str) -> Environment:
    return Environment(loader=PackageLoader(package, "templates"), autoescape=True, trim_blocks=True,
                       lstrip_blocks=True, undefined=StrictUndefined)


def render(package: str, name: str, **context: Any) -> Markup:
    """Render template ``name`` of ``package`` (e.g. ``"pipecat_harness.trace"``) with ``context``."""
    return Markup(_environment(package).get_template(name).render(**context))


def template_text(package: str, name: str) -> str:
    """The text of template ``name`` of ``package`` as written (a stylesheet the pages inline)."""
    return files(package).joinpath("templates", name).read_text(encoding="utf-8")
