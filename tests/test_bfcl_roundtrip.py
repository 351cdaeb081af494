"""BFCL round trips: ground-truth calls rendered natively, tokenized, parsed back.

Every format, every category, held and streamed, cut into random deltas.
"""

from __future__ import annotations

import json
import os
import random

import pytest

from tests import bfcl, cases
from toolwire import Message, Parser, formats

SAMPLE = 60  # cases per category and format (fixed seed); all with TOOLWIRE_EXAMPLES>=1000


@pytest.mark.parametrize("category", bfcl.CATEGORIES)
@pytest.mark.parametrize("name", formats.names())
def test_bfcl_calls_round_trip(name: str, category: str) -> None:
    fmt = formats.get(name)
    tok = cases.tokenizer(name)
    rng = random.Random(f"{name}-{category}")
    rows = bfcl.load(category)
    limit = len(rows) if int(os.environ.get("TOOLWIRE_EXAMPLES", "200")) >= 1000 else SAMPLE
    for case_id, tools, calls in rng.sample(rows, min(limit, len(rows))):
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
