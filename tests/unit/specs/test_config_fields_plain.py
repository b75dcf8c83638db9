"""config_fields' plain check agrees with its pydantic models on every bundled config and on mutated ones.

`validate_config` answers from plain Python when it can say "valid" and asks the pydantic models otherwise; here
each config (and copies with one field made wrong: a wrong type, out of range, a bool for an int, ...) is judged by
validate_config and by the pydantic models alone, and the two verdicts (None, or the one-line error) must match.
"""

import copy
import json
import math

import pytest

from paths import ROOT
from specbench.errors import ConfigError
from specbench.specs import config_fields as cf

CONFIGS = sorted((ROOT / "src/specbench/data/configs").glob("*.json")) + sorted(
    (ROOT / "tests/data/quant-configs").glob("*/config.json"))


def _verdict(fn, config, name="m"):
    try:
        fn(config, name)
    except ConfigError as exc:
        return str(exc)
    return None


def _pydantic_only(config, name):
    """The verdict of the pydantic models alone: what validate_config answered before the plain check existed."""
    for prefix, level in (("", config), ("text_config.", config.get("text_config"))):
        if isinstance(level, dict):
            cf.validate_level_with_pydantic(level, name, prefix)


def _agree(config):
    fast, slow = _verdict(cf.validate_config, config), _verdict(_pydantic_only, config)
    assert fast == slow, (fast, slow)
    return fast


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.parent.name if p.name == "config.json" else p.stem)
def test_every_bundled_config_is_judged_alike(path):
    config = json.loads(path.read_text())
    assert _agree(config) is None  # the bundled configs are valid
    # ... and the plain check knows it at both levels (pydantic stays unloaded)
    assert cf._plain_level(config, cf.CONFIG_FIELDS)
    assert not isinstance(config.get("text_config"), dict) or cf._plain_level(config["text_config"], cf.CONFIG_FIELDS)


# values of every JSON shape and the edges of the ranges: each replaces one field in turn
WRONG = ["x", "", True, False, 0, 1, -1, -2, 33, 4096, 4097, 1 << 20, (1 << 20) + 1, 1 << 31, (1 << 31) + 1, 10 ** 30,
         1.0, 1.5, math.nan, math.inf, None, [], [1], [0, 4097], [True], ["a"], ["a", 1], [1.0], {}, {"a": 1}, {1: 2},
         "fp8", "FP8", "nope", "M" * 4096, "M" * 4097, "\ud800"]
BASES = ["Qwen__Qwen3-8B.json", "Qwen__Qwen3.5-27B.json", "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json"]


def _levels(config):
    yield config, cf.CONFIG_FIELDS
    if isinstance(config.get("text_config"), dict):
        yield config["text_config"], cf.CONFIG_FIELDS
    for level in (config, config.get("text_config")):
        if isinstance(level, dict):
            q = level.setdefault("quantization_config", {"quant_method": "fp8"})
            if isinstance(q, dict):
                yield q, cf.QUANT_FIELDS


@pytest.mark.parametrize("base", BASES)
def test_one_wrong_field_is_judged_alike(base):
    config = json.loads((ROOT / "src/specbench/data/configs" / base).read_text())
    errors = set()
    for index in range(len(list(_levels(copy.deepcopy(config))))):
        for field in list(cf.CONFIG_FIELDS) + list(cf.QUANT_FIELDS):
            for value in WRONG:
                mutated = copy.deepcopy(config)
                level, fields = list(_levels(mutated))[index]
                if field not in fields:
                    continue
                level[field] = value
                verdict = _agree(mutated)
                if verdict is not None:
                    errors.add(verdict)
    assert errors  # many of the mutations are errors (each checked above to be pydantic's own line)


@pytest.mark.parametrize("config", [{"x\ud800": 1}, {1: 2}, {"text_config": {"k\ud800": 1}}, {"text_config": {2: 1}},
                                    {"quantization_config": {3: "fp8"}}, {"quantization_config": []},
                                    {"architectures": ("A",)}, {"num_hidden_layers": 2, "unknown": object()},
                                    {"model_dump": 1, "__dict__": 2, "": 3}, {"text_config": {"model_config": {}}}])
def test_unusual_keys_and_containers_are_judged_alike(config):
    _agree(config)


@pytest.mark.parametrize("config, line", [
    ({"num_hidden_layers": True}, "m: config.json field 'num_hidden_layers': Input should be a valid integer "
                                  "(got True)"),
    ({"text_config": {"vocab_size": 1.0}}, "m: config.json field text_config.'vocab_size': Input should be a valid "
                                           "integer (got 1.0)"),
    ({"hidden_size": -1, "vocab_size": "x"}, "m: config.json field 'hidden_size': Input should be greater than or "
                                             "equal to 0 (got -1) (+1 more)"),
    ({"quantization_config": {"quant_method": "nope"}}, "m: config.json field 'quantization_config.quant_method': "
                                                        "unknown quantization method 'nope' (known: "),
    ({"mlp_only_layers": [1, 5000]}, "m: config.json field 'mlp_only_layers.1': Input should be less than or equal "
                                     "to 4096 (got 5000)"),
])
def test_the_error_is_one_line_naming_the_field(config, line):
    got = _agree(config)
    assert got is not None and got.startswith(line) and "\n" not in got, got
