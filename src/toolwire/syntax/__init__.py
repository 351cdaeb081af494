"""Argument syntaxes: small pure objects that parse one call body (see `formats.spec`)."""
