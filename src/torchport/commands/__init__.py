"""One module per command group; each exposes ``register(subparsers)``.

``register`` adds its sub-parser(s) and sets ``func`` to a callable taking the
parsed arguments and returning an exit status.  Logic lives elsewhere.
"""
