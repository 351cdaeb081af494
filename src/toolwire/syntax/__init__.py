"""Argument syntaxes: small pure objects that parse one call body.

Their protocol and context are in `syntax.protocol`; formats depend on this package,
never the reverse.
"""
