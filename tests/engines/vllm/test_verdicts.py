"""The same requests on vLLM's xgrammar backend and on xg2 give the same accept/reject verdict on
a corpus of valid and invalid outputs (corpus.py), except the differences listed below, where
the independent oracle (jsonschema, re, json) says xg2 is right.

Each request is built through vLLM's own classes (SamplingParams validation, then the
StructuredOutputManager of each backend); each output is tokenized and fed token by token through
`manager.accept_tokens`, then EOS. The verdict: every token accepted and the grammar terminated.
A request vLLM refuses (validation or compile error) rejects every output."""
from __future__ import annotations

import pytest
from conftest import make_request
from corpus import Case, bfcl_cases, format_tag_oracle, grammar_cases, suite_cases

# case -> {output: xg2's verdict}, which the oracle shares and XGrammar 0.2.8 does not. Where
# XGrammar accepts an invalid output (False below) it ignores bounds, lengths, multipleOf,
# pattern, item and property counts on a schema without "type" (also inside anyOf/oneOf), and
# patternProperties; where it rejects a valid one (True) it reads a schema without "type" as an
# object or an array, or mishandles boolean subschemas, object and array constants, allOf of
# bounds, 1.0 as an integer, a non-ASCII property pattern.
KNOWN_DIFFERENCES: dict = {
    "jsts/additionalProperties/0": {'[1, 2, 3]': True, '"foobarbaz"': True, '12': True, '{"foo": 1, "vroom": 2}': True},
    "jsts/additionalProperties/1": {'{"\\u00e1rm\\u00e1nyos": 2}': True},
    "jsts/allOf/2": {'25': True},
    "jsts/anyOf/0": {'1.5': False},
    "jsts/anyOf/1": {'3': False, '"foo"': False},
    "jsts/const/1": {'{"foo": "bar", "baz": "bax"}': True},
    "jsts/const/2": {'[{"foo": "bar"}]': True},
    "jsts/enum/1": {'{"foo": 12}': True},
    "jsts/exclusiveMaximum/0": {'3.0': False, '3.5': False},
    "jsts/exclusiveMinimum/0": {'1.1': False, '0.6': False},
    "jsts/items/0": {'{"foo": "bar"}': True, '{"0": "invalid", "length": 1}': True},
    "jsts/maxItems/0": {'[1, 2, 3]': False},
    "jsts/maxItems/1": {'[1, 2, 3]': False},
    "jsts/maxLength/0": {'"foo"': False},
    "jsts/maxLength/1": {'"foo"': False},
    "jsts/maxProperties/0": {'{"foo": 1, "bar": 2, "baz": 3}': False},
    "jsts/maxProperties/1": {'{"foo": 1, "bar": 2, "baz": 3}': False},
    "jsts/maxProperties/2": {'{"foo": 1}': False},
    "jsts/maximum/0": {'3.5': False},
    "jsts/maximum/1": {'300.5': False},
    "jsts/minItems/0": {'[]': False},
    "jsts/minItems/1": {'[]': False},
    "jsts/minLength/0": {'"f"': False, '"\\ud83d\\udca9"': False},
    "jsts/minLength/1": {'"f"': False},
    "jsts/minProperties/0": {'{}': False},
    "jsts/minProperties/1": {'{}': False},
    "jsts/minimum/0": {'0.6': False},
    "jsts/minimum/1": {'-2.0001': False, '-3': False},
    "jsts/multipleOf/0": {'7': False},
    "jsts/multipleOf/1": {'35': False},
    "jsts/multipleOf/2": {'0.00751': False},
    "jsts/oneOf/0": {'3': False, '1.5': False},
    "jsts/oneOf/1": {'3': False, '"foo"': False},
    "jsts/pattern/0": {'"abc"': False},
    "jsts/patternProperties/0": {'{"foo": "bar", "fooooo": 2}': False, '{"foo": "bar", "foooooo": "baz"}': False},
    "jsts/patternProperties/1": {'{"a": "bar"}': False, '{"aaaa": 31}': False, '{"aaa": "foo", "aaaa": 31}': False},
    "jsts/patternProperties/2": {'{"a31b": null}': False, '{"a_X_3": 3}': False},
    "jsts/prefixItems/0": {'{"0": "invalid", "1": "valid", "length": 2}': True},
    "jsts/prefixItems/1": {'[1]': True, '[]': True},
    "jsts/properties/0": {'[]': True, '12': True},
    "jsts/properties/1": {'{"foo": [1, 2]}': False, '{"foo": [1, 2, 3, 4]}': False, '{"foo": []}': False, '{"fxo": []}': False},
    "jsts/properties/2": {'{}': True, '{"foo": 1}': True},
    "jsts/required/0": {'[]': True, '""': True, '12': True},
    "jsts/type/0": {'1.0': True},
}

# cases xg2 refuses (a 400 naming the keyword) that XGrammar compiles, ignoring a keyword, and
# then decides wrong on some output: case -> what xg2's error names
REFUSED: dict = {
    "jsts/oneOf/2": "accepts no value",  # oneOf [true, true, true]: XGrammar accepts "foo"
    "jsts/uniqueItems/0": "uniqueItems",  # XGrammar ignores uniqueItems: accepts [1, 1]
    "jsts/uniqueItems/1": "uniqueItems",
    "jsts/uniqueItems/2": "uniqueItems",
}


