"""One module per training framework behind the ``Framework`` protocol, and their registry."""
