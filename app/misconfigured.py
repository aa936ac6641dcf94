"""The error of an environment the service cannot start with, raised by every module that reads
one (configuration, logging, tracing) — on its own, so raising it imports none of them."""


class ConfigurationError(Exception):
    """A variable of the environment that the service cannot start with: the message is one
    line that names the variable (and never repeats a secret's value)."""
