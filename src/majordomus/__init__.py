"""majordomus: the record of every AI coding-agent episode. Every hook imports this: keep it bare."""

__version__ = "0.1.0"
