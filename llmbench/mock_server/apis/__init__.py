"""One handler module per API the mock serves (its docstring names its routes), each parsing
its own body and shaping its own reply on the shared generation (generate.py). Each has
``add_routes(app, ctx)``."""
