"""User-defined classes: methods, super(), properties, class attributes, staticmethod/classmethod, dunders."""

from __future__ import annotations

from typing import Any

import torch

from ._registry import program, x, xy

F = "classes"


class Affine:
    """A plain user class holding Python floats."""

    def __init__(self, scale: float, shift: float) -> None:
        self.scale = scale
        self.shift = shift

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        return t * self.scale + self.shift

    def inverse(self, t: torch.Tensor) -> torch.Tensor:
        return (t - self.shift) / self.scale


class ScaledAffine(Affine):
    """Overrides __call__ and calls the parent through super()."""

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        return super().__call__(t) * 2


class ExplicitSuper(Affine):
    """Uses the two-argument super() form."""

    def __init__(self) -> None:
        super(ExplicitSuper, self).__init__(3.0, -1.0)  # noqa: UP008

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        return super(ExplicitSuper, self).__call__(t).relu()  # noqa: UP008


class Base:
    """Root of a three-level hierarchy."""

    def step(self, t: torch.Tensor) -> torch.Tensor:
        return t + 1


class Middle(Base):
    """Adds to the parent's step."""

    def step(self, t: torch.Tensor) -> torch.Tensor:
        return super().step(t) * 2


class Leaf(Middle):
    """Adds to the parent's step again."""

    def step(self, t: torch.Tensor) -> torch.Tensor:
        return super().step(t).sin()


class MixinA:
    """A cooperative mixin."""

    def tag(self, t: torch.Tensor) -> torch.Tensor:
        return t + 1


class MixinB(MixinA):
    """Another cooperative mixin."""

    def tag(self, t: torch.Tensor) -> torch.Tensor:
        return super().tag(t) * 3


class MixinC(MixinA):
    """A third mixin."""

    def tag(self, t: torch.Tensor) -> torch.Tensor:
        return super().tag(t) - 2


class Diamond(MixinB, MixinC):
    """Multiple inheritance following the MRO."""


class Temperature:
    """A class with a property, a setter, a classmethod and a staticmethod."""

    base = 10.0

    def __init__(self, value: float) -> None:
        self._value = value

    @property
    def value(self) -> float:
        return self._value * 2

    @value.setter
    def value(self, new: float) -> None:
        self._value = new

    @classmethod
    def default(cls) -> Temperature:
        return cls(cls.base)

    @staticmethod
    def clamp(t: torch.Tensor) -> torch.Tensor:
        return t.clamp(-1, 1)


class Vec:
    """Operator overloading on a user class wrapping a tensor."""

    def __init__(self, data: torch.Tensor) -> None:
        self.data = data

    def __add__(self, other: Vec) -> Vec:
        return Vec(self.data + other.data)

    def __mul__(self, k: float) -> Vec:
        return Vec(self.data * k)

    def __len__(self) -> int:
        return self.data.shape[0]

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.data[i]


class Registry:
    """A class attribute mutated through the instance's dict."""

    items: dict[str, float] = {"a": 1.0, "b": 2.0}

    def lookup(self, key: str) -> float:
        return self.items[key]


class Slotted:
    """A class with __slots__."""

    __slots__ = ("weight",)

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight


