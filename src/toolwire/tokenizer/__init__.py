"""Tokenizers: the one place toolwire touches a vocabulary.

Data flow::

    folder | tokenizer file | hub id
        -> load_tokenizer()            files.py: files are read here, never in the parser
        -> Tokenizer                   base.py: the interface every consumer takes
             HuggingFaceTokenizer      hugging_face.py: wraps a `tokenizers.Tokenizer`
             MistralTokenizer          mistral.py: wraps mistral-common's tokenizer
             .encode(text, delimiters=True)   added tokens matched, as a model emits them
             .encode(text, delimiters=False)  every character spelled from ordinary tokens
             .token_id(text)                  the id when `text` is one token, else None
             .detokenizer()                   incremental id -> text, one per stream
                                              (table.py: by table, for fixed-byte ids)

Imports point one way: base and table import nothing here; each implementation
imports base and table; files imports the implementations; this module re-exports.
A `Tokenizer` does no I/O: it is built from in-memory objects, so the sans-I/O parser
can take one. Per-vocabulary tables derived from a tokenizer (a format's delimiters
as this vocabulary sees them) are cached by their owner, `toolwire.lexicon`.
"""

from __future__ import annotations

from toolwire.tokenizer.base import Detokenizer, Tokenizer
from toolwire.tokenizer.files import load_tokenizer
from toolwire.tokenizer.hugging_face import HuggingFaceTokenizer
from toolwire.tokenizer.mistral import MistralTokenizer

__all__ = ["Detokenizer", "HuggingFaceTokenizer", "MistralTokenizer", "Tokenizer", "load_tokenizer"]
