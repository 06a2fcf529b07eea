"""Widget values that survive a visit to another page.

Streamlit drops the state of a widget that a page does not draw, so a slider set on A/B is back
at its default after a look at Tune. A value meant to outlive its page is therefore kept in the
session beside its widget (as the Playground's ``pg_kept`` and the dataset choice's
``dataset_kept`` are) and primes the widget when the page draws it again: :func:`widget` draws
one, :func:`forget` starts one afresh, :func:`value` reads one before its widget is drawn.
The uploaded dataset is kept the same way (:mod:`app_pages.uploads`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

STORE = "widgets_kept"  # widget key -> its last value


def _store() -> dict[str, Any]:
    return st.session_state.setdefault(STORE, {})


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _usable(value: Any, default: Any, options: Any, lo: Any, hi: Any) -> bool:
    """Whether a kept ``value`` still fits its widget: the default's type, one of the options,
    within the bounds (a wrong one starts the widget at its default)."""
    if type(value) is not type(default) and not (_number(value) and _number(default)):
        return False
    parts = list(value) if isinstance(value, (list, tuple)) else [value]
    if options is not None:
        return all(p in list(options) for p in parts)
    if lo is None and hi is None:
        return True
    return all(_number(p) and (lo is None or lo <= p) and (hi is None or p <= hi) for p in parts)


def widget(draw: Callable[..., Any], label: str, *, key: str, default: Any, **kwargs: Any) -> Any:
    """``draw(label, key=key, **kwargs)`` (``st.slider``, a column's ``selectbox``...) with a
    value that survives a visit to another page: the widget starts at the value it had when
    the page was last drawn, else at ``default``; returns its value. Pass what the widget
    checks a value against (``options``, ``min_value``, ``max_value``) by keyword."""
    store = _store()
    if key not in st.session_state:
        value = store.get(key, default)
        accepts_new = kwargs.get("accept_new_options", False)
        options = None if accepts_new else kwargs.get("options")
        if not _usable(value, default, options, kwargs.get("min_value"), kwargs.get("max_value")):
            value = default
        st.session_state[key] = list(value) if isinstance(value, list) else value
    value = draw(label, key=key, **kwargs)
    store[key] = list(value) if isinstance(value, list) else value
    return value


def value(key: str, default: Any) -> Any:
    """The value of kept widget ``key`` before the page draws it (its default if it has none)."""
    if key in st.session_state:
        return st.session_state[key]
    return _store().get(key, default)


def forget(*keys: str) -> None:
    """Start the widgets ``keys`` afresh: their state and their kept values go."""
    store = _store()
    for key in keys:
        st.session_state.pop(key, None)
        store.pop(key, None)

