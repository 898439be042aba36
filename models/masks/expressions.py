"""Mask expressions such as `torch.tril(torch.ones(seq, seq))`, evaluated without eval(): an AST whitelist.

The expression is parsed with `ast.parse(mode="eval")` and walked by our own interpreter. Allowed:

- numbers, True/False/None, `...`, list/tuple literals of numbers, `float('-inf')`, `int(...)`, `bool(...)`;
- the names `seq` (also `seq_len`), `batch`, `heads`, `attention_mask` (the tokenizer's (batch, seq) 0/1
  mask), `inf`, and the namespaces `torch`, `np`/`numpy`, `math` — of which only the functions in _FUNCTIONS,
  the dtypes in _DTYPES and `inf`/`pi` can be reached;
- + - * / // % & | ^ ~ and unary -, comparisons (not chained), indexing with ints, slices, None and `...`;
- tensor methods in _METHODS (`.bool()`, `.int()`, `.float()`, `.unsqueeze(0)`, `.view(...)`, `.masked_fill(...)`
  …) and the attributes `.T`, `.mT`, `.shape`, `.ndim`, `.dtype`; `torch.finfo(dtype).min`.

Everything else is refused with a MaskError that names it: attributes starting with `_`, lambdas, comprehensions,
f-strings, `and`/`or`, `if`-expressions, walrus, `**`, `@`, calls to anything not on the list. Every tensor that
could grow (constructors, broadcasting binary ops, expand/repeat) is sized before it is built and capped at
masks.MAX_ELEMENTS cells, so nobody builds a 10^12-cell tensor.
"""

from __future__ import annotations

import ast
import contextvars
import math
import operator
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .. import settings
from ..errors import BudgetError, MaskError
from .conventions import MAX_ELEMENTS
from .predicates import Predicate

MAX_CHARS = 1000
MAX_NODES = 400
MAX_LITERAL = 1 << 16  # numbers in list literals

_DTYPES: dict[str, torch.dtype] = {
    "bool": torch.bool,
    "bool_": torch.bool,
    "float": torch.float32,
    "float32": torch.float32,
    "float16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "double": torch.float64,
    "int": torch.int32,
    "int32": torch.int32,
    "int64": torch.int64,
    "long": torch.int64,
    "int8": torch.int8,
    "int16": torch.int16,
    "uint8": torch.uint8,
}
_BUILTIN_DTYPES = {"float": torch.float64, "int": torch.int64, "bool": torch.bool}  # dtype=float means float64


@dataclass(frozen=True)
class _Namespace:
    name: str


@dataclass(frozen=True)
class _Fn:
    name: str
    impl: Callable[..., Any]


@dataclass(frozen=True)
class _Method:
    tensor: torch.Tensor
    name: str


@dataclass(frozen=True)
class _FInfo:
    min: float
    max: float
    eps: float
    tiny: float


def _first_line(err: BaseException) -> str:
    lines = str(err).splitlines()
    return (lines[0] if lines else type(err).__name__)[:200]


def _refuse(what: str) -> MaskError:
    return MaskError(f"not allowed in a mask expression: {what}")


def _check_numel(shape: tuple[int, ...] | torch.Size, what: str) -> None:
    n = 1
    for d in shape:
        if not isinstance(d, int) or isinstance(d, bool):
            raise MaskError(f"{what}: sizes must be whole numbers, got {d!r}")
        if d < 0:
            raise MaskError(f"{what}: negative size {d}")
        n *= d
    if n > MAX_ELEMENTS:
        raise MaskError(f"{what} would have {n:,} cells; a mask may have at most {MAX_ELEMENTS:,}")
    meter = _METER.get()
    if meter is not None:
        meter.reserve(n * 8, what)  # sized as the widest dtype (int64/float64): before it is built


