"""Time as a parameter.

Every call that reads the clock takes ``now=`` or ``timestamp=``. Inside vxmem a moment
is a float: seconds since the Unix epoch, UTC. This module converts what callers pass,
by one rule everywhere (the verbs, the replay, the datasets, the dashboard): epoch seconds
(any real number), an aware ``datetime`` or ISO-8601 string in its own zone, and a naive one
read as UTC, so a replay means the same thing on every machine. Years 1 to 9999; anything
else is refused with an error naming the argument.
"""

from __future__ import annotations

import math
import numbers
import time
from datetime import UTC, date, datetime

import numpy as np

DAY = 86400.0
_EPOCH_MIN = datetime.min.replace(tzinfo=UTC).timestamp()
_EPOCH_MAX = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()

TimeLike = float | int | datetime | str | None


def expiry(ts: float, ttl_days: float | None) -> float | None:
    """When a memory stored at ``ts`` with ``ttl_days`` to live expires; None for never: no
    TTL, or an expiry past the last time the clock can read (the end of year 9999), which no
    ``now`` could ever reach."""
    if ttl_days is None:
        return None
    end = ts + ttl_days * DAY
    return end if end <= _EPOCH_MAX else None


def to_epoch(value: TimeLike, name: str = "now") -> float:
    """Seconds since the epoch for ``value``; ``None`` means the wall clock.

    Accepts an epoch number, a ``datetime`` (naive ones are read as UTC, so a replay
    means the same thing on every machine) or an ISO-8601 string.
    """
    if value is None:
        return time.time()
    if value.__class__ is float or value.__class__ is int:  # the common case, on every write and recall
        out = float(value)
        if math.isfinite(out) and _EPOCH_MIN <= out <= _EPOCH_MAX:
            return out
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a datetime, an ISO-8601 string or epoch seconds, not bool")
    if isinstance(value, np.datetime64):  # numpy's and pandas' times: naive, so UTC
        if np.isnat(value):
            raise ValueError(f"{name} must be a time, got NaT")
        out = float(value.astype("datetime64[us]").astype(np.int64)) / 1e6
    elif isinstance(value, numbers.Real):  # numpy's numbers too
        out = float(value)
    elif isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        try:
            out = value.timestamp()
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError(f"{name} is out of range: {value!r}") from exc
    elif isinstance(value, date):
        out = datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp()
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError as exc:
            raise ValueError(f"{name} is not an ISO-8601 time: {value!r}") from exc
        return to_epoch(parsed, name)
    else:
        raise TypeError(
            f"{name} must be a datetime, an ISO-8601 string or epoch seconds, not {type(value).__name__}"
        )
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if not _EPOCH_MIN <= out <= _EPOCH_MAX:  # history() and consolidate() turn it back into a datetime
        raise ValueError(f"{name} is out of range (years 1 to 9999): {value!r}")
    return out


def to_datetime(epoch: float) -> datetime:
    """An aware UTC datetime for epoch seconds."""
    return datetime.fromtimestamp(epoch, tz=UTC)


def days_to_seconds(days: float | datetime | None, now: float, name: str = "older_than") -> float | None:
    """A cut-off moment: ``days`` before ``now``, or the moment a datetime names."""
    if days is None:
        return None
    if isinstance(days, (datetime, str)):
        return to_epoch(days, name)
    if isinstance(days, bool) or not isinstance(days, (int, float)):
        raise TypeError(f"{name} must be a number of days or a datetime, not {type(days).__name__}")
    if not math.isfinite(days) or days < 0:
        raise ValueError(f"{name} must be a non-negative number of days, got {days!r}")
    return now - float(days) * DAY
