"""One module per wire format, each declaring everything about it: its codec (``CODEC``),
which carries what the steps, the proxy and ``wrap()`` ask of a format (how calls and
results pair, where the history and the usage are, its routes, its provider's errors).
:mod:`middleware.formats.registry` finds every module here: a new format is one new file."""