class _Meter:
    """Live bytes and elapsed time of one expression: every tensor it makes is counted until it is freed.

    Bytes are counted per storage (views share one), through weakref finalizers, so the budget is what is alive at
    once, not per tensor: a tuple of 43 large tensors is stopped, a long chain of temporaries is not.
    """

    def __init__(self, cap_bytes: int, cap_seconds: float):
        self.cap_bytes, self.cap_seconds = cap_bytes, cap_seconds
        self.live = 0
        self.peak = 0
        self.storages: dict[int, list[int]] = {}  # data_ptr → [nbytes, tensors alive on it]
        self.start = time.perf_counter()

    def reserve(self, nbytes: int, what: str) -> None:
        """Refuse to build `nbytes` more when that would put the live total over the budget."""
        if self.live + nbytes > self.cap_bytes:
            raise BudgetError(
                settings.over_budget(
                    "expr_mb",
                    math.ceil((self.live + nbytes) / 2**20),
                    f"the mask expression ({what}, with {self.live / 2**20:,.0f} MB already alive)",
                )
            )

    def tick(self) -> None:
        elapsed = time.perf_counter() - self.start
        if elapsed > self.cap_seconds:
            raise BudgetError(settings.over_budget("expr_seconds", round(elapsed, 2), "the mask expression"))

    def track(self, x: Any) -> None:
        if isinstance(x, tuple | list):
            for v in x:
                self.track(v)
            return
        if not isinstance(x, torch.Tensor):
            return
        storage = x.untyped_storage()
        ptr, nbytes = storage.data_ptr(), storage.nbytes()
        entry = self.storages.get(ptr)
        if entry is None:
            entry = self.storages[ptr] = [nbytes, 0]
            self.live += nbytes
            self.peak = max(self.peak, self.live)
        entry[1] += 1
        weakref.finalize(x, self._release, ptr)
        if self.live > self.cap_bytes:  # an op that grew a tensor without a size guard (e.g. .double())
            self.reserve(0, "a tensor it made")

    def _release(self, ptr: int) -> None:
        entry = self.storages.get(ptr)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            self.live -= entry[0]
            del self.storages[ptr]


_METER: contextvars.ContextVar[_Meter | None] = contextvars.ContextVar("mask_expression_meter", default=None)


def _shape_args(args: tuple[Any, ...], what: str) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], tuple | list | torch.Size):
        args = tuple(args[0])
    shape = tuple(args)
    _check_numel(shape, what)
    return shape


def _dtype(d: Any) -> torch.dtype | None:
    if d is None or isinstance(d, torch.dtype):
        return d
    raise MaskError(f"dtype must be a dtype such as torch.bool or np.float32, got {d!r}")


def _tensor(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, bool | int | float):
        return torch.tensor(x)
    raise MaskError(f"expected a tensor, got {type(x).__name__}")


def _broadcast_guard(*xs: Any, what: str) -> None:
    shapes = [tuple(x.shape) for x in xs if isinstance(x, torch.Tensor)]
    if len(shapes) > 1:
        out = _broadcast_shape(shapes)
        if out is None:
            raise MaskError(f"{what}: shapes {' and '.join(map(str, shapes))} do not broadcast")
        _check_numel(out, what)


