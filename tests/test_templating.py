"""The compiled-template cache (report.templating.TemplateCache): it saves compiling, never changes a page."""

from __future__ import annotations

from causalrate.report import templating

NAMES = ("label.html.j2", "card.md.j2", "comparison.html.j2")


def _code(env) -> dict[str, bytes]:
    """Each template's compiled render function, as Jinja compiles it or reads it from the cache."""
    return {name: env.get_template(name).root_render_func.__code__.co_code for name in NAMES}


def test_compiled_templates_are_kept_in_the_cache_folder_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALRATE_CACHE_DIR", str(tmp_path))
    compiled = _code(templating.environment())
    assert len(list((tmp_path / "templates").rglob("*.cache"))) >= len(NAMES)
    again = templating.environment()
    calls: list[str] = []
    real = again.compile
    monkeypatch.setattr(again, "compile", lambda source, *a, **k: calls.append(source) or real(source, *a, **k))
    assert _code(again) == compiled  # the same code, read back
    assert calls == []  # without compiling


def test_a_cache_folder_that_cannot_be_made_only_costs_the_saving(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("CAUSALRATE_CACHE_DIR", str(blocker))
    env = templating.environment()
    assert env.from_string("{{ 1 + 1 }}").render() == "2"
    assert _code(env) == _code(templating.environment())
