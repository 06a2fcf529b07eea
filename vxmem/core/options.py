"""A verb's options declared once, as a dataclass, and the verbs whose signature is made from it.

A declaration is a dataclass whose fields are the options, each with its type, its default
and a line that says what it means (:func:`option`). :func:`takes` turns a method written as
``verb(self, query, options)`` into the public ``verb(self, query, <every option>)``: calls
bind to the declaration's own ``__init__``, ``inspect.signature`` and ``help()`` show every
option with its default, and the docstring lists them. The typing is a ``ParamSpec`` taken from
the declaration, so mypy and editors check a call against the options themselves: a verb
declared this way needs no signature of its own that could drift.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
import typing
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
O = TypeVar("O")  # noqa: E741 - the declaration's type
S = TypeVar("S")  # the class a verb is a method of
R = TypeVar("R")

__all__ = ["as_kwargs", "docs_of", "option", "option_docs", "signature_of", "takes"]


def option(default: Any, doc: str) -> Any:
    """A field of a declaration: its default and what it means (one line, for the docstrings,
    the servers' schemas and their descriptions)."""
    return dataclasses.field(default=default, metadata={"doc": doc})


def docs_of(declaration: type) -> dict[str, str]:
    """Each option's line, by name, in declaration order."""
    return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(declaration)}


def as_kwargs(options: Any) -> dict[str, Any]:
    """The options of a declaration's instance as keyword arguments (not copied)."""
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


def signature_of(declaration: type, first: list[inspect.Parameter]) -> inspect.Signature:
    """``first`` (self, the query...) followed by every option, positional or keyword, with its
    default and type (resolved, so ``help()`` shows types rather than strings)."""
    hints = typing.get_type_hints(declaration)
    opts = [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default,
                              annotation=hints[f.name]) for f in dataclasses.fields(declaration)]
    return inspect.Signature([*first, *opts])


def option_docs(declaration: type) -> str:
    """The ``:param name: line`` block of every option, as a docstring lists parameters."""
    lines = []
    for name, doc in docs_of(declaration).items():
        lines.append(textwrap.fill(f":param {name}: {doc}", width=100, subsequent_indent="    "))
    return "\n".join(lines)


def takes(declaration: Callable[P, O]) -> Callable[[Callable[[S, str, O], R]], Callable[Concatenate[S, str, P], R]]:
    """Give ``verb(self, query, options)`` the signature ``verb(self, query, *options*)``: the
    options of ``declaration`` (a dataclass), bound by its ``__init__`` into one instance.

    The docstring is the verb's own (ending with its ``query`` line) followed by ``:param``
    lines made from the declaration. A wrong option is the ``TypeError`` Python raises for a
    wrong argument, naming the verb.
    """
    spec: Any = declaration  # a dataclass, typed as its __init__ for the ParamSpec
    if not (isinstance(spec, type) and dataclasses.is_dataclass(spec)):
        raise TypeError("a declaration of options is a dataclass")

    def decorate(impl: Callable[[S, str, O], R]) -> Callable[Concatenate[S, str, P], R]:
        name = impl.__name__

        def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> O:
            try:
                return declaration(*args, **kwargs)
            except TypeError as exc:  # the dataclass's message names its __init__: name the verb
                raise TypeError(str(exc).replace(f"{declaration.__name__}.__init__()", f"{name}()")) from None

        if inspect.iscoroutinefunction(impl):
            async def call_async(self: S, query: str, *args: Any, **kwargs: Any) -> Any:
                return await impl(self, query, bind(args, kwargs))
            verb: Callable[..., Any] = call_async
        else:
            def call(self: S, query: str, *args: Any, **kwargs: Any) -> R:
                return impl(self, query, bind(args, kwargs))
            verb = call
        # Not functools.wraps: its __wrapped__ would lead inspect to the (self, query, options) behind.
        for attr in ("__module__", "__name__", "__qualname__"):
            setattr(verb, attr, getattr(impl, attr))
        first = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                 inspect.Parameter("query", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)]
        verb.__signature__ = signature_of(spec, first)  # type: ignore[attr-defined]
        own = inspect.cleandoc(impl.__doc__ or "")
        # The options join the verb's own :param list, if it ends with one, else start their own.
        joint = "\n" if own.split("\n\n")[-1].startswith(":param") else "\n\n"
        verb.__doc__ = f"{own}{joint}{option_docs(spec)}" if own else option_docs(spec)
        return typing.cast(Callable[Concatenate[S, str, P], R], verb)

    return decorate