def _broadcast_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """Return the shape these broadcast to, or None when they do not (torch.broadcast_shapes' first call imports
    for seconds, which the expression's time budget would count)."""
    n = max(len(s) for s in shapes)
    out = []
    for axis in range(n):
        sizes = {s[len(s) - n + axis] for s in shapes if len(s) - n + axis >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


# ---- functions (torch and numpy spellings map to the same implementations) ---------------------------


def _ones(*shape: Any, dtype: Any = None) -> torch.Tensor:
    return torch.ones(_shape_args(shape, "ones"), dtype=_dtype(dtype))


def _zeros(*shape: Any, dtype: Any = None) -> torch.Tensor:
    return torch.zeros(_shape_args(shape, "zeros"), dtype=_dtype(dtype))


def _full(shape: Any, fill_value: Any, dtype: Any = None) -> torch.Tensor:
    shape = _shape_args((shape,) if isinstance(shape, int) else tuple(shape), "full")
    return torch.full(shape, fill_value, dtype=_dtype(dtype))


def _eye(n: int, m: int | None = None, k: int = 0, dtype: Any = None) -> torch.Tensor:
    m = n if m is None else m
    _check_numel((n, m), "eye")
    i, j = torch.arange(n)[:, None], torch.arange(m)[None, :]
    return (j - i == k).to(_dtype(dtype) or torch.float32)  # numpy's k: the diagonal k places to the right


def _arange(*args: Any, dtype: Any = None) -> torch.Tensor:
    if not 1 <= len(args) <= 3:
        raise MaskError("arange takes (end), (start, end) or (start, end, step)")
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    if step == 0:
        raise MaskError("arange: step must not be 0")
    n = max(0, math.ceil((end - start) / step))
    _check_numel((n,), "arange")
    return torch.arange(start, end, step, dtype=_dtype(dtype))


def _tri(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def impl(x: Any, diagonal: int = 0, k: int | None = None) -> torch.Tensor:
        t = _tensor(x)
        if t.dim() < 2:
            raise MaskError(f"{fn.__name__} needs a matrix (2 axes or more), got shape {tuple(t.shape)}")
        return fn(t, diagonal=diagonal if k is None else k)

    return impl


def _like(fill: float) -> Callable[..., torch.Tensor]:
    def impl(x: Any, dtype: Any = None) -> torch.Tensor:
        return torch.full_like(_tensor(x), fill, dtype=_dtype(dtype))

    return impl


def _full_like(x: Any, fill_value: Any, dtype: Any = None) -> torch.Tensor:
    return torch.full_like(_tensor(x), fill_value, dtype=_dtype(dtype))


def _where(cond: Any, a: Any, b: Any) -> torch.Tensor:
    _broadcast_guard(cond, a, b, what="where")
    c = _tensor(cond)
    return torch.where(
        c.bool() if c.dtype != torch.bool else c,
        a if isinstance(a, torch.Tensor) else torch.tensor(a),
        b if isinstance(b, torch.Tensor) else torch.tensor(b),
    )


def _binary(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], name: str) -> Callable[..., torch.Tensor]:
    def impl(a: Any, b: Any) -> torch.Tensor:
        _broadcast_guard(a, b, what=name)
        return fn(_tensor(a), _tensor(b))

    return impl


def _literal(data: Any, dtype: Any = None) -> torch.Tensor:
    count = [0]

    def walk(x: Any) -> Any:
        if isinstance(x, list | tuple):
            return [walk(v) for v in x]
        if isinstance(x, bool | int | float):
            count[0] += 1
            if count[0] > MAX_LITERAL:
                raise MaskError(f"a list literal may hold at most {MAX_LITERAL} numbers")
            return x
        if isinstance(x, torch.Tensor):
            return x.tolist() if x.numel() <= MAX_LITERAL else walk([None])
        raise MaskError(f"tensor(...) takes numbers and nested lists, got {type(x).__name__}")

    try:
        return torch.tensor(walk(data), dtype=_dtype(dtype))
    except (ValueError, TypeError) as err:
        raise MaskError(f"tensor(...): {err}") from None


def _finfo(dtype: Any = None) -> _FInfo:
    f = torch.finfo(_dtype(dtype) or torch.float32)
    return _FInfo(min=f.min, max=f.max, eps=f.eps, tiny=f.tiny)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "tril": _tri(torch.tril),
    "triu": _tri(torch.triu),
    "ones": _ones,
    "zeros": _zeros,
    "full": _full,
    "eye": _eye,
    "arange": _arange,
    "ones_like": _like(1),
    "zeros_like": _like(0),
    "full_like": _full_like,
    "where": _where,
    "logical_and": _binary(torch.logical_and, "logical_and"),
    "logical_or": _binary(torch.logical_or, "logical_or"),
    "logical_xor": _binary(torch.logical_xor, "logical_xor"),
    "logical_not": lambda x: torch.logical_not(_tensor(x)),
    "minimum": _binary(torch.minimum, "minimum"),
    "maximum": _binary(torch.maximum, "maximum"),
    "abs": lambda x: torch.abs(_tensor(x)),
    "tensor": _literal,
    "as_tensor": _literal,
    "array": _literal,
    "asarray": _literal,
    "finfo": _finfo,
}
_CONSTANTS = {"inf": math.inf, "pi": math.pi}


def _float(x: Any = 0.0) -> float:
    if isinstance(x, str):
        s = x.strip().lower()
        if s in ("inf", "+inf", "infinity", "+infinity", "-inf", "-infinity", "nan"):
            return float(s)
        raise _refuse(f"float({x!r}); only float('-inf'), float('inf') and numbers")
    if isinstance(x, bool | int | float):
        return float(x)
    if isinstance(x, torch.Tensor) and x.numel() == 1:
        return float(x)
    raise MaskError(f"float() takes a number, got {type(x).__name__}")


