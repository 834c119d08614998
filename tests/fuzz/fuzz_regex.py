"""atheris target: a regular expression -> compile_regex -> a short walk.  Input: the
pattern text (UTF-8, errors replaced); its last 8 bytes also pick the walk's tokens."""

import fuzzlib
from fuzzlib import COMPILER, EXPECTED, budget, walk


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    try:
        with budget():
            compiled = COMPILER.compile_regex(text)
        walk(compiled, data[-8:])
    except EXPECTED:
        pass


if __name__ == "__main__":
    fuzzlib.main(test_one_input)
