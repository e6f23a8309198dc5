"""The one template environment (security suite): Jinja's immutable sandbox, no statement
that loads another file, bounded ranges, repetitions and powers, data-only values, and every
failure an InputError (exit 2) that knows the template's line."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.core import templates
from testbed.core.errors import EXIT_INPUT, InputError

pytestmark = pytest.mark.security

#: Python-object walks that, rendered by a plain Jinja Environment, run `touch <marker>`.
ESCAPES = [
    "{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
    "{{ lipsum.__globals__['os'].popen('touch MARKER').read() }}",
    "{% for c in ''.__class__.__mro__[1].__subclasses__() %}{% if c.__name__ =="
    " 'catch_warnings' %}{{ c()._module.__builtins__['__import__']('os')"
    ".system('touch MARKER') }}{% endif %}{% endfor %}",
    "{{ self.__init__.__globals__.__builtins__.__import__('os').system('touch MARKER') }}",
]


@pytest.mark.parametrize("escape", ESCAPES)
def test_python_object_walks_are_refused_and_run_nothing(
    escape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "MARKER"
    with pytest.raises(templates.UnsafeTemplate, match="unsafe") as refused:
        templates.render(f"first line\n{escape}\n", {})
    assert refused.value.line == 2
    assert refused.value.exit_code == EXIT_INPUT
    if escape.startswith("{{"):  # a lone expression, evaluated for its value
        with pytest.raises(templates.UnsafeTemplate):
            templates.evaluate(escape.removeprefix("{{").removesuffix("}}"), {})
    assert not marker.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("statement", "word"),
    [
        ("{% include 'other.yaml' %}", "include"),
        ("{% import 'macros.j2' as m %}", "import"),
        ("{% from 'macros.j2' import m %}", "from … import"),
        ("{% extends 'base.yaml' %}", "extends"),
    ],
)
def test_statements_that_load_a_file_are_refused_at_their_line(statement: str, word: str) -> None:
    with pytest.raises(templates.UnsafeTemplate, match=f"{{% {word} %}} is not allowed") as no:
        templates.render(f"a: 1\nb: 2\n{statement}\n", {})
    assert no.value.line == 3


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("{% for i in range(10**8) %}{% endfor %}", r"range\(100000000\) makes 100000000 items"),
        ("{{ range(100001) | list | length }}", "at most 100000"),
        ("{{ 'x' * 10**9 }}", "repetitions may make at most"),
        ("{{ [0] * 10**8 }}", "repetitions may make at most"),
        ("{{ 7 ** 100000 }}", "numbers may have at most 4096"),
        ("{{ 2.0 ** 100000 }}", "too large a number"),
    ],
)
def test_runaway_ranges_repetitions_and_powers_are_refused(source: str, words: str) -> None:
    with pytest.raises(templates.UnsafeTemplate, match=words):
        templates.render(source, {})


def test_what_stays_allowed_renders_as_before() -> None:
    names = {"vars": {"pool": "a100", "sizes": [1, 2]}, "n": 3}
    assert templates.render("{{ vars.pool }}-{{ n * 2 }}-{{ 2 ** 10 }}", names) == "a100-6-1024"
    assert templates.render("{% for i in range(3) %}{{ i }}{% endfor %}", names) == "012"
    assert templates.render("{{ '-' * 3 }}{{ vars.sizes | join(',') }}", names) == "---1,2"
    assert templates.evaluate(" vars.sizes ", names) == [1, 2]
    assert templates.evaluate("range(3)", names) == [0, 1, 2]  # a range becomes a list
    assert templates.evaluate("{'a': n}", names) == {"a": 3}


@pytest.mark.parametrize(
    ("expression", "kind"),
    [("lipsum", "function"), ("cycler(1, 2)", "Cycler"), ("[joiner]", "type")],
)
def test_a_value_must_be_data(expression: str, kind: str) -> None:
    with pytest.raises(templates.UnsafeTemplate, match=f"gives a {kind}, not data"):
        templates.evaluate(expression, {})


def test_mutating_a_given_value_is_refused() -> None:
    names = {"vars": {"a": [1]}}
    with pytest.raises(templates.UnsafeTemplate, match="'append' of 'list'"):
        templates.render("{{ vars.a.append(2) }}", names)
    assert names == {"vars": {"a": [1]}}


@pytest.mark.parametrize(
    ("source", "kind", "words", "line"),
    [
        ("a\nb {{ missing }}", templates.UndefinedName, "'missing' is undefined", 2),
        ("a\n\n{{ 1 / 0 }}", templates.TemplateFailure, "ZeroDivisionError", 3),
        ("{{ 'a' + 1 }}", templates.TemplateFailure, "TypeError", 1),
        ("a\n{{ oops", templates.TemplateFailure, "template syntax", 2),
    ],
)
def test_every_failure_is_an_input_error_at_the_templates_line(
    source: str, kind: type[templates.TemplateFailure], words: str, line: int
) -> None:
    with pytest.raises(kind, match=words) as failed:
        templates.render(source, {})
    assert isinstance(failed.value, InputError)
    assert failed.value.line == line