def _int(x: Any = 0) -> int:
    if isinstance(x, bool | int | float) or (isinstance(x, torch.Tensor) and x.numel() == 1):
        return int(x)
    raise MaskError(f"int() takes a number, got {type(x).__name__}")


_BUILTINS: dict[str, Callable[..., Any]] = {"float": _float, "int": _int, "bool": lambda x=False: bool(_tensor(x))}


# ---- tensor methods ----------------------------------------------------------------------------------


def _sizes(args: tuple[Any, ...]) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], tuple | list | torch.Size):
        args = tuple(args[0])
    for a in args:
        if not isinstance(a, int) or isinstance(a, bool):
            raise MaskError(f"sizes and axes must be whole numbers, got {a!r}")
    return tuple(args)


def _m_expand(t: torch.Tensor, *sizes: Any) -> torch.Tensor:
    s = _sizes(sizes)
    final = tuple(t.shape[i - (len(s) - t.dim())] if n == -1 else n for i, n in enumerate(s))
    _check_numel(final, "expand")
    return t.expand(*s)


def _m_repeat(t: torch.Tensor, *sizes: Any) -> torch.Tensor:
    s = _sizes(sizes)
    shape = (1,) * (len(s) - t.dim()) + tuple(t.shape)
    _check_numel(tuple(a * b for a, b in zip(shape, s, strict=False)), "repeat")
    return t.repeat(*s)


def _m_masked_fill(t: torch.Tensor, mask: Any, value: Any) -> torch.Tensor:
    _broadcast_guard(t, mask, what="masked_fill")
    m = _tensor(mask)
    return t.masked_fill(m if m.dtype == torch.bool else m.bool(), value)


def _m_to(t: torch.Tensor, dtype: Any) -> torch.Tensor:
    return t.to(_dtype(dtype))


_METHODS: dict[str, Callable[..., Any]] = {
    "bool": lambda t: t.bool(),
    "int": lambda t: t.int(),
    "long": lambda t: t.long(),
    "float": lambda t: t.float(),
    "double": lambda t: t.double(),
    "half": lambda t: t.half(),
    "to": _m_to,
    "type": _m_to,
    "astype": _m_to,
    "unsqueeze": lambda t, dim: t.unsqueeze(*_sizes((dim,))),
    "squeeze": lambda t, *dim: t.squeeze(*_sizes(dim)) if dim else t.squeeze(),
    "view": lambda t, *s: t.view(*_sizes(s)),
    "reshape": lambda t, *s: t.reshape(*_sizes(s)),
    "transpose": lambda t, a, b: t.transpose(*_sizes((a, b))),
    "t": lambda t: t.t(),
    "permute": lambda t, *d: t.permute(*_sizes(d)),
    "flip": lambda t, *d: t.flip(*_sizes(d)),
    "logical_not": lambda t: t.logical_not(),
    "abs": lambda t: t.abs(),
    "tril": _tri(torch.tril),
    "triu": _tri(torch.triu),
    "masked_fill": _m_masked_fill,
    "expand": _m_expand,
    "repeat": _m_repeat,
    "eq": _binary(torch.eq, "eq"),
    "ne": _binary(torch.ne, "ne"),
    "lt": _binary(torch.lt, "lt"),
    "le": _binary(torch.le, "le"),
    "gt": _binary(torch.gt, "gt"),
    "ge": _binary(torch.ge, "ge"),
    "logical_and": _binary(torch.logical_and, "logical_and"),
    "logical_or": _binary(torch.logical_or, "logical_or"),
}
_ATTRIBUTES = {"T", "mT", "shape", "ndim", "dtype"}

_BINOPS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.BitAnd: ("&", operator.and_),
    ast.BitOr: ("|", operator.or_),
    ast.BitXor: ("^", operator.xor),
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_REFUSED_NAMES = {
    ast.Lambda: "lambda",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.JoinedStr: "f-strings",
    ast.BoolOp: "'and' / 'or' (use & and | on masks)",
    ast.IfExp: "'if … else'",
    ast.NamedExpr: "':='",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Starred: "'*' unpacking",
    ast.Dict: "dicts",
    ast.Set: "sets",
}


