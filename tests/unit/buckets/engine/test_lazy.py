"""The plans' cached properties: computed once per instance, and never one thread waiting for
another instance's computation (functools.cached_property's shared lock in Python 3.11)."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import threading

import warmgate.buckets
import warmgate.contract
import warmgate.reconcile
import warmgate.resources
from warmgate.buckets.engine.lazy import cached_property


class Slow:
    def __init__(self, started: threading.Event, other: threading.Event) -> None:
        self.started, self.other, self.calls = started, other, 0

    @cached_property
    def value(self) -> bool:
        """Waits until the other instance's computation has started too."""
        self.calls += 1
        self.started.set()
        return self.other.wait(5)


def test_two_instances_compute_at_once_and_each_value_is_kept() -> None:
    a_started, b_started = threading.Event(), threading.Event()
    a, b = Slow(a_started, b_started), Slow(b_started, a_started)
    results: dict[str, bool] = {}
    threads = [
        threading.Thread(target=lambda: results.update(a=a.value)),
        threading.Thread(target=lambda: results.update(b=b.value)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    # With a lock shared by the instances the second computation starts only after the first
    # one gave up waiting for it: False.
    assert results == {"a": True, "b": True}
    assert (a.value, a.calls) == (True, 1)  # kept in the instance, not computed again
    assert Slow.value.__doc__ == "Waits until the other instance's computation has started too."


def test_the_planning_results_classes_use_no_functools_cached_property() -> None:
    """Every class the planning stage builds (plans, proofs, drafter plan, runner specs) keeps
    its cached values without the shared lock: a planning thread must not wait for another
    object's (DrafterPlan.sweep_spec, read in `evaluate` since issue 33, used it)."""
    locked = []
    for package in (warmgate.buckets, warmgate.reconcile, warmgate.resources, warmgate.contract):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for name, klass in vars(module).items():
                if not inspect.isclass(klass) or klass.__module__ != info.name:
                    continue
                for attr, value in vars(klass).items():
                    if isinstance(value, functools.cached_property):
                        locked.append(f"{info.name}.{name}.{attr}")
    assert locked == []