class Dynamic:
    """A class with __getattr__ fallback."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("k"):
            return float(name[1:])
        raise AttributeError(name)


@program(F, x(4))
def method_call(a: torch.Tensor) -> torch.Tensor:
    return Affine(2.0, 1.0).inverse(a)


@program(F, x(4))
def call_dunder(a: torch.Tensor) -> torch.Tensor:
    return Affine(0.5, -1.0)(a)


@program(F, x(4))
def super_zero_arg(a: torch.Tensor) -> torch.Tensor:
    return ScaledAffine(2.0, 3.0)(a)


@program(F, x(4))
def super_two_arg(a: torch.Tensor) -> torch.Tensor:
    return ExplicitSuper()(a)


@program(F, x(4))
def super_chain(a: torch.Tensor) -> torch.Tensor:
    return Leaf().step(a)


@program(F, x(4))
def super_diamond_mro(a: torch.Tensor) -> torch.Tensor:
    return Diamond().tag(a)


@program(F, x(4))
def property_getter(a: torch.Tensor) -> torch.Tensor:
    return a * Temperature(1.5).value


@program(F, x(4))
def property_setter(a: torch.Tensor) -> torch.Tensor:
    temp = Temperature(1.0)
    temp.value = 4.0
    return a + temp.value


@program(F, x(4))
def classmethod_constructor(a: torch.Tensor) -> torch.Tensor:
    return a * Temperature.default().value


@program(F, x(4))
def staticmethod_call(a: torch.Tensor) -> torch.Tensor:
    return Temperature.clamp(a * 3) + Temperature(2.0).clamp(a)


@program(F, xy((5,)))
def operator_overloads(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    v = (Vec(a) + Vec(b)) * 3.0
    return v.data + v[0] * len(v)


@program(F, x(4))
def class_attribute_read(a: torch.Tensor) -> torch.Tensor:
    r = Registry()
    return a * r.lookup("a") + r.lookup("b")


@program(F, x(4))
def slots_instance(a: torch.Tensor) -> torch.Tensor:
    s = Slotted(a.exp())
    return s.weight / s.weight.sum()


@program(F, x(4))
def getattr_fallback(a: torch.Tensor) -> torch.Tensor:
    return a * Dynamic().k3


@program(F, x(4))
def instance_created_and_mutated(a: torch.Tensor) -> torch.Tensor:
    aff = Affine(1.0, 0.0)
    aff.scale = 4.0
    aff.shift = aff.scale / 2
    return aff(a)


@program(F, x(3))
def class_defined_inside(a: torch.Tensor) -> torch.Tensor:
    class Local:
        def __init__(self, k: int) -> None:
            self.k = k

        def run(self, t: torch.Tensor) -> torch.Tensor:
            return t * self.k

    return Local(5).run(a)


@program(F, x(4))
def bound_method_as_value(a: torch.Tensor) -> torch.Tensor:
    fn = Affine(2.0, 0.5).inverse
    return fn(a) + fn(a * 2)


@program(F, x(4))
def unbound_method_call(a: torch.Tensor) -> torch.Tensor:
    aff = Affine(3.0, 1.0)
    return Affine.__call__(aff, a)


@program(F, x(4))
def list_of_instances(a: torch.Tensor) -> torch.Tensor:
    steps = [Affine(k, -k) for k in (1.0, 2.0, 3.0)]
    for step in steps:
        a = step(a)
    return a


class SlottedPair:
    """Two slots, a method and a property."""

    __slots__ = ("left", "right")

    def __init__(self, left: torch.Tensor, right: torch.Tensor) -> None:
        self.left = left
        self.right = right

    def combine(self) -> torch.Tensor:
        return self.left * self.right

    @property
    def total(self) -> torch.Tensor:
        return self.left + self.right


class SlottedBase:
    """A slotted base class."""

    __slots__ = ("scale",)

    def __init__(self, scale: float) -> None:
        self.scale = scale


class SlottedChild(SlottedBase):
    """A slotted subclass adding its own slot."""

    __slots__ = ("shift",)

    def __init__(self, scale: float, shift: float) -> None:
        super().__init__(scale)
        self.shift = shift

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t * self.scale + self.shift


@program(F, xy((4,)))
def slots_method_and_property(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    pair = SlottedPair(a, b.exp())
    return pair.combine() - pair.total


@program(F, x(4))
def slots_inherited(a: torch.Tensor) -> torch.Tensor:
    return SlottedChild(2.0, -1.0).apply(a)


@program(F, x(4))
def slots_reassigned(a: torch.Tensor) -> torch.Tensor:
    pair = SlottedPair(a, a)
    pair.right = a.sin()
    return pair.combine()


@program(F, x(4))
def slots_object_live_across_break(a: torch.Tensor) -> torch.Tensor:
    pair = SlottedPair(a.cos(), a.sin())
    if a.sum() > 0:
        return pair.combine()
    return pair.total


@program(F, x(4))
def slots_unset_attribute_caught(a: torch.Tensor) -> torch.Tensor:
    pair = SlottedPair.__new__(SlottedPair)
    pair.left = a
    try:
        return pair.right
    except AttributeError:
        return pair.left * 2