def _builtin_dtype(x: Any) -> Any:
    """Return torch's dtype for the builtins float/int/bool used as dtypes (dtype=bool, .astype(float))."""
    for name, fn in _BUILTINS.items():
        if x is fn:
            return _BUILTIN_DTYPES[name]
    return x


class _Interpreter:
    def __init__(self, names: dict[str, Any], meter: _Meter):
        self.names = names
        self.meter = meter

    def run(self, node: ast.AST) -> Any:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise _refuse(_REFUSED_NAMES.get(type(node), type(node).__name__))
        self.meter.tick()
        value = method(node)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**62:
            raise MaskError("a number in the mask expression grew too large (over 2**62)")
        self.meter.track(value)
        return value

    def _Expression(self, node: ast.Expression) -> Any:
        return self.run(node.body)

    def _Constant(self, node: ast.Constant) -> Any:
        if node.value is None or node.value is Ellipsis or isinstance(node.value, bool | int | float):
            if isinstance(node.value, int) and not isinstance(node.value, bool) and abs(node.value) > 2**62:
                raise MaskError(f"number {node.value} is too large")
            return node.value
        if isinstance(node.value, str):
            return node.value  # only float('-inf') accepts a string; anything else refuses it
        raise _refuse(f"the constant {node.value!r}")

    def _Name(self, node: ast.Name) -> Any:
        if node.id in self.names:
            return self.names[node.id]
        raise _refuse(f"the name {node.id!r} (use seq, batch, heads, attention_mask, torch, np, inf)")

    def _Attribute(self, node: ast.Attribute) -> Any:
        if node.attr.startswith("_"):
            raise _refuse(f"the attribute {node.attr!r}")
        base = self.run(node.value)
        if isinstance(base, _Namespace):
            if node.attr in _FUNCTIONS and base.name != "math":
                return _Fn(f"{base.name}.{node.attr}", _FUNCTIONS[node.attr])
            if node.attr in _DTYPES and base.name != "math":
                return _DTYPES[node.attr]
            if node.attr in _CONSTANTS:
                return _CONSTANTS[node.attr]
            raise _refuse(f"{base.name}.{node.attr}")
        if isinstance(base, _FInfo) and node.attr in ("min", "max", "eps", "tiny"):
            return getattr(base, node.attr)
        if isinstance(base, torch.Tensor):
            if node.attr in _METHODS:
                return _Method(base, node.attr)
            if node.attr in _ATTRIBUTES:
                value = getattr(base, node.attr)
                return tuple(value) if node.attr == "shape" else value
        raise _refuse(f"the attribute .{node.attr} of {type(base).__name__}")

    def _Call(self, node: ast.Call) -> Any:
        fn = self.run(node.func)
        args = [self.run(a) for a in node.args]
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise _refuse("'**' unpacking")
            kwargs[kw.arg] = self.run(kw.value)
        if "dtype" in kwargs:
            kwargs["dtype"] = _builtin_dtype(kwargs["dtype"])
        if isinstance(fn, _Method) and fn.name in ("to", "type", "astype"):
            args = [_builtin_dtype(a) for a in args]
        if isinstance(fn, _Fn):
            name, impl = fn.name, fn.impl
        elif isinstance(fn, _Method):
            name, impl = f".{fn.name}()", lambda *a, **k: _METHODS[fn.name](fn.tensor, *a, **k)
        elif callable(fn) and fn in _BUILTINS.values():
            name, impl = next(k for k, v in _BUILTINS.items() if v is fn) + "()", fn
        else:
            raise _refuse(f"calling {type(fn).__name__}")
        for a in (*args, *kwargs.values()):
            if isinstance(a, str) and impl is not _float:
                raise _refuse(f"the string {a!r}")
        try:
            return impl(*args, **kwargs)
        except MaskError:
            raise
        except (TypeError, ValueError, RuntimeError, IndexError, ArithmeticError) as err:
            raise MaskError(f"{name}: {_first_line(err)}") from None

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.run(node.operand)
        if not isinstance(v, torch.Tensor | bool | int | float):
            raise MaskError(f"a unary operator needs a tensor or a number, got {type(v).__name__}")
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return +v
        if isinstance(node.op, ast.Invert):
            if isinstance(v, torch.Tensor | int) and not isinstance(v, float):
                return ~v
            raise MaskError(f"~ needs a tensor or an int, got {type(v).__name__}")
        raise _refuse("'not' (use ~ on masks)")

    def _BinOp(self, node: ast.BinOp) -> Any:
        if type(node.op) not in _BINOPS:
            raise _refuse(
                {ast.Pow: "'**'", ast.MatMult: "'@'", ast.LShift: "'<<'", ast.RShift: "'>>'"}.get(
                    type(node.op), "this operator"
                )
            )
        sym, fn = _BINOPS[type(node.op)]
        a, b = self.run(node.left), self.run(node.right)
        return self._apply(sym, fn, a, b)

    def _apply(self, sym: str, fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
        for v in (a, b):
            if not isinstance(v, torch.Tensor | bool | int | float):
                raise MaskError(f"'{sym}' works on tensors and numbers, got {type(v).__name__}")
        _broadcast_guard(a, b, what=f"'{sym}'")
        try:
            return fn(a, b)
        except (TypeError, ValueError, RuntimeError, ArithmeticError) as err:
            raise MaskError(f"'{sym}': {_first_line(err)}") from None

    def _Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise _refuse("chained comparisons such as a < b < c (compare twice and combine with &)")
        op = type(node.ops[0])
        if op not in _COMPARE:
            raise _refuse("'is' / 'in' comparisons")
        a, b = self.run(node.left), self.run(node.comparators[0])
        return self._apply(type(node.ops[0]).__name__, _COMPARE[op], a, b)

    def _Subscript(self, node: ast.Subscript) -> Any:
        base = self.run(node.value)
        index = self.run(node.slice)
        parts = index if isinstance(index, tuple) else (index,)
        for p in parts:
            if not (
                p is None or p is Ellipsis or isinstance(p, slice) or (isinstance(p, int) and not isinstance(p, bool))
            ):
                raise _refuse(f"indexing with {type(p).__name__} (use ints, slices, None and ...)")
        if not isinstance(base, torch.Tensor | tuple):
            raise MaskError(f"cannot index a {type(base).__name__}")
        try:
            return base[index]
        except (IndexError, TypeError, RuntimeError, ValueError, ArithmeticError) as err:
            raise MaskError(f"indexing: {_first_line(err)}") from None

    def _Slice(self, node: ast.Slice) -> slice:
        parts = [None if p is None else self.run(p) for p in (node.lower, node.upper, node.step)]
        for p in parts:
            if p is not None and (not isinstance(p, int) or isinstance(p, bool)):
                raise MaskError(f"slice bounds must be whole numbers, got {p!r}")
        return slice(*parts)

    def _Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.run(e) for e in node.elts)

    def _List(self, node: ast.List) -> list:
        return [self.run(e) for e in node.elts]


