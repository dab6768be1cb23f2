"""The package's own exceptions, in one module that imports nothing, so every other module may
raise them without importing the module that happens to check for them."""


class ParameterError(ValueError):
    """A bad notebook parameter; the message names what is valid."""


class AssetUnavailable(RuntimeError):
    """An asset is neither cached nor fetchable; the message says how to get it."""
