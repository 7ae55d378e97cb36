"""Plain record classes for the host's facts and findings, without ``dataclasses``.

The pre-training gate reads level 1 on every call that needs a GPU (``cli/fast.py``), so the
host's modules are imported on its fast path; ``dataclasses`` alone (with ``inspect``, which
it imports) costs about 6 ms there, more than the rest of the gate's own work. ``record`` is
the small part of ``@dataclass`` these classes use: fields in annotation order, defaults,
``new(factory)`` for a mutable default, ``__eq__``, ``__repr__``, ``frozen=True`` (hashable,
no assignment); ``fields(cls)`` and ``as_dict(obj)`` (recursive, as ``dataclasses.asdict``).
Annotations stay strings (``from __future__ import annotations``): nothing evaluates them.
"""
from __future__ import annotations

class new:  # noqa: N801  (reads as a default: ``gpus: list = new(list)``)
    """A default made afresh for each instance (``field(default_factory=...)``)."""

    __slots__ = ("factory",)

    def __init__(self, factory):
        self.factory = factory


def fields(cls) -> tuple:
    """The field names of a record class, in order."""
    return cls.__record_fields__


def as_dict(obj):
    """A record as a dict, records, lists, tuples and dicts inside it converted too (deep
    copies of anything else), as ``dataclasses.asdict``."""
    if hasattr(type(obj), "__record_fields__"):
        return {name: as_dict(getattr(obj, name)) for name in obj.__record_fields__}
    if isinstance(obj, (list, tuple)):
        return type(obj)(as_dict(v) for v in obj)
    if isinstance(obj, dict):
        return {as_dict(k): as_dict(v) for k, v in obj.items()}
    if obj is None or isinstance(obj, (str, int, float)):
        return obj
    import copy

    return copy.deepcopy(obj)


def record(cls=None, *, frozen: bool = False):
    """Class decorator: see the module docstring."""
    if cls is None:
        return lambda c: record(c, frozen=frozen)
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in klass.__dict__.get("__annotations__", {}):
            if name not in names:
                names.append(name)
    defaults = {}
    for klass in reversed(cls.__mro__):
        defaults.update({n: klass.__dict__[n] for n in names if n in klass.__dict__})
    for name, value in defaults.items():
        if isinstance(value, new) and name in cls.__dict__:
            delattr(cls, name)
    order = tuple(names)
    setter = object.__setattr__

    def __init__(self, *args, **kwargs):
        if len(args) > len(order):
            raise TypeError(f"{cls.__name__}() takes {len(order)} arguments, {len(args)} given")
        values = dict(zip(order, args))
        for key, value in kwargs.items():
            if key not in order or key in values:
                raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument {key!r}")
            values[key] = value
        for name in order:
            if name not in values:
                if name not in defaults:
                    raise TypeError(f"{cls.__name__}() missing argument {name!r}")
                default = defaults[name]
                values[name] = default.factory() if isinstance(default, new) else default
            setter(self, name, values[name])

    def __repr__(self):
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in order)
        return f"{cls.__name__}({inner})"

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in order)

    cls.__record_fields__ = order
    cls.__init__, cls.__repr__, cls.__eq__ = __init__, __repr__, __eq__
    if frozen:
        def __setattr__(self, name, value):
            raise AttributeError(f"{cls.__name__} is frozen: cannot assign {name!r}")

        def __hash__(self):
            return hash(tuple(getattr(self, n) for n in order))

        cls.__setattr__, cls.__delattr__, cls.__hash__ = __setattr__, __setattr__, __hash__
    else:
        cls.__hash__ = None
    return cls
