"""Calculator and unit-conversion MCP server (stdio), an example backend on the `mcp` SDK.

    python examples/servers/calculator.py            # speaks MCP over stdin/stdout

Both tools take the question as it is ("what is 12 times 7?", "convert 5 km to miles") and find
the arithmetic or the quantity in it, so the router can pass a question straight through. They
are `async` although they never wait: the SDK runs a plain function in a worker thread, a thread
hop per call for work that takes microseconds.
"""

from __future__ import annotations

import ast
import math
import operator
import re

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

# Both tools only compute: safe for the router to call twice (hedged, parallel) or answer from its cache.
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True)

server = MCPServer(
    "calculator",
    instructions="Arithmetic and unit conversion: evaluates math expressions and converts quantities between "
                 "units of length, mass, volume, temperature, speed, time and digital storage.",
)

_N = r"(-?\d+(?:\.\d+)?)"
_OF = r"\s+(?:(?:the|two|numbers?)\s+)*"  # "add the two numbers 3 and 4"
_WORDS = [
    (r"(\d),(\d{3})", r"\1\2"),
    # "add 2, 3 and 4", "the sum of 3 and 4 and 5": a list of operands is their sum.
    (rf"\b(?:add|sum(?: of)?|total of){_OF}{_N}((?:(?:\s*,|\s+and)\s*-?\d+(?:\.\d+)?)+),?\s+and\s+{_N}",
     lambda m: " + ".join([m.group(1), *re.findall(r"-?\d+(?:\.\d+)?", m.group(2)), m.group(3)])),
    # Verb phrasings name the operation before its operands: "add 2 and 40", "subtract 3 from 10".
    (rf"\b(?:add|sum(?: of)?|total of){_OF}{_N}\s+(?:and|to|with|plus)\s+{_N}", r"\1 + \2"),
    (rf"\bsubtract\s+{_N}\s+from\s+{_N}", r"\2 - \1"),
    (rf"\b(?:multiply|product of){_OF}{_N}\s+(?:by|and|with)\s+{_N}", r"\1 * \2"),
    (rf"\bdivide\s+{_N}\s+by\s+{_N}", r"\1 / \2"),
    (rf"\bdifference between\s+{_N}\s+and\s+{_N}", r"\1 - \2"),
    (r"(\d+(?:\.\d+)?)\s*(?:%|percent)\s*of\b", r"(\1/100)*"),
    (rf"\b(?:square root of|sqrt)\s*{_N}", r"sqrt(\1)"), (rf"\bnatural log(?:arithm)? of\s*{_N}", r"ln(\1)"),
    (rf"\b(log|sin|cos|tan)\w* of\s*{_N}", r"\1(\2)"), (r"\bto the power of\b", "**"),
    (r"\bsquared\b", "**2"), (r"\bcubed\b", "**3"), (r"\btimes\b", "*"),
    (r"\bmultiplied by\b", "*"), (r"\bdivided by\b", "/"), (r"\bover\b", "/"), (r"\bplus\b", "+"),
    (r"\bminus\b", "-"), (r"\bmod(?:ulo)?\b", "%"), (r"\bsquare root of\b", "sqrt"), (r"\^", "**"),
    (r"(\d)\s*x\s*(\d)", r"\1*\2"), (r"\u00d7", "*"), (r"\u00f7", "/"),
]
_FUNCS = {"sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tan": math.tan, "log": math.log10,
          "ln": math.log, "exp": math.exp, "abs": abs, "round": round, "floor": math.floor, "ceil": math.ceil}
_CONSTS = {"pi": math.pi, "e": math.e}
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.USub: operator.neg,
        ast.UAdd: operator.pos}
_EXPR = re.compile(r"(?:[-+*/%().\d\s]|\*\*|sqrt|sin|cos|tan|log|ln|exp|abs|round|floor|ceil|pi|\be\b)+")


def _bits(value: float) -> float:
    return math.log2(abs(value)) if abs(value) > 1 else 0.0


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTS:
        return _CONSTS[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 1000 or _bits(left) * abs(right) > 100_000):
            # A power of a power ("(9**999)**999") would hold the server's only thread for many seconds.
            raise ToolError("exponent too large")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        return _FUNCS[node.func.id](*[_eval(a) for a in node.args])
    raise ToolError(f"unsupported expression element: {ast.dump(node)[:60]}")


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)?", re.sub(r"(\d),(\d{3})", r"\1\2", text))


def evaluate(text: str) -> tuple[str, float]:
    expr = text.lower()
    for pattern, repl in _WORDS:
        expr = re.sub(pattern, repl, expr)
    candidates = [m.group(0).strip() for m in _EXPR.finditer(expr)]
    candidates = [c for c in candidates if re.search(r"\d", c)]
    if not candidates:
        raise ToolError(f"no arithmetic found in {text!r}")
    expr = max(candidates, key=len).strip(" .")
    if re.fullmatch(r"-?[\d.]+", expr):
        # A number with no operation found on it: answering "3 = 3" to "the area of a circle of radius 3" or
        # "the numbers 3 and 4" would be a wrong answer.
        raise ToolError(f"no operation found on the numbers of {text!r}")
    found = {float(n) for n in _numbers(expr)}
    unused = [n for n in _numbers(text) if float(n) not in found]
    if unused:
        # "multiply 6 by 7 and add 3" is not 42: an answer that leaves a number out answers another question.
        raise ToolError(f"the arithmetic found, {expr!r}, leaves out {', '.join(unused)} of {text!r}")
    try:
        value = _eval(ast.parse(expr, mode="eval"))
    except (SyntaxError, ZeroDivisionError, ValueError, OverflowError, TypeError) as exc:
        raise ToolError(f"cannot evaluate {expr!r}: {exc}") from exc
    return expr, value


