"""The Jinja environment for bundle templates (StrictUndefined: a missing value is a bug)."""

from __future__ import annotations

from functools import lru_cache

import jinja2

from aotc.paths import templates_dir


@lru_cache(maxsize=1)
def env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(template: str, **ctx: object) -> str:
    return env().get_template(template).render(**ctx)