def _verdict(manager, params, tokens):
    """True / False, or the error text when vLLM refuses the request (its 400)."""
    from vllm.sampling_params import StructuredOutputsParams

    try:
        req = make_request(manager, StructuredOutputsParams(**params))
    except Exception as e:  # noqa: BLE001 -- validation or compile error: the request is refused
        return str(e) or type(e).__name__
    for t in tokens:
        if not manager.accept_tokens(req, [t]):
            return False
    return req.structured_output_request.grammar.is_terminated()


def _hermes_cases(tokenizer) -> list:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser import ParserManager

    from corpus import CALL, TAG_SCHEMA

    tool = {"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": TAG_SCHEMA}}
    nl = '<tool_call>\n{"name": "get_weather", "arguments": %s}\n</tool_call>'
    flat = '<tool_call>{"name": "get_weather", "arguments": %s}</tool_call>'
    outputs = [nl % CALL, flat % CALL, nl % CALL + flat % CALL, "Sure. " + nl % CALL, "no call",
               nl % '{"city": "Paris"}', nl.replace("get_weather", "get_time") % CALL, nl % CALL + " done",
               (nl % CALL)[:-3], flat % '{"city": "Paris", "days": "2"}']
    cases = []
    for choice in ("required", "auto"):
        request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "Weather?"}],
                                        tools=[tool], tool_choice=choice)
        parser = ParserManager.get_parser(tool_parser_name="hermes", enable_auto_tools=True)(tokenizer, request.tools)
        tag = parser.adjust_request(request).structured_outputs.structural_tag
        cases.append(Case(f"stag/hermes-{choice}", {"structural_tag": tag}, outputs, format_tag_oracle(tag), True))
    return cases


def _compare(manager_for, cases):
    """Every (case, output) through both backends. Returns the differences in verdict
    {(case, output): (xg2, oracle)} and the cases xg2 refuses and XGrammar does not
    {case: (xg2's error, whether XGrammar's verdicts are all the oracle's)}."""
    differences, refused, count, right = {}, {}, 0, {True: 0, False: 0}
    for case in cases:
        ours, theirs = manager_for(tools=case.tools), manager_for(backend="xgrammar", tools=case.tools)
        tok = ours.tokenizer
        for text in case.outputs:
            tokens = tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
            v_ours, v_theirs = _verdict(ours, case.params, tokens), _verdict(theirs, case.params, tokens)
            oracle = case.oracle(text)
            count += 1
            if isinstance(v_ours, str):
                if not isinstance(v_theirs, str):
                    err, all_right = refused.get(case.name, (v_ours, True))
                    refused[case.name] = (err, all_right and v_theirs == oracle)
                continue
            right[v_ours] += v_ours == oracle
            if v_ours != (v_theirs is True):
                differences[(case.name, text)] = (v_ours, oracle)
    # the verdicts are not all one way: xg2 accepts what the oracle accepts, and rejects
    assert right[True] and right[False], f"accepted / rejected as the oracle says: {right}"
    return differences, refused, count


def _check(differences, refused, count, prefix):
    listed = {(case, text): v for case, outputs in KNOWN_DIFFERENCES.items() if case.startswith(prefix)
              for text, v in outputs.items()}
    wrong = {k: v for k, v in differences.items() if v[0] != v[1]}
    assert not wrong, f"xg2 differs from XGrammar and the oracle (case, output): (xg2, oracle) {wrong}"
    assert {k: v[0] for k, v in differences.items()} == listed, \
        f"the differences changed: seen {sorted(differences)} listed {sorted(listed)}"
    # a refusal is right where XGrammar, which compiles the request, gets some verdict wrong
    for name, (err, xgrammar_all_right) in refused.items():
        assert name in REFUSED and REFUSED[name] in err, f"{name}: xg2 refuses: {err}"
        assert not xgrammar_all_right, f"{name}: xg2 refuses what XGrammar decides right: {err}"
    assert sorted(refused) == sorted(k for k in REFUSED if k.startswith(prefix)), sorted(refused)
    assert count > 0


@pytest.mark.parametrize("prefix", ["jsts", "bfcl"])
def test_json_schema_verdicts(manager_for, prefix):
    cases = suite_cases() if prefix == "jsts" else bfcl_cases()
    assert len(cases) >= 15
    _check(*_compare(manager_for, cases), prefix)


@pytest.mark.parametrize("prefix", ["json_object", "choice", "regex", "ebnf", "lark", "stag"])
def test_request_type_verdicts(manager_for, prefix):
    cases = [c for c in grammar_cases() if c.name.startswith(prefix)]
    if prefix == "stag":
        cases += _hermes_cases(manager_for(tools=True).tokenizer)
    _check(*_compare(manager_for, cases), prefix)


def test_oracles_see_both_verdicts():
    """The corpus holds valid and invalid outputs for every request type (by the oracle)."""
    for case in grammar_cases() + suite_cases() + bfcl_cases():
        kinds = {case.oracle(t) for t in case.outputs}
        assert kinds == {True, False} or case.name.startswith("jsts"), (case.name, kinds)
