#!/usr/bin/env python3
"""Renders chat templates as Hugging Face transformers' apply_chat_template does, with
Debian's python3-jinja2: the reference that Lockstep's chat-template tests compare with.

    chat_template_reference.py INPUT.json OUTPUT.jsonl

INPUT is {"config": "path/to/tokenizer_config.json"} (optionally with "template": a
chat template that replaces the config's), or {"template": "...", "special_tokens":
{...}}, plus "cases": [{"messages": [...], "tools": [...] or null,
"add_generation_prompt": bool, "extra": {...}}]. OUTPUT has one line per case:
{"text": "..."} or {"error": "ExceptionName: message"}; every case reports
{"error": "NoChatTemplate: ..."} when the config has no chat template.

The environment follows transformers (chat_template_utils._compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loop
controls extension and the `generation` tag, raise_exception, strftime_now and a tojson
that is json.dumps(ensure_ascii=False). The variables are the tokenizer's
special_tokens_map, then the case's extra variables, then messages, tools, documents
and add_generation_prompt.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                  "cls_token", "mask_token"]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


class AssistantTracker(Extension):
    """transformers' {% generation %} tag, without the assistant-mask bookkeeping."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def token_text(token):
    if isinstance(token, dict):
        return token.get("content") or ""
    return token or ""


def special_tokens_map(config):
    """transformers' special_tokens_map: the non-empty special tokens, as strings."""
    out = {}
    for name in SPECIAL_TOKENS:
        text = token_text(config.get(name))
        if text:
            out[name] = text
    additional = [token_text(t) for t in config.get("additional_special_tokens") or []]
    if additional:
        out["additional_special_tokens"] = additional
    for name, token in (config.get("extra_special_tokens") or {}).items():
        text = token_text(token)
        if text:
            out[name] = text
    return out


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    if "config" in spec:
        with open(spec["config"], encoding="utf-8") as f:
            config = json.load(f)
        source = spec.get("template", config.get("chat_template"))
        if isinstance(source, list):
            source = {t["name"]: t["template"] for t in source}.get("default")
        special = special_tokens_map(config)
    else:
        source = spec["template"]
        special = spec.get("special_tokens") or {}
    template, load_error = None, None
    if source is None:
        load_error = "NoChatTemplate: the tokenizer config has no chat_template"
    else:
        try:
            template = environment().from_string(source)
        except Exception as e:  # noqa: BLE001 - reported to the test
            load_error = f"{type(e).__name__}: {e}"
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        for case in spec["cases"]:
            if load_error is not None:
                result = {"error": load_error}
            else:
                variables = {**special, **(case.get("extra") or {})}
                try:
                    text = template.render(messages=case["messages"], tools=case.get("tools"),
                                           documents=None,
                                           add_generation_prompt=case["add_generation_prompt"],
                                           **variables)
                    result = {"text": text}
                except Exception as e:  # noqa: BLE001 - reported to the test
                    result = {"error": f"{type(e).__name__}: {e}"}
            out.write(json.dumps(result, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