@server.tool(annotations=READ_ONLY)
async def calculate(query: str) -> str:
    """Evaluate arithmetic: add (plus, sum), subtract (minus), multiply (times), divide (divided by, over),
    remainders (mod), powers (squared, cubed), percentages, square roots (sqrt), sin, log, pi. The query may be a
    question such as 'what is 12 times (3 + 4)?' or 'what is 15 percent of 80?', or a bare expression like
    '2^10 / 4'."""
    expr, value = evaluate(query)
    shown = int(value) if float(value).is_integer() else round(value, 10)
    return f"{expr} = {shown}"


# Each unit: (dimension, factor to the dimension's base unit). Temperatures are handled apart.
_UNITS: dict[str, tuple[str, float]] = {}


def _add(dimension: str, factor: float, *names: str) -> None:
    for n in names:
        _UNITS[n] = (dimension, factor)


_add("length", 1.0, "m", "meter", "meters", "metre", "metres")
_add("length", 1000.0, "km", "kilometer", "kilometers", "kilometre", "kilometres")
_add("length", 0.01, "cm", "centimeter", "centimeters", "centimetre", "centimetres")
_add("length", 0.001, "mm", "millimeter", "millimeters")
_add("length", 1609.344, "mi", "mile", "miles")
_add("length", 0.9144, "yd", "yard", "yards")
_add("length", 0.3048, "ft", "foot", "feet")
_add("length", 0.0254, "in", "inch", "inches")
_add("length", 1852.0, "nmi", "nautical mile", "nautical miles")
_add("mass", 1.0, "kg", "kilogram", "kilograms", "kilo", "kilos")
_add("mass", 0.001, "g", "gram", "grams")
_add("mass", 0.45359237, "lb", "lbs", "pound", "pounds")
_add("mass", 0.028349523125, "oz", "ounce", "ounces")
_add("mass", 1000.0, "t", "tonne", "tonnes", "ton", "tons")
_add("volume", 1.0, "l", "liter", "liters", "litre", "litres")
_add("volume", 0.001, "ml", "milliliter", "milliliters", "millilitre", "millilitres")
_add("volume", 3.785411784, "gal", "gallon", "gallons")
_add("volume", 0.2365882365, "cup", "cups")
_add("speed", 1.0, "m/s", "meters per second")
_add("speed", 1 / 3.6, "km/h", "kph", "kmh", "kilometers per hour")
_add("speed", 0.44704, "mph", "miles per hour")
_add("speed", 0.514444, "knot", "knots")
_add("time", 1.0, "s", "sec", "second", "seconds")
_add("time", 60.0, "min", "minute", "minutes")
_add("time", 3600.0, "h", "hr", "hour", "hours")
_add("time", 86400.0, "day", "days")
_add("time", 604800.0, "week", "weeks")
_add("data", 1.0, "b", "byte", "bytes")
_add("data", 1e3, "kb", "kilobyte", "kilobytes")
_add("data", 1e6, "mb", "megabyte", "megabytes")
_add("data", 1e9, "gb", "gigabyte", "gigabytes")
_add("data", 1e12, "tb", "terabyte", "terabytes")
_add("data", 2**30, "gib", "gibibyte", "gibibytes")
_add("data", 2**20, "mib", "mebibyte", "mebibytes")
_TEMPS = {"c": "C", "celsius": "C", "°c": "C", "f": "F", "fahrenheit": "F", "°f": "F", "k": "K", "kelvin": "K"}
_UNIT_RE = "|".join(sorted((re.escape(u) for u in [*_UNITS, *_TEMPS]), key=len, reverse=True))
_CONVERSION = re.compile(
    rf"(-?\d+(?:\.\d+)?)\s*(?:degrees?\s+)?({_UNIT_RE})\b.*?\b(?:to|in|into|as)\s+(?:degrees?\s+)?({_UNIT_RE})\b",
    re.I)


def _temperature(value: float, src: str, dst: str) -> float:
    kelvin = {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[src]
    return {"C": kelvin - 273.15, "F": (kelvin - 273.15) * 9 / 5 + 32, "K": kelvin}[dst]


@server.tool(annotations=READ_ONLY)
async def convert_units(query: str) -> str:
    """Convert a quantity between units of length, mass, volume, temperature, speed, time or digital
    storage, e.g. 'convert 5 km to miles', 'how many pounds is 3 kg', '100 F in celsius'."""
    m = _CONVERSION.search(query)
    if not m:
        m2 = re.search(rf"how many ({_UNIT_RE}) (?:is|are|in|are in|is in) (-?\d+(?:\.\d+)?\s*|an?\s+|one\s+)"
                       rf"({_UNIT_RE})\b", query, re.I)
        if not m2:
            raise ToolError(f"no conversion found in {query!r}; say for example '5 km to miles'")
        amount = m2.group(2).strip()
        dst, value, src = m2.group(1).lower(), float(amount) if amount[0].isdigit() or amount[0] == "-" else 1.0, \
            m2.group(3).lower()
    else:
        value, src, dst = float(m.group(1)), m.group(2).lower(), m.group(3).lower()
    if src in _TEMPS and dst in _TEMPS:
        result = _temperature(value, _TEMPS[src], _TEMPS[dst])
        return f"{value:g} °{_TEMPS[src]} = {result:.2f} °{_TEMPS[dst]}"
    if src not in _UNITS or dst not in _UNITS:
        raise ToolError(f"unknown unit in {query!r}")
    (d1, f1), (d2, f2) = _UNITS[src], _UNITS[dst]
    if d1 != d2:
        raise ToolError(f"cannot convert {d1} ({src}) to {d2} ({dst})")
    result = value * f1 / f2
    return f"{value:g} {src} = {result:.6g} {dst}"


if __name__ == "__main__":
    server.run()
