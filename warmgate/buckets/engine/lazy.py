"""`cached_property` without a lock shared by every instance.

Python 3.11's `functools.cached_property` computes under one lock per property, shared by all
instances of the class (removed in 3.12: python/cpython issue 87634). The operator plans in
several threads, and each plan computes its drafter sweep in such a property: under a burst of
distinct configurations the threads waited for each other's planning (a py-spy profile of 1,000
objects applied at once: 11% of the operator's samples in that lock, docs/benchmarks.md).
This one takes no lock; two threads that compute one instance's value at once both compute it
and the last one stored stays (the values are equal: the functions are pure).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class cached_property(Generic[T]):
    """A value computed at its first read and kept in the instance's ``__dict__``."""

    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        self.attrname = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.attrname = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_property[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | cached_property[T]:
        if instance is None:
            return self
        value = self.func(instance)
        instance.__dict__[self.attrname] = value  # found before this descriptor from now on
        return value


__all__ = ["cached_property"]