def _parse(expr: str) -> ast.Expression:
    """Return the checked syntax tree of a mask expression, refusing what is not on the whitelist before running it."""
    if not isinstance(expr, str) or not expr.strip():
        raise MaskError("the mask expression is empty")
    if len(expr) > MAX_CHARS:
        raise MaskError(f"a mask expression may be at most {MAX_CHARS} characters; this one has {len(expr)}")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as err:
        raise MaskError(
            f"not a Python expression: {err.msg} (a mask expression is one expression, no statements)"
        ) from None
    except (RecursionError, MemoryError, ValueError):
        raise MaskError("the mask expression is nested too deeply") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise MaskError(f"the mask expression is too long ({len(nodes)} syntax nodes; at most {MAX_NODES})")
    for node in nodes:  # refuse before evaluating anything
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise _refuse(f"the attribute {node.attr!r}")
        if type(node) in _REFUSED_NAMES or isinstance(node, ast.Pow | ast.MatMult):
            raise _refuse(_REFUSED_NAMES.get(type(node), "'**'" if isinstance(node, ast.Pow) else "'@'"))
    return tree


_COMMON_NAMES: dict[str, Any] = {
    "torch": _Namespace("torch"),
    "np": _Namespace("np"),
    "numpy": _Namespace("np"),
    "math": _Namespace("math"),
    "inf": math.inf,
    **_BUILTINS,
}


