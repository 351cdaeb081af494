"""JSON Schema validation for the tests, each schema checked once.

`jsonschema.validate` checks the schema against its metaschema on every call, which
costs ten times the validation itself: the BFCL round trips validate tens of thousands
of calls against a few thousand schemas. Here a validator is built (and its schema
checked) once per schema, keyed by the schema's canonical JSON text.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema
from jsonschema.protocols import Validator


def validate(instance: Any, schema: Any) -> None:
    """As `jsonschema.validate`: raises `jsonschema.SchemaError` for an invalid schema
    and `jsonschema.ValidationError` for an instance outside a valid one."""
    _validator(json.dumps(schema, sort_keys=True)).validate(instance)


@lru_cache(maxsize=8192)
def _validator(text: str) -> Validator:
    schema = json.loads(text)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator: Validator = cls(schema)
    return validator
