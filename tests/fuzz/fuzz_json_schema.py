"""atheris target: JSON Schema text -> compile_json_schema -> a short walk.

Input: the schema's JSON text (UTF-8, errors replaced), given to the compiler as text
(so JSON parsing is fuzzed too) under options picked by the input's length; its last
8 bytes also pick the walk's tokens."""

import fuzzlib
from fuzzlib import COMPILER, EXPECTED, budget, walk

# (any_whitespace, separators, indent, strict_mode, any_order)
OPTIONS = [
    (True, None, None, True, False),
    (False, (",", ":"), None, False, False),
    (False, None, 2, True, True),
    (True, None, None, False, True),
]


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    any_ws, seps, indent, strict, any_order = OPTIONS[len(data) % len(OPTIONS)]
    try:
        with budget():
            compiled = COMPILER.compile_json_schema(
                text, any_whitespace=any_ws, separators=seps, indent=indent,
                strict_mode=strict, any_order=any_order)
        walk(compiled, data[-8:])
    except EXPECTED:
        pass


if __name__ == "__main__":
    fuzzlib.main(test_one_input)