def _run(tree: ast.Expression, names: dict[str, Any]) -> Any:
    """Return what the checked tree gives with these names, within the expression's memory and time budgets."""
    cfg = settings.current()
    meter = _Meter(cfg.expr_bytes, cfg.expr_seconds)
    token = _METER.set(meter)
    try:
        out = _Interpreter({**_COMMON_NAMES, **names}, meter).run(tree)
    except RecursionError:
        raise MaskError("the mask expression is nested too deeply") from None
    except MemoryError:
        raise BudgetError("the mask expression ran out of memory; ATTENTION_LENS_EXPR_MB bounds it") from None
    except (ArithmeticError, ValueError, TypeError, RuntimeError, IndexError) as err:
        raise MaskError(f"the mask expression failed: {type(err).__name__}: {_first_line(err)}") from None
    finally:
        _METER.reset(token)
    if isinstance(out, np.ndarray):
        out = torch.from_numpy(out)
    return out


def evaluate(
    expr: str, seq: int, batch: int = 1, heads: int = 1, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Return the tensor a mask expression gives (any dtype; the declared convention reads it later).

    seq: tokens of the (padded) input; batch: sentences; heads: the model's heads;
    attention_mask: (batch, seq) int64, 1 = real token, as the tokenizer gives it (all ones when None).
    Raises MaskError for anything not on the whitelist, for oversized tensors and for results that are not tensors.
    """
    tree = _parse(expr)
    if attention_mask is None:
        attention_mask = torch.ones(batch, seq, dtype=torch.int64)
    names: dict[str, Any] = {
        "seq": int(seq),
        "seq_len": int(seq),
        "batch": int(batch),
        "heads": int(heads),
        "attention_mask": attention_mask.detach().cpu().long(),
    }
    out = _run(tree, names)
    if not isinstance(out, torch.Tensor):
        raise MaskError(f"the expression gives {out!r} ({type(out).__name__}), not a mask tensor")
    if out.numel() > MAX_ELEMENTS:
        raise MaskError(f"the expression gives {out.numel():,} cells; a mask may have at most {MAX_ELEMENTS:,}")
    return out


# ---- predicate expressions ---------------------------------------------------------------------------

PREDICATE_NAMES = ("q_idx", "kv_idx", "b", "h")  # FlexAttention's mask_mod(b, h, q_idx, kv_idx)


def is_predicate_expression(expr: object) -> bool:
    """Return True when expr is an expression over q_idx / kv_idx (a predicate), e.g. `kv_idx <= q_idx`."""
    if not isinstance(expr, str) or len(expr) > MAX_CHARS or not expr.strip():
        return False
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return False
    return any(isinstance(n, ast.Name) and n.id in ("q_idx", "kv_idx") for n in ast.walk(tree))


def predicate_expression(expr: str) -> Predicate:
    """Return the mask predicate an expression over q_idx, kv_idx, b and h states, e.g.
    `(kv_idx <= q_idx) & (q_idx - kv_idx < 4)` (a sliding-window causal mask of 4 positions).

    Checked once here, run by the same interpreter as `evaluate` (never eval()) each time the predicate is made
    into a tensor (models.masks.predicates.materialise: the whole square, a block of rows or a window). `seq`,
    `batch` and `attention_mask` do not exist in a predicate: it says what one cell is, at any length.
    """
    tree = _parse(expr)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in ("seq", "seq_len", "batch", "heads", "attention_mask"):
            raise MaskError(
                f"a predicate expression is over q_idx, kv_idx, b and h only; {node.id} belongs to a tensor expression"
            )

    def fn(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        out = _run(tree, {"q_idx": q_idx, "kv_idx": kv_idx, "b": b, "h": h})
        if isinstance(out, bool):
            return torch.tensor(out)
        if not isinstance(out, torch.Tensor):
            raise MaskError(f"the predicate gives {type(out).__name__}, not True/False per cell")
        return out

    return Predicate(fn, " ".join(expr.split()))
