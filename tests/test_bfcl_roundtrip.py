"""BFCL round trips: ground-truth calls rendered natively, tokenized, parsed back.

Every format, every category, held and streamed, cut into random deltas. A case whose
ground truth does not validate against its own schema (BFCL lists acceptable values
loosely: `True` for a string parameter) is skipped, for every format alike: formats
whose values are text typed by the schema (XML parameters, pythonic, GLM) rightly
return the schema's type (`"True"`), so no round trip can hold for it.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

import jsonschema
import pytest

from tests import bfcl, cases
from tests.schemas import validate
from toolwire import Message, Parser, formats

SAMPLE = 60  # cases per category and format (fixed seed); all with TOOLWIRE_EXAMPLES>=1000


def _valid(tools: list[dict[str, Any]], calls: list[tuple[str, dict[str, Any]]]) -> bool:
    """The ground truth validates against the schema it was given with."""
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
    try:
        for name, args in calls:
            validate(args, schemas[name])
    except (jsonschema.ValidationError, jsonschema.SchemaError, KeyError):
        return False
    return True


@pytest.mark.parametrize("category", bfcl.CATEGORIES)
@pytest.mark.parametrize("name", formats.names())
def test_bfcl_calls_round_trip(name: str, category: str) -> None:
    fmt = formats.get(name)
    tok = cases.tokenizer(name)
    rng = random.Random(f"{name}-{category}")
    rows = bfcl.load(category)
    limit = len(rows) if int(os.environ.get("TOOLWIRE_EXAMPLES", "200")) >= 1000 else SAMPLE
    checked = 0
    for case_id, tools, calls in rng.sample(rows, min(limit, len(rows))):
        if not _valid(tools, calls):
            continue
        checked += 1
        ids = tok.encode(fmt.render_output(calls=calls))
        for stream in (False, True):
            parser = Parser(name, tok, tools=tools, stream_arguments=stream)
            events = []
            start = 0
            while start < len(ids):
                size = rng.choice([1, 1, 2, 3, 8, 64])
                events += parser.feed(ids[start : start + size])
                start += size
            events += parser.finish()
            msg = Message.from_events(events)
            assert msg.content is None, (case_id, msg.content)
            got = [(c.name, json.loads(c.arguments)) for c in msg.tool_calls]
            assert [n for n, _ in got] == [n for n, _ in calls], case_id
            for (_, args), (_, want) in zip(got, calls, strict=True):
                assert args == want, (case_id, args, want)  # 5 == 5.0: JSON numbers
    assert checked >= min(limit, len(rows)) * 0.9, checked
